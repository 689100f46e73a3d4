"""The APIs the listener serves, the versions of each it handles, and ApiVersions itself.

ApiVersions advertises exactly this table (SaslHandshake and SaslAuthenticate always, as Kafka's
listeners do: with authorization off they answer ILLEGAL_SASL_STATE, as a PLAINTEXT listener
does). Every version in it is one kio decodes and encodes and the handler translates field by
field; version-dependent meaning (JoinGroup's member id from v4, OffsetFetch's groups from v8,
topic ids from v10, ...) is handled in the handlers.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from groupcoord.protocol import Errors

from . import handlers_cluster as cluster
from . import handlers_consumer as consumer
from . import handlers_groups_admin as admin
from . import handlers_membership as membership
from . import handlers_offsets as offsets
from . import sasl
from .context import RequestContext

Handler = Callable[[RequestContext, Any], Awaitable[dict]]

API_VERSIONS_KEY = 18


async def api_versions(ctx: RequestContext, req: Any) -> dict:
    """ApiVersions v0-4: the table below (features and ZK fields left at their defaults)."""
    return api_versions_answer(Errors.NONE)


# api key -> (name, min version, max version, handler)
APIS: dict[int, tuple[str, int, int, Handler]] = {
    1: ("Fetch", 4, 18, cluster.fetch),
    2: ("ListOffsets", 1, 11, cluster.list_offsets),
    3: ("Metadata", 0, 13, cluster.metadata),
    8: ("OffsetCommit", 2, 10, offsets.offset_commit),
    9: ("OffsetFetch", 1, 10, offsets.offset_fetch),
    10: ("FindCoordinator", 0, 6, cluster.find_coordinator),
    11: ("JoinGroup", 0, 9, membership.join_group),
    12: ("Heartbeat", 0, 4, membership.heartbeat),
    13: ("LeaveGroup", 0, 5, membership.leave_group),
    14: ("SyncGroup", 0, 5, membership.sync_group),
    15: ("DescribeGroups", 0, 6, admin.describe_groups),
    16: ("ListGroups", 0, 5, admin.list_groups),
    # Served before authentication by sasl.SaslSession; here (authenticated, or authorization off) they are
    # ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers them.
    sasl.SASL_HANDSHAKE_KEY: ("SaslHandshake", *sasl.HANDSHAKE_VERSIONS, sasl.illegal_handshake),
    18: ("ApiVersions", 0, 4, api_versions),
    19: ("CreateTopics", 2, 7, cluster.create_topics),
    sasl.SASL_AUTHENTICATE_KEY: ("SaslAuthenticate", *sasl.AUTHENTICATE_VERSIONS, sasl.illegal_authenticate),
    42: ("DeleteGroups", 0, 2, admin.delete_groups),
    47: ("OffsetDelete", 0, 0, offsets.offset_delete),
    68: ("ConsumerGroupHeartbeat", 0, 1, consumer.consumer_group_heartbeat),
    69: ("ConsumerGroupDescribe", 0, 1, admin.consumer_group_describe),
}


def supported(api_key: int, version: int) -> bool:
    """Whether the listener serves this API at this version."""
    entry = APIS.get(api_key)
    return entry is not None and entry[1] <= version <= entry[2]


def api_versions_answer(error: Errors) -> dict:
    """ApiVersions' answer: the error and the table of every served API's version range."""
    return {
        "error_code": error,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi} for k, (_, lo, hi, _) in sorted(APIS.items())
        ],
        "throttle_time": 0,
    }
