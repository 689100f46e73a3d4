"""`python -m benchmarks vs-kafka`: the same load, through the same wire client, against Kafka 4.4 and groupcoord.

Both peers run on this machine in one run, one after the other: a single-node KRaft broker
(`broker.KafkaBroker`, offsets topic replication factor 1, its default of no fsync per append),
and groupcoord with issue 32's Kafka listener (`start(kafka_listener=...)`, fsync per group commit,
a `GroupConfig` matching the broker's group settings). Measured on each: acknowledged 100-partition
commits/s from 64 clients; classic heartbeats/s at rising concurrency with the count of false
expiries; a 1,000-member rebalance, classic and consumer protocol; and the restart with 1M live
offsets (Kafka loading its __consumer_offsets partitions against our replay). Then, with three
replicas on each side (`node_loss`: three KRaft nodes against a Ray cluster at replication factor
3), the time from the loss of the group coordinator's node to the first acknowledged commit. The
tables give groupcoord/Kafka ratios, both sides' detection timeouts and the machine's load; the
JSON, with the report, goes to benchmarks/results/vs-kafka.json (`python -m benchmarks docs`).
Without the listener (issue 32 not merged) the groupcoord column says so and only Kafka runs.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import logging
import re
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from benchmarks.kafka import load
from benchmarks.kafka.broker import KafkaBroker
from benchmarks.kafka.cluster import NODE_LOSS_SETTINGS
from benchmarks.kafka.ray_start import starting_priority

RESTART_TOPIC = "bench-restart"

logger = logging.getLogger(__name__)


class PeerUnavailable(RuntimeError):
    """A peer cannot run here (e.g. groupcoord without its Kafka listener)."""


@dataclass
class Peer:
    """A running target: its bootstrap address and how to restart it (returns seconds until it serves again)."""

    name: str
    bootstrap: str
    restart: Callable[[], dict]


@contextlib.contextmanager
def kafka_peer() -> Iterator[Peer]:
    """Kafka 4.4, single node, 4 offsets partitions."""
    with KafkaBroker() as broker:
        def restart() -> dict:
            broker.stop_for_restart()
            mark = broker.log_path.stat().st_size if broker.log_path.exists() else 0
            started = time.perf_counter()
            broker.start(timeout=600)
            ready = time.perf_counter() - started
            text = broker.log_path.read_text(errors="replace")[mark:]
            loads = [int(ms) for ms in re.findall(r"Finished loading of metadata from __consumer_offsets-\d+ "
                                                  r"with epoch \d+ in (\d+)ms", text)]
            return {"process_to_ready_s": ready, "coordinator_load_ms": loads, "bootstrap": broker.bootstrap}

        print(f"  Kafka 4.4 {broker.bootstrap} started in {broker.start_seconds:.1f} s")
        yield Peer("kafka-4.4", broker.bootstrap, restart)


def _groupcoord_config():
    from groupcoord.protocol.config import GroupConfig

    return GroupConfig(min_session_timeout_ms=100, max_session_timeout_ms=60_000, initial_rebalance_delay_ms=0,
                       consumer_session_timeout_ms=10_000, consumer_heartbeat_interval_ms=1000)


@contextlib.contextmanager
def groupcoord_peer(fsync: str = "always") -> Iterator[Peer]:
    """groupcoord with 4 partitions and its Kafka listener on a free loopback port."""
    import ray

    from groupcoord.actors import start, stop

    if "kafka_listener" not in inspect.signature(start).parameters:
        raise PeerUnavailable("groupcoord has no Kafka listener on this branch (issue 32 not merged)")
    own_ray = not ray.is_initialized()
    if own_ray:  # a Ray of our own: never one that someone else started on this shared machine
        with starting_priority():
            ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
    with contextlib.ExitStack() as cleanup, tempfile.TemporaryDirectory(prefix="gc-vs-kafka-") as path:
        if own_ray:
            cleanup.callback(ray.shutdown)
        namespace = f"gc-vs-kafka-{uuid.uuid4().hex[:8]}"
        kwargs = dict(num_partitions=4, storage_path=str(Path(path) / "data"), namespace=namespace, fsync=fsync,
                      config=_groupcoord_config(), kafka_listener="127.0.0.1:0")
        svc = start(**kwargs)
        state = {"svc": svc}

        def restart() -> dict:
            stop(namespace)
            started = time.perf_counter()
            state["svc"] = start(**kwargs)
            return {"process_to_ready_s": time.perf_counter() - started, "bootstrap": state["svc"].kafka_bootstrap}

        try:
            yield Peer("groupcoord", svc.kafka_bootstrap, restart)
        finally:
            stop(namespace)


def _step(out: dict, key: str, label: str, run: Callable[[], object]) -> None:
    """One measurement into `out[key]`; one that fails leaves `out[key + "_error"]` and the others go on."""
    print(f"  {label}", flush=True)
    try:
        out[key] = run()
    except Exception as e:  # a load the peer could not take (e.g. members expired) is a result too
        logger.warning("%s failed: %r", label, e)
        out[f"{key}_error"] = f"{type(e).__name__}: {e}"[:500]
        print(f"    failed: {out[f'{key}_error']}", flush=True)


def measure(peer: Peer, args: argparse.Namespace) -> dict:
    """Every load of this benchmark against one peer."""
    out: dict = {}
    b = peer.bootstrap
    load.create_topic(b, "bench-commits", args.partitions)
    # 500 partitions: Kafka 4.4 gave a KIP-848 member of a 1,000-partition topic an empty assignment here
    load.create_topic(b, "bench-members", min(max(args.members, 1), 500))
    _step(out, "commits", f"[{peer.name}] commits: {args.clients} clients x {args.partitions} partitions, "
          f"{args.seconds:.0f} s", lambda: load.commits_per_second(b, "bench-commits", clients=args.clients,
                                                                  partitions=args.partitions, seconds=args.seconds))
    _step(out, "heartbeats", f"[{peer.name}] heartbeats: {args.members} members",
          lambda: load.heartbeats_per_second(b, "bench-members", members=args.members,
                                             seconds=max(2.0, args.seconds / 2)))
    _step(out, "rebalance_classic", f"[{peer.name}] rebalance: {args.members} members, classic",
          lambda: load.classic_rebalance_seconds(b, "bench-members", members=args.members))
    _step(out, "rebalance_consumer", f"[{peer.name}] rebalance: {args.members} members, consumer protocol",
          lambda: load.consumer_rebalance_seconds(b, "bench-members", members=args.members))
    if args.offsets:
        _step(out, "restart", f"[{peer.name}] restart with {args.offsets:,} offsets", lambda: _restart(peer, args))
    return out


def _restart(peer: Peer, args: argparse.Namespace) -> dict:
    """Commit `args.offsets` live offsets, restart the peer, and time until they are served again."""
    b = peer.bootstrap
    groups = max(1, args.offsets // 1000)
    parts = min(1000, args.offsets)
    load.create_topic(b, RESTART_TOPIC, parts)
    started = time.perf_counter()
    acked = load.bulk_commit(b, RESTART_TOPIC, groups=groups, partitions=parts)
    out = {"offsets": acked, "commit_s": time.perf_counter() - started}
    print(f"    {acked:,} offsets committed in {out['commit_s']:.0f} s; restarting", flush=True)
    info = peer.restart()
    bootstrap = info.pop("bootstrap", b)
    sample = [f"bench-restart-{g}" for g in range(0, groups, max(1, groups // 16))]
    info["first_fetches_s"] = load.fetch_answered(bootstrap, sample, RESTART_TOPIC)
    info["serving_s"] = info["process_to_ready_s"] + info["first_fetches_s"]
    out.update(info)
    return out


def _get(results: dict, side: str, *path: str | int) -> float | None:
    node = results.get(side)
    for key in path:
        if not isinstance(node, (dict, list)):
            return None
        try:
            node = node[key]
        except (KeyError, IndexError):
            return None
    return node if isinstance(node, (int, float)) and not isinstance(node, bool) else None


def _rows(results: dict) -> list[tuple[str, str, str, str, str]]:
    """(metric, unit, Kafka, groupcoord, ratio) cells of the side-by-side table; a step that failed says so."""
    def both(*path: str | int) -> tuple[str, float | None, float | None]:
        return str(path[0]), _get(results, "kafka", *path), _get(results, "groupcoord", *path)

    args = results.get("args", {})
    rows = [(f"commits ({args.get('partitions', 100)} partitions, {args.get('clients', 64)} clients)", "requests/s",
             *both("commits", "requests_per_s")),
            ("commit latency p99", "ms", *both("commits", "p99_ms"))]
    levels = results.get("kafka", {}).get("heartbeats") or results.get("groupcoord", {}).get("heartbeats", [])
    for i, level in enumerate(levels):
        rows.append((f"heartbeats, {level['members']} members, {level['in_flight']} in flight", "per s",
                     *both("heartbeats", i, "per_s")))
        rows.append((f"false expiries at {level['in_flight']} in flight", "count",
                     *both("heartbeats", i, "false_expiries")))
    members = args.get("members", 1000)
    rows += [(f"rebalance, {members} members, classic", "s", *both("rebalance_classic", "seconds")),
             (f"rebalance, {members} members, consumer protocol", "s", *both("rebalance_consumer", "seconds")),
             ("members fenced (session timeout) on the way", "count", *both("rebalance_consumer", "fenced")),
             (f"restart with {args.get('offsets', 0):,} offsets: stop -> offsets served", "s",
              *both("restart", "serving_s")),
             ("node loss -> first acknowledged commit (median)", "s", *both("node_loss", "median_s"))]
    out = []
    for name, unit, key, k, g in rows:
        cells = []
        for side, value in (("kafka", k), ("groupcoord", g)):
            failed = f"{key}_error" in results.get(side, {}) or f"{side}_{key}_error" in results
            cells.append(_fmt(value) if value is not None else "failed" if failed else "-")
        if cells != ["-", "-"]:
            out.append((name, unit, *cells, f"{g / k:.2f}" if k and g is not None and unit != "count" else "-"))
    return out


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}" if abs(x) >= 10 else f"{x:.2f}"


def _loss_cell(losses: dict | None, error: str | None) -> str:
    if not losses:
        return f"not measured: {error}"[:200] if error else "-"
    values = " ".join(f"{v:.2f}" for v in losses["values_s"])
    return f"{_fmt(losses['median_s'])} ({values}; {losses['counted']} of {losses['attempted']} losses counted)"


def report(results: dict) -> None:
    """Print the side-by-side table with groupcoord/Kafka ratios, and the node losses with both sides' timeouts."""
    from benchmarks import common

    print()
    print(common.machine_line(results["machine"]))
    print(common.machine_line(results["machine_after"]).replace("machine:", "after:  "))
    table = [list(row) for row in _rows(results)]
    common.print_table("Kafka 4.4 and groupcoord, same wire client, same machine (ratio = groupcoord / Kafka)",
                       ["metric", "unit", "Kafka 4.4", "groupcoord", "ratio"], table)
    loss_k, loss_g = results.get("kafka", {}).get("node_loss"), results.get("groupcoord", {}).get("node_loss")
    if loss_k or loss_g or results.get("kafka_node_loss_error") or results.get("groupcoord_node_loss_error"):
        settings_k = ", ".join(f"{k}={v}" for k, v in (loss_k or {}).get("settings", {}).items()
                               if k in NODE_LOSS_SETTINGS)
        settings_g = ", ".join(f"{k}={v}" for k, v in (loss_g or {}).get("settings", {}).items())
        common.print_table("node loss with 3 replicas (min in sync 2): seconds from the coordinator's loss to the "
                           "first acknowledged commit, median (every loss)",
                           ["peer", "seconds", "lost node", "detection settings"],
                           [["Kafka 4.4, 3 KRaft broker+controller nodes", _loss_cell(loss_k,
                             results.get("kafka_node_loss_error")), "SIGKILL of the coordinator's JVM", settings_k],
                            ["groupcoord, Ray head + 3 workers", _loss_cell(loss_g,
                             results.get("groupcoord_node_loss_error")),
                             "removal of the leader replica's Ray node", settings_g]])
    marks = [("start", "machine"), ("between the peers", "machine_between"), ("end", "machine_after")]
    common.print_table("the machine's load average (1, 5, 15 min) during the run", ["when", "load average"],
                       [[when, ", ".join(f"{x:.1f}" for x in results[key]["loadavg"])]
                        for when, key in marks if key in results])
    loads = results.get("kafka", {}).get("restart", {}).get("coordinator_load_ms")
    if loads:
        print(f"Kafka's coordinator loaded its {len(loads)} offsets partitions in {loads} ms")


