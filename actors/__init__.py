"""groupcoord.actors: the coordinator as a service on Ray, in three sub-rooms named after who runs the code.

- `service`: runs on the cluster (partition actors, router, start/connect/stop);
- `client`: imported by a user's process (GroupMember, AdminClient, typed errors);
- `tools`: the `groupcoord` command, offset-reset planning and the demo.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Each name is imported on first use (PEP 562): a Ray worker that hosts a partition actor imports
# the service's modules it needs, not the client library, the Kafka listener or kio.
_SERVICE_NAMES = {"Observability", "connect", "start", "stop"}

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


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(".service" if name in _SERVICE_NAMES else ".client", __name__)
    value = getattr(module, name)
    globals()[name] = value
    return value
