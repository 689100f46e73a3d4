"""Heartbeat latency while offset retention sweeps 100,000 expired offsets, against the same heartbeats without a sweep.

The partition actor's own code runs in this process (the PartitionActor class over a real
PartitionLog with fsync, minus Ray), so a heartbeat's latency is exactly how long the actor's event
loop and group commit make it wait. Expired offsets (committed with a 1 ms explicit retention,
KIP-211) are spread over groups of 1,000; one member of a Stable group heartbeats every
millisecond. Three phases in the same run: no sweep (the baseline), the bounded sweep (the actor's
default: a step of 1,000 offsets, 8 timers per turn) and, for reference, the whole pass in one turn
as it ran before. The figure that matters is p99 during the bounded sweep, next to the baseline and
the session timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from benchmarks import common
from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.messages import HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest

GROUP_OFFSETS = 1_000
SESSION_MS = 10_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this benchmark: how many expired offsets, and how long the baseline runs."""
    common.add_common_arguments(parser)
    parser.add_argument("--offsets", type=common.ints, default=None, help="expired offsets to sweep (default 100k)")
    parser.add_argument("--baseline-s", type=float, default=None, help="seconds of heartbeats without a sweep")


def _sizes(args: argparse.Namespace) -> dict:
    return {
        "offsets": (args.offsets or [common.preset(args, 100_000, 20_000, 2_000)])[0],
        "baseline_s": args.baseline_s or common.preset(args, 3.0, 1.0, 0.3),
        "trials": common.trials(args),
    }


async def _stable_member(p: Any) -> HeartbeatRequest:
    """Form a one-member consumer group and return the heartbeat its member sends."""
    join = JoinGroupRequest("hb", SESSION_MS, SESSION_MS, protocol_type="consumer", protocols=[("range", b"")])
    first = await p.join_group(join)
    joined = await p.join_group(JoinGroupRequest("hb", SESSION_MS, SESSION_MS, first.member_id,
                                                 protocol_type="consumer", protocols=[("range", b"")]))
    assert joined.error == Errors.NONE, joined
    sync = await p.sync_group(SyncGroupRequest("hb", joined.generation_id, joined.member_id, None, "consumer",
                                               "range", {joined.member_id: b""}))
    assert sync.error == Errors.NONE, sync
    return HeartbeatRequest("hb", joined.generation_id, joined.member_id)


async def _commit_expiring(p: Any, offsets: int, round_: int) -> None:
    """Commit `offsets` offsets that expire 1 ms later, GROUP_OFFSETS per simple group."""
    by_group: dict[str, dict] = {}
    for i in range(offsets):
        group = f"expiring-{round_}-{i // GROUP_OFFSETS}"
        by_group.setdefault(group, {})[TopicPartition("t", i % GROUP_OFFSETS)] = OffsetAndMetadata(i)
    for group, tps in by_group.items():
        response = await p.commit_offsets(OffsetCommitRequest(group, tps, retention_time_ms=1))
        assert set(response.errors.values()) == {Errors.NONE}
    await asyncio.sleep(0.01)  # let every one of them expire


async def _heartbeats(p: Any, request: HeartbeatRequest, until: Any) -> list[float]:
    """A heartbeat due every millisecond until `until()` is true; each one's latency from when it was due.

    Measured from the time it was due, not sent, so a heartbeat held up by a blocked event loop
    counts its whole wait (no coordinated omission).
    """
    latencies: list[float] = []
    due = time.perf_counter()
    while not until() or not latencies:
        wait = due - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        response = await p.heartbeat(request)
        latencies.append(time.perf_counter() - due)
        assert response.error == Errors.NONE, response
        due += 0.001  # behind schedule, the next ones go at once and count their lateness
    return latencies


