"""`python -m benchmarks conformance --sequences N`: the differential run between two Kafka-protocol targets.

By default both sides are one Kafka 4.4 broker started here (Kafka against itself: the harness
proves itself, any divergence is the harness's fault). `--left`/`--right` take any bootstrap
address (e.g. groupcoord's Kafka listener, configured with `broker.GROUP_SETTINGS`). Sequences are
`generate(seed)` for consecutive seeds, run `--workers` at a time; every divergence is confirmed
by a re-run, shrunk, printed, and written with the counts to benchmarks/results/conformance.json.
`--groupcoord` starts groupcoord here (its Kafka listener, with the broker's group settings) as the
other side; `--kafka-setting` overrides a broker setting; `--minutes` bounds the first pass
(sequences not started by then are not run, and the report counts only those that ran).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from benchmarks.kafka.differential import Divergence, Target, compare, confirmed_divergence, prepare_target
from benchmarks.kafka.sequences import generate

logger = logging.getLogger(__name__)


@dataclass
class ConformanceReport:
    """What a differential run found: sequences run, first-pass differences, confirmed divergences."""

    sequences: int = 0
    steps: int = 0
    unconfirmed: list[int] = field(default_factory=list)
    divergences: list[tuple[int, Divergence]] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)  # signature -> sequences showing it
    seconds: float = 0.0


class _Progress:
    """A line on stderr every 250 sequences: how many ran and diverged, the rate and the time left."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.diverged = total, 0, 0
        self.started = time.perf_counter()
        self.lock = threading.Lock()

    def step(self, diverged: bool) -> None:
        with self.lock:
            self.done += 1
            self.diverged += diverged
            if self.done % 250 and self.done != self.total:
                return
            rate = self.done / (time.perf_counter() - self.started)
            print(f"  {self.done}/{self.total} sequences, {self.diverged} differing, {rate:.1f}/s, "
                  f"about {(self.total - self.done) / rate / 60:.0f} min left", file=sys.stderr, flush=True)


def run_many(left: Target, right: Target, seeds: range, workers: int = 16, settle: float = 0.4,
             shrink: bool = True, seconds: float | None = None) -> ConformanceReport:
    """Compare every seed's sequence on both targets; confirm (and shrink) one divergence of each kind.

    With `seconds`, seeds not started within that time of the first pass are skipped (not counted).
    """
    started = time.perf_counter()
    report = ConformanceReport()
    progress = _Progress(len(seeds))

    def one(seed: int) -> tuple[int, int, Divergence | None] | None:
        if seconds is not None and time.perf_counter() - started > seconds:
            return None
        steps = generate(seed)
        result = seed, len(steps), compare(steps, left, right, settle)
        progress.step(result[2] is not None)
        return result

    with ThreadPoolExecutor(max_workers=workers) as pool:
        first = [r for r in pool.map(one, seeds) if r is not None]
    attempts: dict[str, int] = {}
    for seed, n_steps, divergence in first:
        report.sequences += 1
        report.steps += n_steps
        if divergence is None:
            continue
        kind = divergence.signature()
        if kind in report.kinds:  # one shrunk example per kind of difference; the others are counted
            report.kinds[kind] += 1
            continue
        # A kind that did not reproduce three times is timing (or Kafka's randomness): counted, not retried.
        attempts[kind] = attempts.get(kind, 0) + 1
        confirmed = None
        if attempts[kind] <= 3:
            confirmed = confirmed_divergence(divergence.steps, left, right, settle, shrinking=shrink)
        if confirmed is None:
            report.unconfirmed.append(seed)
        else:
            report.kinds[kind] = 1
            report.divergences.append((seed, confirmed))
    report.seconds = time.perf_counter() - started
    return report


