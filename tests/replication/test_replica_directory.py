"""A replica's constructor and its partition directory on its node's root (each node's root makes every
partition's directory when it is created).

A repair's new learner (create_root, not a restart) whose directory went missing before it started (wiped) has
held nothing: it makes the directory again and starts. It used to fail its constructor (LostPartitionError), and
Ray never restarts an actor whose constructor raised, so the repair waited for that learner forever (found by the
Ray-level chaos of issue 27; the simulator restarts a failed constructor, so it did not show there). A replica
reopened from the placement without its directory still comes back lost: it never votes with an empty log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import time
from pathlib import Path

import pytest
from sim_run import sim_spec

from groupcoord.actors.service.replication.replica_actor import ReplicaActor
from groupcoord.actors.service.replication.transport import Transport
from groupcoord.protocol.shard.clock import ManualClock
from groupcoord.storage import StorageRoot
from groupcoord.storage.epoch_checkpoint import CHECKPOINT_FILE


class NodeTransport(Transport):
    """A replica's world reduced to its node: no calls to make, a fixed node id."""

    def __init__(self, restarted: bool) -> None:
        self._restarted = restarted

    def node_id(self) -> str:
        return "n1"

    def restarted(self) -> bool:
        return self._restarted

    def monotonic(self) -> float:
        return time.monotonic()

    def clock(self) -> ManualClock:
        return ManualClock()

    def router(self):
        raise LookupError("no router here")


def _start(tmp_path: Path, create_root: bool, restarted: bool) -> dict:
    spec = dataclasses.replace(sim_spec(tmp_path), namespace=None)

    async def construct() -> dict:
        replica = ReplicaActor(0, spec, "0-2.1", 2, create_root=create_root, transport=NodeTransport(restarted))
        try:
            return await replica.role()
        finally:
            await replica.supervisor.close()

    return asyncio.run(construct())


def _root_without_partition_0(tmp_path: Path) -> Path:
    root = tmp_path / "n1"
    StorageRoot(str(root), 1, create=True)
    directory = root / "__consumer_offsets-0"
    assert directory.is_dir()
    shutil.rmtree(directory)
    return directory


def test_a_new_replica_makes_its_missing_directory_and_starts(tmp_path) -> None:
    directory = _root_without_partition_0(tmp_path)
    role = _start(tmp_path, create_root=True, restarted=False)
    assert not role["lost"] and role["end"] == 0
    assert (directory / CHECKPOINT_FILE).exists()  # from now on, a restart without it means lost


def test_a_reopened_replica_without_its_directory_comes_back_lost(tmp_path) -> None:
    directory = _root_without_partition_0(tmp_path)
    role = _start(tmp_path, create_root=False, restarted=False)
    assert role["lost"] and not (directory / CHECKPOINT_FILE).exists()


class Exited(Exception):
    """The replica ended its process (transport.exit)."""


class ExitingTransport(NodeTransport):
    def exit(self, code: int):
        raise Exited(code)


def test_a_storage_error_while_opening_ends_the_process_instead_of_the_constructor_raising(tmp_path) -> None:
    directory = _root_without_partition_0(tmp_path)
    directory.write_text("not a directory")  # opening the log fails with an OSError
    spec = dataclasses.replace(sim_spec(tmp_path), namespace=None)

    async def construct() -> None:
        ReplicaActor(0, spec, "0-2.1", 2, create_root=True, transport=ExitingTransport(restarted=False))

    with pytest.raises(Exited):  # Ray restarts an actor whose process ended, never one whose constructor raised
        asyncio.run(construct())
