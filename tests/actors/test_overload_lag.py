"""A partition actor's lag probe: a busy event loop raises the shard's lag and the throttle it asks clients for."""

from __future__ import annotations

import asyncio
import time

from groupcoord.actors.service.overload import THROTTLE_AFTER_MS, LagProbe, coordinator_clock


def test_a_busy_loop_sets_the_lag_and_a_throttle():
    async def scenario() -> tuple[int, int]:
        clock = coordinator_clock()
        probe = LagProbe(clock)

        async def probing() -> None:
            while True:
                await probe.turn()

        task = asyncio.get_running_loop().create_task(probing())
        await asyncio.sleep(0.05)
        time.sleep(0.4)  # the loop is stuck behind 400 ms of work, as under overload
        throttle = probe.throttle_time_ms()  # asked while behind: the probe is overdue
        await asyncio.sleep(0.02)
        behind = clock.behind_ms  # the probe has run since: coordinator time holds the spike for its window
        task.cancel()
        return behind, throttle

    behind, throttle = asyncio.run(scenario())
    # No timing bound is asserted: only that 400 ms of blocked loop are seen (a loaded machine sees more).
    assert behind >= 300 and throttle >= THROTTLE_AFTER_MS