def _run_side(results: dict, key: str, what: str, run: Callable[[], dict]) -> None:
    """Run one part; a part that fails is recorded with its reason and the run goes on."""
    from benchmarks import common

    common.step(f"=== {what} ===")
    side, _, part = key.partition(".")
    try:
        value = run()
    except Exception as e:  # one part failing still reports the others
        logger.exception("%s failed", what)
        results[f"{side}{'_' + part if part else ''}_error"] = f"{type(e).__name__}: {e}"
        print(f"  {what} failed: {type(e).__name__}: {e}", flush=True)
        return
    if part:
        results.setdefault(side, {})[part] = value
    else:
        results[side] = {**value, **results.get(side, {})}


def _measure_with(peer_cm: Callable[[], contextlib.AbstractContextManager[Peer]], args: argparse.Namespace) -> dict:
    with peer_cm() as peer:
        return measure(peer, args)


def main(argv: list[str] | None = None) -> int:
    """Run both peers in one process, print the table, and write benchmarks/results/vs-kafka.json."""
    from benchmarks import common
    from benchmarks.kafka import node_loss

    parser = argparse.ArgumentParser(prog="python -m benchmarks vs-kafka", description=__doc__)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--offsets", type=int, default=1_000_000, help="live offsets before the restart (0: skip)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--losses", type=int, default=3, help="coordinator node losses per peer (0: skip)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes: 16 clients, 100 members, 20k offsets, 3 s, 2 losses")
    parser.add_argument("--only", choices=["kafka", "groupcoord"], help="run one peer")
    parser.add_argument("--no-load", action="store_true", help="only the node losses")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.quick:
        args.clients, args.members, args.offsets, args.seconds, args.losses = 16, 100, 20_000, 3.0, 2
    started = time.perf_counter()
    results: dict = {"machine": common.machine(), "args": vars(args), "started": time.strftime("%H:%M UTC",
                                                                                              time.gmtime())}
    sides = [s for s in ("kafka", "groupcoord") if args.only in (None, s)]
    if "kafka" in sides:
        if not args.no_load:
            _run_side(results, "kafka", "Kafka 4.4, single node", lambda: _measure_with(kafka_peer, args))
        if args.losses:
            _run_side(results, "kafka.node_loss", f"Kafka 4.4, 3 nodes, {args.losses} coordinator losses",
                      lambda: node_loss.kafka_node_losses(args.losses))
    results["machine_between"] = common.machine()
    if "groupcoord" in sides:
        if not args.no_load:
            _run_side(results, "groupcoord", "groupcoord, local Ray", lambda: _measure_with(groupcoord_peer, args))
        if args.losses:
            _run_side(results, "groupcoord.node_loss", f"groupcoord, Ray cluster, {args.losses} leader node losses",
                      lambda: node_loss.groupcoord_node_losses(args.losses, config=_groupcoord_config()))
    results["machine_after"] = common.machine()
    common.REPORT.clear()
    report(results)
    path = common.write_results("vs-kafka", args, results, time.perf_counter() - started)
    print(f"\nwrote {path}")
    return 0
