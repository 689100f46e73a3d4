"""groupcoord.actors: the coordinator as a service on Ray, in three sub-rooms named after who runs the code.

- `service`: runs on the cluster (partition actors, router, start/connect/stop);
- `client`: imported by a user's process (GroupMember, AdminClient, typed errors);
- `tools`: the `groupcoord` command, offset-reset planning and the demo.
"""

from .client import (
    AclBinding,
    AdminClient,
    ClusterAuthorizationFailedError,
    CommitFailedError,
    Credentials,
    GroupAuthorizationFailedError,
    GroupCoordinatorError,
    GroupMember,
    PartitionReplicas,
    SaslAuthenticationFailedError,
    Service,
    ServiceError,
    TopicAuthorizationFailedError,
)
from .service import Observability, connect, start, stop

__all__ = [
    "AclBinding",
    "AdminClient",
    "ClusterAuthorizationFailedError",
    "CommitFailedError",
    "Credentials",
    "GroupAuthorizationFailedError",
    "GroupCoordinatorError",
    "GroupMember",
    "SaslAuthenticationFailedError",
    "TopicAuthorizationFailedError",
    "Observability",
    "PartitionReplicas",
    "Service",
    "ServiceError",
    "connect",
    "start",
    "stop",
]
