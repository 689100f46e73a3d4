"""Disk errors under a running service: the partition fails loudly, clients get retriable errors, then it recovers.

The service keeps its storage on a small tmpfs mounted for this module when the machine allows
it (root with CAP_SYS_ADMIN, as here and in CI); otherwise on a plain directory, where a full disk
is simulated by lowering the partition process's RLIMIT_FSIZE (prlimit) and the checks that need a
really full file system are reported as skipped with the reason, and a read-only directory is
made by chmod (as a non-root user) or, as root without mounts (chmod does not stop root), the case
is reported as skipped. In every case: commits
acknowledged before stay, nothing is acknowledged while the condition lasts, every call returns
(an error, never a hang), a member that keeps heartbeating is not expired, and the partition
serves again once the condition clears.
"""

from __future__ import annotations

import errno
import glob
import os
import resource
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
import ray
from rel_chaos import ChaosMember, Ledger, actor_status, wait_for

from groupcoord.actors import start, stop
from groupcoord.actors.client.admin import AdminClient
from groupcoord.actors.client.coordinator_client import ACTOR_ERRORS, CoordinatorUnavailableError
from groupcoord.actors.client.errors import GroupCoordinatorError
from groupcoord.protocol import (
    Errors,
    GroupConfig,
    OffsetAndMetadata,
    OffsetCommitRequest,
    OffsetFetchRequest,
    TopicPartition,
)

NAMESPACE = "gc-rel-disk"
TP = TopicPartition("disk", 0)
CLIENT_TIMEOUT_MS = 1_000


def _run(*cmd: str) -> bool:
    return not _failure(*cmd)


def _failure(*cmd: str) -> str:
    """Run a command: "" if it succeeded, else what it said."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    return "" if done.returncode == 0 else f"`{' '.join(cmd)}`: {(done.stderr or done.stdout).strip()}"


class Storage:
    """The module's storage root: on a 16 MB tmpfs when mounting works, else a plain directory."""

    def __init__(self, base: Path) -> None:
        self.mount = base / "mnt"
        self.mount.mkdir()
        self.why_no_tmpfs = _failure("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(self.mount))
        self.tmpfs = not self.why_no_tmpfs
        self.root = self.mount / "root"
        self.partition_dir = self.root / "__consumer_offsets-0"

    def close(self) -> None:
        """Unmount the tmpfs (lazily, in case a process still holds a file)."""
        if self.tmpfs:
            _run("umount", "-l", str(self.mount))


@pytest.fixture(scope="module")
def storage(tmp_path_factory):
    s = Storage(tmp_path_factory.mktemp("disk"))
    yield s
    s.close()


@pytest.fixture(scope="module")
def svc(ray_local, storage):
    service = start(
        num_partitions=1,
        storage_path=str(storage.root),
        namespace=NAMESPACE,
        config=GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=200),
    )
    AdminClient(service).create_topic(TP.topic, 1)
    yield service
    stop(NAMESPACE)


@pytest.fixture()
def member(svc):
    m = ChaosMember(svc, "disk-members", "disk-member", Ledger(), 1, session_timeout_ms=10_000,
                    heartbeat_interval_ms=300, request_timeout_ms=CLIENT_TIMEOUT_MS)
    wait_for(m.settled, 60, "the member to join")
    yield m
    m.close()


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def worker_logs_mention(*needles: str) -> bool:
    """Whether some Ray worker log holds all of `needles` (the partition's loud failure)."""
    logs_dir = ray._private.worker._global_node.get_logs_dir_path()
    for path in glob.glob(os.path.join(logs_dir, "worker-*")):
        with open(path, errors="replace") as f:
            text = f.read()
        if all(n in text for n in needles):
            return True
    return False


def commit(handle, group: str, offset: int, big: bool = False):
    """A simple-group commit straight to the partition actor (of ~80 KB if `big`)."""
    offsets = big_offsets(offset) if big else {TP: OffsetAndMetadata(offset)}
    return ray.get(handle.commit_offsets.remote(OffsetCommitRequest(group, offsets)), timeout=60)


