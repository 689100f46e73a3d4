"""Fixtures shared by the whole suite: one local Ray instance, started once and reused."""

from __future__ import annotations

import os

import pytest
import session_resources

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


def pytest_collection_modifyitems(items) -> None:
    session_resources.note_users(items)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem) -> None:
    session_resources.release_unused(item)
