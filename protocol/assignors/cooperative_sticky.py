"""Kafka's CooperativeStickyAssignor ("cooperative-sticky", KIP-429): sticky, in two rebalances."""

from __future__ import annotations

import logging
import struct
from collections import defaultdict
from typing import Iterable, Mapping, Sequence

from ..values import TopicPartition
from .base import GroupAssignment, MemberSubscription, RebalanceProtocol
from .sticky import AbstractStickyAssignor

__all__ = ["CooperativeStickyAssignor"]

log = logging.getLogger(__name__)

_GENERATION = struct.Struct(">i")  # the user data: the generation as a big-endian int32


class CooperativeStickyAssignor(AbstractStickyAssignor):
    """Kafka's "cooperative-sticky" (KIP-429): the sticky target, minus partitions another member must revoke.

    A partition that moves is left unassigned in this rebalance; its owner revokes it and rejoins,
    and the follow-up rebalance hands it to its new member.
    """

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def member_data(self, sub: MemberSubscription) -> tuple[Sequence[TopicPartition], int | None]:
        """Owned partitions from the subscription; generation from it (v2+) or the 4-byte user data."""
        if sub.generation_id >= 0:
            return sub.owned_partitions, sub.generation_id
        if sub.user_data is not None and len(sub.user_data) >= 4:
            return sub.owned_partitions, _GENERATION.unpack_from(sub.user_data)[0]
        return sub.owned_partitions, None

    def subscription_user_data(self, assigned: Iterable[TopicPartition], generation_id: int) -> bytes | None:
        """Kafka's CooperativeStickyAssignor user data: the generation as an int32."""
        return _GENERATION.pack(generation_id)

    def _assign(self, counts: Mapping[str, int], subs: Mapping[str, MemberSubscription]) -> GroupAssignment:
        target, owners = self._sticky_assign(counts, subs)
        claimants: dict[TopicPartition, set[str]] = defaultdict(set)
        for m, sub in subs.items():
            for tp in sub.owned_partitions:
                claimants[tp].add(m)
        out: GroupAssignment = {}
        for m, tps in target.items():  # withhold what another member still claims, unless m won the claim
            out[m] = [tp for tp in tps if owners.get(tp) == m or claimants[tp] <= {m}]
            if len(out[m]) < len(tps):
                log.debug("withholding %s from %s until their owners revoke them", set(tps) - set(out[m]), m)
        return out