def fetched(handle, group: str) -> int:
    """The committed offset of TP in `group` (-1 if none)."""
    resp = ray.get(handle.fetch_offsets.remote(OffsetFetchRequest(group, [TP])), timeout=30)
    assert resp.error == Errors.NONE, resp
    return resp.offsets[TP].offset


def probe_outage(svc, group: str, seconds: float) -> Counter:
    """Call the partition for `seconds` while it cannot work; every call must end in an error, promptly."""
    handle = svc.partition(0)
    outcomes: Counter = Counter()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            resp = ray.get(handle.fetch_offsets.remote(OffsetFetchRequest(group, [TP])), timeout=30)
            outcomes[resp.error.name] += 1
        except ACTOR_ERRORS as e:
            outcomes[type(e).__name__] += 1
        except ray.exceptions.GetTimeoutError:
            raise AssertionError("a call to the failing partition hung for 30 s") from None
        time.sleep(0.1)
    return outcomes


def big_offsets(offset: int) -> dict[TopicPartition, OffsetAndMetadata]:
    """20 partitions with 4000-character metadata: ~80 KB, far more than the slack of a page."""
    return {TopicPartition(TP.topic, p): OffsetAndMetadata(offset, "x" * 4000) for p in range(20)}


def check_clients_fail_fast(svc, member: ChaosMember, group: str, cause: str) -> None:
    """AdminClient and GroupMember calls end with an error after their request timeout, not hang; a timeout
    names the partition's storage failure (`cause`), and so does `status`."""
    admin = AdminClient(svc, request_timeout_ms=CLIENT_TIMEOUT_MS)
    with pytest.raises((CoordinatorUnavailableError, GroupCoordinatorError)) as raised:
        admin.alter_group_offsets(group, big_offsets(999))
    if isinstance(raised.value, CoordinatorUnavailableError):
        assert "storage failure" in str(raised.value) and cause in str(raised.value), raised.value
    with pytest.raises((CoordinatorUnavailableError, GroupCoordinatorError)):
        member.member.commit(big_offsets(1))
    (status,) = ray.get(svc.router.status.remote(), timeout=30)
    assert "storage failure" in status["last_failure"] and cause in status["last_failure"], status


def wait_serving(svc, group: str, offset: int) -> None:
    """Wait until a commit of `offset` is acknowledged again."""
    handle = svc.partition(0)
    wait_for(lambda: commit(handle, group, offset).errors[TP] == Errors.NONE, 90, "the partition to take commits again",
             0.2)


def check_member_survived(member: ChaosMember) -> None:
    """The member kept its id (it was not expired) and is Stable again."""
    wait_for(member.settled, 60, "the member to be Stable again")
    assert not member.identity_changes, member.identity_changes
    assert member.heartbeats["UNKNOWN_MEMBER_ID"] == 0, member.heartbeats
    assert not member.fatal, member.fatal


def fill_disk(mount: Path) -> Path:
    """Write a filler file until the file system is full; returns it."""
    filler = mount / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (1 << 16, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)
    return filler


