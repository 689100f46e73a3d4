"""The client library a user's process imports: group members, admin, typed errors.

It reaches the service only through Ray handles and the protocol's request dataclasses; it
never imports the service's modules.
"""

from .admin import AdminClient
from .errors import CommitFailedError, GroupCoordinatorError, error_for
from .handle import PartitionReplicas, Service, ServiceError
from .member import GroupMember
from .membership import RebalanceListener

__all__ = [
    "AdminClient",
    "CommitFailedError",
    "GroupCoordinatorError",
    "GroupMember",
    "RebalanceListener",
    "PartitionReplicas",
    "Service",
    "ServiceError",
    "error_for",
]
