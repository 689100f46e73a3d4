"""The one seam between replication and Ray: every call between replicas and the router, the clock, the node.

Replication code never imports Ray; it is handed a `Transport`. `RayTransport` does the calls with
Ray actor handles (a service); the tests' simulator implements the same interface over a simulated
network, clock and process table, so that the same replica, log, election and repair code runs in both.
"""

from __future__ import annotations

import logging
import time
from typing import Any, NoReturn

from groupcoord.protocol.shard.clock import Clock

from ..overload import coordinator_clock
from ..process_exit import exit_process

log = logging.getLogger(__name__)


class Transport:
    """What replication needs of the world outside its process (see the module docstring)."""

    def node_id(self) -> str:
        """The id of the node this process runs on."""
        raise NotImplementedError

    def node_ip(self) -> str:
        """The IP address of this process's node, for `status` ("" where there is none)."""
        return ""

    def restarted(self) -> bool:
        """Whether this process is a restart of an actor (its constructor re-run with the same arguments)."""
        raise NotImplementedError

    def monotonic(self) -> float:
        """Seconds on a clock that never steps (deadlines, leases)."""
        raise NotImplementedError

    def clock(self) -> Clock:
        """The clock the shard gets (timestamps and its timers)."""
        raise NotImplementedError

    def send(self, handle: Any, method: str, *args: Any) -> Any:
        """Call `method` of the actor `handle` without waiting; a reference to its answer."""
        raise NotImplementedError

    def wait(self, refs: list[Any], timeout: float) -> list[Any]:
        """Wait up to `timeout` s for one of `refs` to be answered; all the answered ones by then."""
        raise NotImplementedError

    def result(self, ref: Any) -> Any:
        """The answer of an answered reference; raises what the call raised (or that the callee is gone)."""
        raise NotImplementedError

    async def call(self, handle: Any, method: str, *args: Any) -> Any:
        """Call `method` of the actor `handle` and await its answer."""
        raise NotImplementedError

    def router(self) -> Any:
        """The handle of the service's router."""
        raise NotImplementedError

    def alive_nodes(self) -> list[str]:
        """The ids of the alive nodes, sorted."""
        raise NotImplementedError

    def spawn_replica(self, actor_class: type, name: str, node_id: str, args: tuple) -> Any:
        """Create (or find, by `name`) an `actor_class` actor on `node_id` with constructor `args`; its handle."""
        raise NotImplementedError

    def kill(self, handle: Any) -> None:
        """End an actor for good (no restart)."""
        raise NotImplementedError

    def exit(self, code: int) -> NoReturn:
        """End this process at once (Ray restarts the actor from its disk)."""
        raise NotImplementedError


class RayTransport(Transport):
    """The transport of a service: Ray actor calls, the machine's clocks, exit_process."""

    def __init__(self, namespace: str | None = None) -> None:
        self.namespace = namespace

    def node_id(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def node_ip(self) -> str:
        import ray

        return ray.util.get_node_ip_address()

    def restarted(self) -> bool:
        import ray

        return bool(ray.get_runtime_context().was_current_actor_reconstructed)

    def monotonic(self) -> float:
        return time.monotonic()

    def clock(self) -> Clock:
        return coordinator_clock()

    def send(self, handle: Any, method: str, *args: Any) -> Any:
        return getattr(handle, method).remote(*args)

    def wait(self, refs: list[Any], timeout: float) -> list[Any]:
        import ray

        # The first answer ends the wait (a quorum may need no more: a dead or slow follower must not
        # hold every flush up), then whatever else has arrived by then is taken too.
        ready, rest = ray.wait(refs, num_returns=1, timeout=max(0.0, timeout), fetch_local=True)
        if ready and rest:
            ready += ray.wait(rest, num_returns=len(rest), timeout=0, fetch_local=True)[0]
        return ready

    def result(self, ref: Any) -> Any:
        import ray

        return ray.get(ref)

    async def call(self, handle: Any, method: str, *args: Any) -> Any:
        return await getattr(handle, method).remote(*args)

    def router(self) -> Any:
        import ray

        from ..names import ROUTER_NAME

        return ray.get_actor(ROUTER_NAME, namespace=self.namespace)

    def alive_nodes(self) -> list[str]:
        import ray

        return sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))

    def spawn_replica(self, actor_class: type, name: str, node_id: str, args: tuple) -> Any:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        options = {
            "name": name,
            "namespace": self.namespace,
            "lifetime": "detached",
            "get_if_exists": True,
            "max_restarts": -1,
            "max_task_retries": 0,
            "num_cpus": 0,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
        }
        return ray.remote(actor_class).options(**options).remote(*args)

    def kill(self, handle: Any) -> None:
        import ray

        ray.kill(handle, no_restart=True)

    def exit(self, code: int) -> NoReturn:
        exit_process(code)