def test_rel_full_disk_fails_the_partition_loudly_and_it_recovers(svc, storage, member) -> None:
    """Disk full: the commit that cannot be written is never acknowledged, earlier ones survive, service resumes."""
    group = "disk-full"
    handle = svc.partition(0)
    assert commit(handle, group, 10).errors[TP] == Errors.NONE
    old_pid = actor_status(handle)["pid"]
    if storage.tmpfs:
        filler = fill_disk(storage.mount)
    else:  # no mount here: a file-size limit on the partition's process fails its next write the same way
        resource.prlimit(old_pid, resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
    try:
        try:
            resp = commit(handle, group, 11, big=True)
            pytest.fail(f"a commit was answered although the disk is full: {resp}")
        except ACTOR_ERRORS:
            pass  # the partition died on the failed write, as it should
        assert actor_status(handle)["pid"] != old_pid
        assert fetched(handle, group) in (10, 11)  # reads are served while the disk is full
        if storage.tmpfs:
            check_clients_fail_fast(svc, member, group, "No space left")
            outcomes = probe_outage(svc, group, 1.0)
            assert outcomes and set(outcomes) <= {"NONE", "ActorDiedError", "ActorUnavailableError"}, outcomes
            wait_for(lambda: worker_logs_mention("storage failure", str(storage.partition_dir), "No space left"), 30,
                     "the partition to log its storage failure")
    finally:
        if storage.tmpfs:
            filler.unlink()
    wait_serving(svc, group, 12)
    assert fetched(handle, group) == 12
    check_member_survived(member)
    if not storage.tmpfs:
        # Coverage must not shrink quietly: CI runs as root and can mount a tmpfs, so this is a broken set-up.
        pytest.fail("ran with a file-size limit only; the client, outage and log checks of a really full disk "
                    f"need a tmpfs, which could not be mounted: {storage.why_no_tmpfs}")


def _make_unusable(storage: Storage, how: str) -> None:
    pdir = storage.partition_dir
    if how == "read-only":
        if storage.tmpfs:
            # A bind mount of the directory onto itself, made read-only: EROFS for every write in it.
            assert _run("mount", "--bind", str(pdir), str(pdir))
            assert _run("mount", "-o", "remount,bind,ro", str(pdir))
            with pytest.raises(OSError) as refused:  # the fault is in place: even root cannot write there
                (pdir / "probe").write_bytes(b"x")
            assert refused.value.errno == errno.EROFS, refused.value
        else:  # not root (the test skips root without mounts): chmod makes it read-only
            for p in [pdir, *pdir.iterdir()]:
                p.chmod(0o555 if p.is_dir() else 0o444)
        return
    aside = storage.mount / "aside"
    pdir.rename(aside)
    pdir.write_text("the partition directory is not available")


def _restore(storage: Storage, how: str) -> None:
    pdir = storage.partition_dir
    if how == "read-only" and storage.tmpfs:
        assert _run("umount", str(pdir))
    elif how == "read-only":
        for p in [pdir, *pdir.iterdir()]:
            p.chmod(0o755 if p.is_dir() else 0o644)
    else:
        pdir.unlink()
        (storage.mount / "aside").rename(pdir)


@pytest.mark.parametrize("how", ["read-only", "path-blocked"])
def test_rel_unusable_partition_directory_fails_loading_loudly_and_recovers(svc, storage, member, how) -> None:
    """A read-only (or missing) partition directory: the restarted partition cannot load, callers get
    prompt retriable errors, and once the directory is back everything acknowledged is there."""
    group = f"disk-{how}"
    if how == "read-only" and not storage.tmpfs and os.geteuid() == 0:
        pytest.fail("a read-only directory for root needs a read-only bind mount, and mounting failed: "
                    f"{storage.why_no_tmpfs}")
    handle = svc.partition(0)
    assert commit(handle, group, 20).errors[TP] == Errors.NONE
    old_pid = actor_status(handle)["pid"]
    _make_unusable(storage, how)
    try:
        ray.kill(handle, no_restart=False)
        wait_for(lambda: not pid_alive(old_pid), 30, "the killed partition process to exit")
        check_clients_fail_fast(svc, member, group, str(storage.partition_dir))
        outcomes = probe_outage(svc, group, 1.0)
        expected = {"COORDINATOR_LOAD_IN_PROGRESS", "ActorDiedError", "ActorUnavailableError"}
        assert outcomes and set(outcomes) <= expected, outcomes
        wait_for(lambda: worker_logs_mention("failed to load its log", str(storage.partition_dir)), 30,
                 "the partition to log that it cannot load")
    finally:
        _restore(storage, how)
    wait_serving(svc, group, 21)
    assert actor_status(handle)["pid"] != old_pid
    assert fetched(handle, group) == 21
    check_member_survived(member)
    assert shutil.disk_usage(storage.root).free > 0
