"""groupcoord.protocol.security: Kafka's ACL model, its per-API table, credentials and the request quota (pure)."""

from .acl import CLUSTER_NAME, AclBinding, Authorizer, InvalidAclError
from .credentials import Credentials
from .table import Admission, admit

__all__ = ["CLUSTER_NAME", "AclBinding", "Admission", "Authorizer", "Credentials", "InvalidAclError", "admit"]
