"""groupcoord.protocol: the pure group protocol (no Ray, no I/O, no wall clock inside the shard).

Everything API.md names is importable from here.
"""

from .clock import Clock, ManualClock, SystemClock
from .config import GroupConfig
from .coordinator import GroupCoordinator
from .deferred import Deferred
from .errors import Errors
from .group import GroupState
from .log import MemoryLog, RecordBatchTooLarge, RecordLog
from .messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchPartition,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from .partitioner import partition_for
from .values import OffsetAndMetadata, TopicPartition

__all__ = [
    "Clock",
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "DescribedGroup",
    "DescribedMember",
    "Deferred",
    "Errors",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupMember",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "LeaveMemberResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListedGroup",
    "ManualClock",
    "MemberIdentity",
    "MemoryLog",
    "OffsetAndMetadata",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetDeleteRequest",
    "OffsetDeleteResponse",
    "OffsetFetchPartition",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "RecordBatchTooLarge",
    "RecordLog",
    "SyncGroupRequest",
    "SyncGroupResponse",
    "SystemClock",
    "TopicPartition",
    "partition_for",
]
