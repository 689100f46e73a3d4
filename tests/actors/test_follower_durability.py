"""A follower's answer to its leader counts towards acknowledging a write: it must hold only what is durable.

The replica runs in this process (its class, not a Ray actor) over a storage root whose file
operations go through PowerLossFiles: right after the follower answers `replicate`, the power is
cut, and every record it said it holds must still be on its disk.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "storage"))

from powerloss import PowerLossFiles
from storage_helpers import commit

from groupcoord.actors.service.replication import replica_actor
from groupcoord.actors.service.replication.messages import Follow, FollowerAnswer, Replicate
from groupcoord.actors.service.replication.transport import RayTransport
from groupcoord.actors.service.spec import ServiceSpec
from groupcoord.storage import read_partition


class InProcessTransport(RayTransport):
    """Ray's transport for a replica built in the test's own process (not a Ray worker): a first start."""

    def node_id(self) -> str:
        return "local"

    def restarted(self) -> bool:
        return False


def test_a_follower_answers_only_with_records_that_survive_a_power_loss(ray_local, tmp_path) -> None:
    files = PowerLossFiles(tmp_path)
    records = [commit("g", "t", p, 10 + p) for p in range(5)]

    async def follow_and_replicate() -> tuple[FollowerAnswer, Path]:
        spec = ServiceSpec(None, str(tmp_path / "root"), 1)  # no namespace: it never asks for an election
        replica = replica_actor.ReplicaActor(0, spec, "follower", min_insync=2, create_root=True, files=files,
                                             transport=InProcessTransport())
        try:
            assert await replica.follow(Follow(1, "leader", ((1, 0),), 0)) == FollowerAnswer(end=0)
            return await replica.replicate(Replicate(1, "leader", 0, [(0, records)], hw=0)), replica.directory
        finally:
            await replica.supervisor.close()

    answer, directory = asyncio.run(follow_and_replicate())
    assert answer == FollowerAnswer(end=len(records))
    files.pull_plug()  # the machine loses power right after the answer
    assert [r.record for r in read_partition(directory)] == records
