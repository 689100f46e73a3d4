"""The group coordinator's requests by name: Kafka's API names, as the shard's and the partition actor's methods.

Each value is the name of the `GroupCoordinator` method (and of the partition actor's remote method) that
serves the request; a StrEnum, so a value is also the plain string a caller of `batch` may send.
"""

from __future__ import annotations

import enum


class Api(enum.StrEnum):
    """One request type of the group coordinator (Kafka's API, with its key in the comment)."""

    JOIN_GROUP = "join_group"  # JoinGroup (11)
    SYNC_GROUP = "sync_group"  # SyncGroup (14)
    HEARTBEAT = "heartbeat"  # Heartbeat (12)
    LEAVE_GROUP = "leave_group"  # LeaveGroup (13)
    OFFSET_COMMIT = "commit_offsets"  # OffsetCommit (8)
    OFFSET_FETCH = "fetch_offsets"  # OffsetFetch (9)
    LIST_GROUPS = "list_groups"  # ListGroups (16)
    DESCRIBE_GROUPS = "describe_groups"  # DescribeGroups (15)
    DELETE_GROUPS = "delete_groups"  # DeleteGroups (42)
    OFFSET_DELETE = "delete_offsets"  # OffsetDelete (47)
    CONSUMER_GROUP_HEARTBEAT = "consumer_group_heartbeat"  # ConsumerGroupHeartbeat (68)
    CONSUMER_GROUP_DESCRIBE = "consumer_group_describe"  # ConsumerGroupDescribe (69)
