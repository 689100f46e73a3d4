"""AdminClient: list, describe and delete groups, manage their offsets and the topic registry."""

from __future__ import annotations

import gc
import logging
import time
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Mapping

import ray
from ray.exceptions import GetTimeoutError

from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.apis import Api
from groupcoord.protocol.messages import (
    DeleteGroupsRequest,
    DescribedGroup,
    DescribeGroupsRequest,
    LeaveGroupRequest,
    ListedGroup,
    ListGroupsRequest,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    descriptions_in,
    in_request_order,
)
from groupcoord.protocol.security.credentials import Credentials

from .coordinator_client import CoordinatorClient, normalize_offsets
from .errors import error_for, raise_for
from .handle import Service
from .security_admin import SecurityAdmin

log = logging.getLogger(__name__)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a big answer is unpickled and built: its hundreds of thousands of
    objects hold no cycles, and each collection the allocations trigger would rescan the growing heap."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class AdminClient(SecurityAdmin):
    """Administration of a service's groups and topics, with Kafka AdminClient's operations in snake_case."""

    def __init__(
        self, service: Service, request_timeout_ms: int = 30000, credentials: Credentials | None = None
    ) -> None:
        self.service = service
        self.credentials = credentials if credentials is not None else Credentials.from_env()
        self.request_timeout_ms = request_timeout_ms
        self._timeout_s = request_timeout_ms / 1000

    def _group(self, group_id: str) -> CoordinatorClient:
        return CoordinatorClient(self.service, group_id, self.request_timeout_ms, credentials=self.credentials)

    @staticmethod
    def _names(values: Any, what: str) -> list:
        """A list from an iterable of names; a lone str is refused (it would be split into characters)."""
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"{what} must be a list of strings, not {type(values).__name__} {values!r:.40}")
        return list(values)

    def _router(self, method: str, *args: Any) -> Any:
        call = getattr(self.service.router, method)
        ref = call.remote(*args) if self.credentials is None else call.remote(*args, credentials=self.credentials.wire)
        return ray.get(ref, timeout=self._timeout_s)

    # --- groups ---------------------------------------------------------------------------------

    def list_groups(self, states: Iterable[str] | None = None, types: Iterable[str] | None = None) -> list[ListedGroup]:
        """Every group of the service by group id, optionally only those in the given states or of the given types
        (Kafka's names, compared case-insensitively by the coordinators)."""
        names = self._names
        request = ListGroupsRequest(tuple(names(states or (), "states")), tuple(names(types or (), "types")))
        with _gc_paused():  # 100,000 ListedGroups built as the answer unpickles
            response = self._router(Api.LIST_GROUPS, request)
        raise_for(response.error, "listing groups: some partitions could not answer; retry")
        return response.groups

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, DescribedGroup]:
        """Group id → description (an unknown group is described as state "Dead").

        The router sends each partition the ids it owns, as Kafka's admin client batches by
        coordinator, and hands back the refs of their answers: the descriptions come straight from the
        partitions, not through the router a second time."""
        ids = self._names(group_ids, "group_ids")
        parts = self._router("describe_groups_parts", DescribeGroupsRequest(ids))
        deadline = time.monotonic() + self._timeout_s
        found: dict[str, DescribedGroup] = {}
        with _gc_paused():
            # Each partition's answer is built as it arrives, while the others still describe their groups.
            while parts:
                ready, parts = ray.wait(parts, num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
                if not ready:
                    raise GetTimeoutError(f"describing groups: {len(parts)} partition answers did not arrive "
                                          f"within {self._timeout_s} s")
                found.update(descriptions_in(ray.get(ready[0])))
            out = in_request_order(found, ids)
        for d in out.values():
            if d.error != Errors.NONE:
                raise_for(d.error, f"describing group {d.group_id!r}")
        return out

    def delete_groups(self, group_ids: Iterable[str]) -> None:
        """Delete Empty groups with their offsets; raises naming every group that could not be deleted."""
        ids = self._names(group_ids, "group_ids")
        results = self._router(Api.DELETE_GROUPS, DeleteGroupsRequest(ids)).results
        failed = {g: e for g, e in results.items() if e != Errors.NONE}
        if failed:
            first = next(iter(failed.values()))
            detail = ", ".join(f"{g!r}: {e.name}" for g, e in failed.items())
            raise error_for(first, f"could not delete {detail} (only Empty groups can be deleted)")

    def remove_members(self, group_id: str, group_instance_ids: Iterable[str]) -> None:
        """Remove static members by group.instance.id (KIP-345 admin removal)."""
        members = [
            MemberIdentity("", iid, "removed by admin") for iid in self._names(group_instance_ids, "group_instance_ids")
        ]
        response = self._group(group_id).call(Api.LEAVE_GROUP, LeaveGroupRequest(group_id, members))
        raise_for(response.error, f"removing members from {group_id!r}")
        failed = [m for m in response.members if m.error != Errors.NONE]
        if failed:
            raise error_for(
                failed[0].error,
                f"group {group_id!r} has no member with instance id "
                f"{', '.join(repr(m.group_instance_id) for m in failed)}",
            )

    # --- offsets ---------------------------------------------------------------------------------

    def list_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (of the given partitions, or all); uncommitted ones are left out."""
        tps = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        response = self._group(group_id).call(Api.OFFSET_FETCH, OffsetFetchRequest(group_id, tps))
        raise_for(response.error, f"fetching offsets of {group_id!r}")
        return {
            tp: OffsetAndMetadata(p.offset, p.metadata, p.leader_epoch)
            for tp, p in response.offsets.items()
            if p.error == Errors.NONE and p.offset >= 0
        }

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, Any]) -> None:
        """Set committed offsets of a group that has no active members (as Kafka, Empty groups only)."""
        normalized = normalize_offsets(offsets)
        response = self._group(group_id).call(Api.OFFSET_COMMIT, OffsetCommitRequest(group_id, normalized))
        failed = {tp: e for tp, e in response.errors.items() if e != Errors.NONE}
        if not failed:
            return
        error = next(iter(failed.values()))
        if error in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION, Errors.REBALANCE_IN_PROGRESS):
            raise error_for(
                Errors.NON_EMPTY_GROUP,
                f"group {group_id!r} has active members; stop them before altering its offsets",
            )
        raise error_for(error, f"altering offsets of {group_id!r}: {sorted(failed)} failed with {error.name}")

    def delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Delete committed offsets of some partitions (not of topics an active consumer group subscribes to)."""
        tps = [TopicPartition(*tp) for tp in partitions]
        response = self._group(group_id).call(Api.OFFSET_DELETE, OffsetDeleteRequest(group_id, tps))
        raise_for(response.error, f"deleting offsets of {group_id!r}")
        failed = {tp: e for tp, e in response.errors.items() if e != Errors.NONE}
        if failed:
            error = next(iter(failed.values()))
            raise error_for(error, f"could not delete offsets of {sorted(failed)} in {group_id!r}: {error.name}")

    # --- topics ----------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int) -> None:
        """Register a topic with its partition count."""
        raise_for(self._router("create_topic", name, partitions), f"creating topic {name!r}")

    def create_partitions(self, name: str, total: int) -> None:
        """Grow a topic to `total` partitions; the groups subscribed to it rebalance."""
        raise_for(self._router("create_partitions", name, total), f"growing topic {name!r} to {total}")

    def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, dict]:
        """Topic → {"partitions": n, "end_offsets": {partition: offset}}."""
        return self._router("describe_topics", None if names is None else list(names))

    def report_end_offsets(self, topic: str, offsets: Mapping[int, int]) -> None:
        """Report log-end offsets of a topic's partitions (used for lag)."""
        raise_for(self._router("report_end_offsets", topic, dict(offsets)), f"reporting end offsets of {topic!r}")
