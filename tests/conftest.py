"""Fixtures shared by the whole suite: one local Ray instance per test process, started once and reused; and the
order and grouping of the tests for `make test`'s two pytest-xdist workers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import session_resources

# Folders whose conftest starts a JVM for their tests (Kafka's broker, Spark): each folder runs in one worker,
# but for the modules named here, which do not use it (the CLI's own processes start their own Ray and Spark).
SHARED_JVM_FOLDERS = {"oracle": (), "spark": ("test_spark_cli.py",)}
# The longest groups first (15 s or more each, serially), so that the two workers finish at about the same time;
# the rest keep their collection order.
LONGEST_FIRST = (
    "spark", "spark/test_spark_cli.py", "oracle", "bench/test_bench_smoke.py",
    "reliability/test_rel_replication_ray.py", "docs/test_doc_examples.py", "replication/test_sim.py",
    "bench/test_instructions.py", "storage/test_log_compaction.py",
    "reliability/test_rel_disk_ray.py", "actors/test_multinode.py",
    "cli/test_cli_commands.py", "reliability/test_rel_bad_input_ray.py", "security/test_security_ray.py",
    "actors/test_partition_actors.py", "reliability/test_rel_load.py", "reliability/test_rel_chaos.py",
    "reliability/test_rel_log_crash.py",
)

# Quiet, small Ray on a 2-core machine; no dashboard, no usage stats.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "1")


def ensure_local_ray():
    """Start the shared local Ray instance unless one is running in this process."""
    import ray

    if not ray.is_initialized():
        # address="local": always a fresh instance of our own, never a cluster someone else started with
        # `ray start` on this machine (ray.init() would connect to that one).
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                 namespace="groupcoord-tests")
    return ray


@pytest.fixture(autouse=True)
def _cleaner_children_at_test_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction's cleaner children (storage.cleaner_process) of the test processes run at their parent's
    priority, not 10 below it: with both cores busy (the other pytest worker, Ray, a JVM) a niced child got a
    tenth of a core, and the tests waited on it (the compaction crash-point test: 77 s instead of about 25 s).
    tests/storage/test_cleaner_process.py checks the production increment. Ray's actor processes keep it."""
    from groupcoord.storage import cleaner_process

    monkeypatch.setattr(cleaner_process.ChildCleaner, "nice_increment", 0)


@pytest.fixture(scope="module")
def ray_local():
    """The local Ray instance shared by the suite (started again if a module shut it down)."""
    return ensure_local_ray()


@pytest.fixture(scope="session", autouse=True)
def _shutdown_ray_at_end():
    yield
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def run_group(nodeid: str) -> str:
    """The tests one pytest-xdist worker runs together, in order: a whole module (its module fixtures start once),
    or a whole folder whose tests share a session JVM."""
    parts = Path(nodeid.split("::", 1)[0]).parts
    parts = parts[1:] if parts[0] == "tests" else parts
    shared = parts[0] in SHARED_JVM_FOLDERS and parts[-1] not in SHARED_JVM_FOLDERS[parts[0]]
    return parts[0] if shared else "/".join(parts)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        group = run_group(item.nodeid)
        return LONGEST_FIRST.index(group) if group in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: collection order within a rank
    session_resources.note_users(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist hands out whole groups (run_group), in collection order. (Its own loadgroup does not group
    on pytest 9, whose node ids it can no longer rewrite.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByTestGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return run_group(nodeid)

    config.option.loadscopereorder = False
    return ByTestGroup(config, log)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem) -> None:
    session_resources.release_unused(item)