def _targets(args: argparse.Namespace, stack) -> tuple[Target, Target]:
    if args.left and args.right:
        return prepare_target("left", args.left), prepare_target("right", args.right)
    from benchmarks.kafka.broker import KafkaBroker

    settings = dict(item.split("=", 1) for item in args.kafka_setting)
    broker = stack.enter_context(KafkaBroker(settings=settings))
    print(f"Kafka 4.4 broker {broker.bootstrap} started in {broker.start_seconds:.1f} s")
    kafka = prepare_target("kafka", broker.bootstrap)
    if args.groupcoord:
        from benchmarks.kafka.vs_kafka import groupcoord_peer

        peer = stack.enter_context(groupcoord_peer(fsync="always"))
        print(f"groupcoord's Kafka listener {peer.bootstrap}")
        return kafka, prepare_target("groupcoord", peer.bootstrap)
    other = prepare_target("other", args.left or args.right) if (args.left or args.right) else kafka
    return kafka, other


def main(argv: list[str] | None = None) -> None:
    """Run the differential conformance from the command line."""
    import contextlib

    parser = argparse.ArgumentParser(prog="python -m benchmarks conformance", description=__doc__)
    parser.add_argument("--sequences", type=int, default=10_000)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--settle", type=float, default=0.4, help="seconds a JoinGroup/SyncGroup may take")
    parser.add_argument("--left", help="bootstrap of one side (default: a Kafka broker started here)")
    parser.add_argument("--right", help="bootstrap of the other side (default: the same Kafka broker)")
    parser.add_argument("--groupcoord", action="store_true",
                        help="the other side is groupcoord's Kafka listener, started here with the broker's settings")
    parser.add_argument("--minutes", type=float, help="stop starting new sequences after this long")
    parser.add_argument("--kafka-setting", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting over broker.GROUP_SETTINGS "
                             "(e.g. group.consumer.migration.policy=disabled)")
    parser.add_argument("--no-shrink", action="store_true", help="confirm divergences but do not shrink them")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        left, right = _targets(args, stack)
        seeds = range(args.first_seed, args.first_seed + args.sequences)
        report = run_many(left, right, seeds, workers=args.workers, settle=args.settle, shrink=False,
                          seconds=None if args.minutes is None else args.minutes * 60)
        _write(args, report, left, right, shrunk=False)  # kept even if shrinking is cut short
        if not args.no_shrink:
            for i, (seed, divergence) in enumerate(report.divergences):
                smaller = confirmed_divergence(divergence.steps, left, right, args.settle)
                if smaller is not None:
                    report.divergences[i] = (seed, smaller)
            report.seconds = time.perf_counter() - started
            _write(args, report, left, right, shrunk=True)
    for seed, divergence in report.divergences:
        print(f"\nseed {seed}: {divergence.report(left.name, right.name)}")
    print(f"\n{report.sequences} sequences ({report.steps} requests) {left.bootstrap} vs {right.bootstrap} "
          f"in {report.seconds:.0f} s: {len(report.divergences)} divergences, "
          f"{len(report.unconfirmed)} first-pass differences that did not reproduce")
    for kind, count in sorted(report.kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {count:5d} sequences: {kind}")


def _write(args: argparse.Namespace, report: ConformanceReport, left: Target, right: Target, shrunk: bool) -> None:
    """benchmarks/results/conformance.json: the run's counts, kinds and one divergence of each kind."""
    from benchmarks import common

    results = {
        "machine": common.machine(),
        "left": f"{left.name} {left.bootstrap}", "right": f"{right.name} {right.bootstrap}",
        "seeds": [args.first_seed, args.first_seed + report.sequences - 1], "kafka_settings": args.kafka_setting,
        "sequences": report.sequences, "requests": report.steps, "seconds": round(report.seconds, 1),
        "shrunk": shrunk, "divergences": [
            {"seed": s, "signature": d.signature(), "steps": [str(x) for x in d.steps], "index": d.index,
             "left": repr(d.left), "right": repr(d.right)} for s, d in report.divergences],
        "unconfirmed_seeds": report.unconfirmed, "kinds": report.kinds,
    }
    common.RESULTS_DIR.mkdir(exist_ok=True)
    (common.RESULTS_DIR / "conformance.json").write_text(json.dumps(results, indent=2, default=str))
