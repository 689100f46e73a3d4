"""A benchmark client that gets its work after the trial's window has closed (a starved Ray worker) still
measures a whole window of its own, and says how late it was, instead of counting nothing."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import clients, common  # noqa: E402
from groupcoord.protocol import Errors  # noqa: E402
from groupcoord.protocol.messages import OffsetCommitResponse  # noqa: E402


async def _accepting_caller(_method: str, request):
    await asyncio.sleep(0)
    return OffsetCommitResponse({tp: Errors.NONE for tp in request.offsets})


def test_a_client_on_time_keeps_the_window_it_was_given():
    start_at = time.time() + 10.0
    assert common.own_window(start_at, start_at + 1.0, 0.3) == (start_at, start_at + 1.0, 0.0)


def test_a_client_that_arrives_after_the_window_counts_a_window_of_its_own():
    closed_at = time.time() - 5.0  # the window [closed_at - 0.2, closed_at] passed before the client started
    member = clients.MemberRef("late-group", "member-1", 1, 0)
    run = asyncio.run(clients.commit_loop([_accepting_caller], [member], 2, closed_at - 0.2, closed_at,
                                          warmup_s=0.05))
    assert run["requests"] > 0
    assert run["errors"] == 0
    assert run["late_s"] >= 5.0
    assert run["last"]["late-group"] >= run["requests"]


def test_a_commit_answered_after_the_window_is_acknowledged_but_not_counted(monkeypatch):
    """An actor stalled past the whole window: no request counts in it, yet each acknowledged one is reported."""
    start_at = time.time() + 60.0  # own_window (real clock) sees the client on time
    clock = [start_at - 0.05]  # the loop's clock: it starts at the end of its warm-up

    class StalledClock:
        @staticmethod
        def time() -> float:
            return clock[0]

        perf_counter = time

    async def stalled_caller(method: str, request):
        clock[0] += 1.0  # each answer comes a second later: after the 0.2 s window has closed
        return await _accepting_caller(method, request)

    monkeypatch.setattr(clients, "time", StalledClock)
    member = clients.MemberRef("stalled-group", "member-1", 1, 0)
    run = asyncio.run(clients.commit_loop([stalled_caller], [member], 2, start_at, start_at + 0.2, warmup_s=0.05))
    assert run["requests"] == 0 and run["errors"] == 0
    assert run["acknowledged"] == 1 and run["last"]["stalled-group"] == 1
