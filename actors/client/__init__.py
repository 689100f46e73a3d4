"""The client library a user's process imports: group members, admin, typed errors.

It reaches the service only through Ray handles and the protocol's request dataclasses; it
never imports the service's modules.
"""

from groupcoord.protocol import Errors as _Errors
from groupcoord.protocol.security.acl import AclBinding
from groupcoord.protocol.security.credentials import Credentials

from .admin import AdminClient
from .errors import ERROR_CLASSES, CommitFailedError, GroupCoordinatorError, error_for
from .handle import PartitionReplicas, Service, ServiceError
from .member import GroupMember
from .membership import RebalanceListener

# The typed errors of authentication and authorization, by name (every code has one: see errors.py).
SaslAuthenticationFailedError = ERROR_CLASSES[_Errors.SASL_AUTHENTICATION_FAILED]
GroupAuthorizationFailedError = ERROR_CLASSES[_Errors.GROUP_AUTHORIZATION_FAILED]
TopicAuthorizationFailedError = ERROR_CLASSES[_Errors.TOPIC_AUTHORIZATION_FAILED]
ClusterAuthorizationFailedError = ERROR_CLASSES[_Errors.CLUSTER_AUTHORIZATION_FAILED]

__all__ = [
    "AclBinding",
    "AdminClient",
    "ClusterAuthorizationFailedError",
    "Credentials",
    "GroupAuthorizationFailedError",
    "SaslAuthenticationFailedError",
    "TopicAuthorizationFailedError",
    "CommitFailedError",
    "GroupCoordinatorError",
    "GroupMember",
    "RebalanceListener",
    "PartitionReplicas",
    "Service",
    "ServiceError",
    "error_for",
]
