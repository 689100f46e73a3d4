"""The names under which a service registers its actors in its Ray namespace."""

from __future__ import annotations

from typing import Any

ROUTER_NAME = "groupcoord-router"


def lookup_router(namespace: str | None) -> Any:
    """The router's handle by name: a synchronous call to Ray's GCS, so an event loop runs it in a worker thread
    (`loop.run_in_executor(None, lookup_router, namespace)`), never on the loop itself."""
    import ray

    return ray.get_actor(ROUTER_NAME, namespace=namespace)


def partition_actor_name(partition: int) -> str:
    """The registered name of a partition actor in its namespace."""
    return f"groupcoord-partition-{partition}"