async def _trial(path: Any, sz: dict, trial: int) -> dict:
    config = common.bench_config(offsets_retention_check_interval_ms=3_600_000)
    p = await common.open_local_partition(path / f"trial-{trial}", config=config)
    try:
        coord = p.runtime.coord
        hb = await _stable_member(p)
        out: dict[str, Any] = {}
        await _commit_expiring(p, sz["offsets"], 0)  # expired, not yet swept: the baseline holds them too
        end = time.perf_counter() + sz["baseline_s"]
        out["no sweep"] = {"latencies": await _heartbeats(p, hb, lambda: time.perf_counter() >= end),
                           "sweep_s": 0.0, "expired": 0}
        for phase, step_size in (("bounded sweep", coord.retention.step_size), ("one-turn sweep", 10**12)):
            if phase != "bounded sweep":
                await _commit_expiring(p, sz["offsets"], len(out))
            coord.retention.step_size = step_size
            expired_before = coord.retention.expired_total
            started = time.perf_counter()
            coord.schedule_retention_check(0)
            p.runtime.kick()
            target = expired_before + sz["offsets"]
            latencies = await _heartbeats(
                p, hb, lambda target=target: coord.retention.expired_total >= target and not coord.retention.running
            )
            out[phase] = {"latencies": latencies, "sweep_s": time.perf_counter() - started,
                          "expired": coord.retention.expired_total - expired_before}
        return out
    finally:
        await common.close_local_partition(p)


def run(args: argparse.Namespace) -> dict:
    """Run the three phases `trials` times, each trial on a fresh partition log."""
    sz = _sizes(args)
    phases: dict[str, dict[str, list]] = {}
    with common.work_dir(args, "retention") as path:
        for trial in range(sz["trials"]):
            common.step(f"trial {trial + 1}/{sz['trials']}: {sz['offsets']:,} expired offsets")
            for phase, r in asyncio.run(_trial(path, sz, trial)).items():
                row = phases.setdefault(phase, {"p50": [], "p99": [], "max": [], "count": [], "sweep_s": [],
                                                "expired": []})
                row["p50"].append(common.percentile(r["latencies"], 50))
                row["p99"].append(common.percentile(r["latencies"], 99))
                row["max"].append(max(r["latencies"]))
                row["count"].append(len(r["latencies"]))
                row["sweep_s"].append(r["sweep_s"])
                row["expired"].append(r["expired"])
    return {"sizes": sz, "session_ms": SESSION_MS,
            "phases": {k: {m: common.summarize(v) for m, v in row.items()} for k, row in phases.items()}}


def report(results: dict) -> None:
    """Print heartbeat latency per phase and the bounded sweep's p99 against the baseline and the session."""
    phases = results["phases"]
    base = phases["no sweep"]["p99"]["median"]
    rows = []
    for name, s in phases.items():
        p99 = s["p99"]["median"]
        rows.append([name, f"{s['count']['median']:,.0f}", common.fmt_ms(s["p50"]["median"]),
                     f"{common.fmt_ms(p99)} ({common.fmt_ms(s['p99']['min'])}-{common.fmt_ms(s['p99']['max'])})",
                     common.fmt_ms(s["max"]["median"]), f"{p99 / base:.1f}x" if base else "-",
                     common.fmt_ms(s["sweep_s"]["median"]), f"{s['expired']['median']:,.0f}"])
    common.print_table(
        f"heartbeat latency (ms) while {results['sizes']['offsets']:,} expired offsets are swept",
        ["phase", "heartbeats", "p50", "p99 (min-max)", "max", "p99 / no sweep", "sweep (ms)", "expired"], rows)
    bounded = phases["bounded sweep"]["p99"]["median"]
    session_s = results["session_ms"] / 1000
    common.print_target("p99 heartbeat latency during the sweep far below the session timeout (< 1%)",
                        f"{common.fmt_ms(bounded)} ms = {bounded / session_s:.3%} of a {session_s:.0f} s session",
                        bounded < 0.01 * session_s)


def main(argv: list[str] | None = None) -> dict:
    """Run from the command line."""
    return common.run_benchmark("retention", __import__(__name__, fromlist=["run"]), argv)
