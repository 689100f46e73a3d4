"""Classic group membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup with Kafka's semantics.

Follows the Java group coordinator (GroupMetadataManager's classic-group paths). The durable
part of a group (generation, protocol, leader, members with assignments) changes only by
replaying GroupMetadata records; the in-flight part of a rebalance (parked requests, pending
members, timers) lives in memory only, as in Kafka, and is lost with a restart.

`GroupMetadataManager` is put together from one mixin per concern, each in its own module:

* store: the groups, identity checks, GroupMetadata records and their replay;
* rebalance: preparing and completing rebalances, session and pending-sync timers;
* join, sync, heartbeat_leave, listing: the requests.
"""

from __future__ import annotations

from ..responses import join_error, sync_error
from .heartbeat_leave import HeartbeatLeaveHandler
from .join import JoinGroupHandler
from .listing import GroupListingHandler
from .sync import SyncGroupHandler

__all__ = ["GroupMetadataManager", "join_error", "sync_error"]


class GroupMetadataManager(JoinGroupHandler, SyncGroupHandler, HeartbeatLeaveHandler, GroupListingHandler):
    """Owns the classic groups of one shard and the membership protocol that changes them."""
