"""Shared plumbing of the load benchmarks: machine facts, statistics, tables, results, Ray and services.

Every benchmark module has `add_arguments(parser)`, `run(args) -> dict` and `report(results)`;
`benchmarks/__main__.py` dispatches to them. The client side of a benchmark is an async function
written against a `Caller` (one coroutine per request), so the same code drives a partition
actor through Ray and the pure shard in-process: `ActorCaller` sends Ray actor calls,
`LocalCaller` awaits the PartitionActor class running in this process's event loop, without Ray.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, Sequence

from groupcoord.actors.client.wire import OnePickle
from groupcoord.protocol import partition_for
from groupcoord.protocol.config import GroupConfig

log = logging.getLogger(__name__)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO_ROOT = Path(__file__).resolve().parent.parent
RAY_NAMESPACE = "groupcoord-bench"

# --- the machine -------------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or platform.processor())."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict:
    """Cores, CPU model, Python and Ray versions, and the load average when asked."""
    try:
        import ray

        ray_version = ray.__version__
    except ImportError:  # pragma: no cover - ray is a dependency
        ray_version = "none"
    return {
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "ray": ray_version,
        "platform": platform.platform(),
        "loadavg": list(os.getloadavg()),
    }


def machine_line(m: dict) -> str:
    """One line describing the machine, printed above every table."""
    load = ", ".join(f"{x:.1f}" for x in m["loadavg"])
    return f"machine: {m['cores']} cores, {m['cpu']}, Python {m['python']}, Ray {m['ray']} (load {load})"


# --- statistics --------------------------------------------------------------------------------


def summarize(values: Sequence[float]) -> dict:
    """Median, min, max and relative spread ((max - min) / median) of repeated trials."""
    vals = [float(v) for v in values]
    if not vals:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "spread": float("nan"), "n": 0}
    med = statistics.median(vals)
    lo, hi = min(vals), max(vals)
    return {"median": med, "min": lo, "max": hi, "spread": (hi - lo) / med if med else float("nan"), "n": len(vals)}


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank; nan for no values."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


def fmt_rate(s: dict) -> str:
    """`median (min-max)` of a summarized rate, in thousands when large."""
    if s["n"] == 0:
        return "-"
    if s["median"] >= 10_000:
        return f"{s['median'] / 1000:,.1f}k ({s['min'] / 1000:,.1f}-{s['max'] / 1000:,.1f}k)"
    return f"{s['median']:,.0f} ({s['min']:,.0f}-{s['max']:,.0f})"


def fmt_ms(seconds: float) -> str:
    """Seconds as milliseconds with a sensible precision."""
    ms = seconds * 1000
    return "-" if ms != ms else (f"{ms:.2f}" if ms < 10 else f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}")


def fmt_ratio(x: float) -> str:
    """A ratio such as 0.42 as `42%`."""
    return "-" if x != x else f"{x * 100:.0f}%"


# --- output ------------------------------------------------------------------------------------


# What the running benchmark's report printed (tables and verdicts), kept in its results JSON so that
# docs/benchmarks.md is generated from the JSON (`python -m benchmarks docs`), never edited by hand.
REPORT: list[dict] = []


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a plain aligned table (first column left-aligned, the others right-aligned)."""
    cells = [[str(c) for c in r] for r in rows]
    REPORT.append({"table": title, "headers": [str(h) for h in headers], "rows": cells})
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        pairs = enumerate(zip(values, widths, strict=True))
        return "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in pairs)

    print(f"\n{title}")
    print(line(headers))
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print(line(r))


def verdict(met: bool) -> str:
    """`met` or `MISSED`: how a report's line about a target ends."""
    return "met" if met else "MISSED"


def print_target(goal: str, measured: str, met: bool) -> None:
    """Print a report's verdict on one target: `target: GOAL: MEASURED (met)`, or `(MISSED)`."""
    REPORT.append({"target": goal, "measured": measured, "met": bool(met)})
    print(f"target: {goal}: {measured} ({verdict(met)})")


def step(message: str) -> None:
    """A progress line on stderr, with the time of day."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Progress:
    """Prints how far a long step got, about every 10%, on stderr."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.next = label, total, max(1, total // 10)
        self.start = time.perf_counter()

    def update(self, done: int) -> None:
        """Report `done` of `total` if another tenth was reached."""
        if self.total and done >= self.next:
            elapsed = time.perf_counter() - self.start
            print(f"  {self.label}: {done * 100 // self.total:3d}% ({elapsed:.1f} s)", file=sys.stderr, flush=True)
            self.next += max(1, self.total // 10)


def write_results(name: str, args: argparse.Namespace, results: dict, seconds: float) -> Path:
    """Write benchmarks/results/NAME.json (machine, options, results) and return its path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    options = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "func"}
    doc = {"benchmark": name, "machine": results.get("machine") or machine(), "options": options,
           "seconds": seconds, "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "report": list(REPORT), "results": results}
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return path


def write_failure(name: str, argv: list[str], reason: str, seconds: float) -> Path:
    """Write benchmarks/results/NAME.json for a benchmark that failed: the machine, its options and why."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    doc = {"benchmark": name, "machine": machine(), "options": {"argv": argv}, "seconds": seconds,
           "failed": reason, "results": None}
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return path


def write_summary(rows: list[dict], seconds: float, started: str, load_at_start: list[float]) -> Path:
    """Write benchmarks/results/all.json: each benchmark of one `all` run, ok or failed with its reason, with
    when it started and ended and the load average at both ends (`machine`'s is the end's)."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / "all.json"
    doc = {"benchmark": "all", "machine": machine(), "seconds": seconds, "started": started,
           "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_at_start": load_at_start,
           "runs": rows}
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return path


def add_common_arguments(parser: argparse.ArgumentParser, default_trials: int = 3) -> None:
    """--quick, --tiny, --trials and --dir, which every benchmark takes."""
    parser.add_argument("--quick", action="store_true", help="small sizes: the whole benchmark in seconds")
    parser.add_argument("--tiny", action="store_true", help="smallest sizes, for the smoke test")
    parser.add_argument("--trials", type=int, default=None,
                        help=f"repetitions per measurement (default {default_trials}; quick 2, tiny 1)")
    parser.add_argument("--dir", type=Path, default=None, help="where logs are written (default: a temp dir)")


def preset(args: argparse.Namespace, full: Any, quick: Any, tiny: Any) -> Any:
    """Pick the full, quick or tiny value of a size."""
    return tiny if args.tiny else quick if args.quick else full


def trials(args: argparse.Namespace, full: int = 3) -> int:
    """The number of trials per measurement."""
    return args.trials if args.trials is not None else preset(args, full, 2, 1)


def ints(text: str) -> list[int]:
    """Parse `1,4,16` (also `10k`, `1M`) into ints."""
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        mult = 1_000_000 if part.endswith("m") else 1000 if part.endswith("k") else 1
        out.append(int(float(part.rstrip("mk")) * mult))
    return out


@contextlib.contextmanager
def work_dir(args: argparse.Namespace, prefix: str) -> Iterator[Path]:
    """A fresh directory for this run's logs, removed afterwards."""
    if args.dir is not None:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"bench-{prefix}-", dir=args.dir))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# --- Ray and services --------------------------------------------------------------------------


@contextlib.contextmanager
def ray_session() -> Iterator[None]:
    """Use the running Ray (e.g. the test suite's) or start a local one for the benchmark, and stop it after."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    started = False
    if not ray.is_initialized():
        # address="local": always a Ray of our own, never another user's cluster found on this machine.
        ray.init(address="local", include_dashboard=False, log_to_driver=False, namespace=RAY_NAMESPACE,
                 configure_logging=False)
        started = True
    try:
        yield
    finally:
        if started:
            ray.shutdown()


def bench_config(**overrides: Any) -> GroupConfig:
    """Kafka's defaults, except timeouts short enough for benchmarks.

    The initial rebalance delay (KIP-134) is 50 ms instead of 3 s: a new group's first
    generation starts once 50 ms pass without a new member (a batch of joins takes less).
    """
    values: dict[str, Any] = {"min_session_timeout_ms": 100, "initial_rebalance_delay_ms": 50}
    values.update(overrides)
    return GroupConfig(**values)


@contextlib.contextmanager
def service(num_partitions: int, path: Path, config: GroupConfig | None = None, fsync: str = "always",
            observability: Any = None) -> Iterator[Any]:
    """A groupcoord service in its own namespace over `path`, stopped (actors killed) afterwards."""
    from groupcoord.actors import start, stop

    namespace = f"gc-bench-{uuid.uuid4().hex[:8]}"
    svc = start(num_partitions=num_partitions, storage_path=str(path), namespace=namespace, fsync=fsync,
                config=config, observability=observability)
    try:
        yield svc
    finally:
        stop(namespace)


def group_names(prefix: str, count: int, partition: int, num_partitions: int, start: int = 0) -> list[str]:
    """`count` group ids that hash to offsets partition `partition`."""
    out: list[str] = []
    i = start
    while len(out) < count:
        name = f"{prefix}-{i}"
        if partition_for(name, num_partitions) == partition:
            out.append(name)
        i += 1
    return out


def spread_groups(prefix: str, count: int, num_partitions: int) -> list[str]:
    """`count` group ids, the i-th on partition i % num_partitions (so load is spread evenly)."""
    per = [group_names(prefix, (count + num_partitions - 1) // num_partitions, p, num_partitions)
           for p in range(num_partitions)]
    return [per[i % num_partitions][i // num_partitions] for i in range(count)]


def read_rss(pid: int) -> int:
    """Resident set size of a process on this machine, in bytes (from /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def read_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process on this machine has used so far, in seconds (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_ticks() -> tuple[int, int]:
    """The machine's (idle, total) CPU ticks so far, over all cores (from /proc/stat)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return ticks[3] + ticks[4], sum(ticks)  # idle and iowait count as idle


def wait_quiet(max_busy: float = 0.3, max_wait_s: float = 30.0) -> dict:
    """Wait until the machine's cores are busy less than `max_busy` of a second (at most `max_wait_s`), so that a
    benchmark times its operation and not the aftermath of its set-up or of the benchmark before it (flushes,
    compactions, processes ending). How long it waited and the last second's busy fraction."""
    started = time.perf_counter()
    while True:
        idle0, total0 = _cpu_ticks()
        time.sleep(1.0)
        idle1, total1 = _cpu_ticks()
        busy = 1 - (idle1 - idle0) / max(1, total1 - total0)
        waited = time.perf_counter() - started
        if busy < max_busy or waited >= max_wait_s:
            return {"waited_s": round(waited, 1), "busy": round(busy, 2), "quiet": busy < max_busy}


# --- callers: the same client code against an actor or the in-process shard ------------------

Caller = Callable[[str, Any], Awaitable[Any]]
BatchCaller = Callable[[list], Awaitable[list]]


class ActorCaller:
    """Calls a partition actor through Ray: `await caller(api, request)`; `batch` sends many in one call."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def __call__(self, api: str, req: Any) -> Awaitable[Any]:
        return getattr(self.handle, api).remote(req)

    def batch(self, calls: list) -> Awaitable[list]:
        """Many (api, request) pairs in one actor call (pickled whole, as the client library sends); their
        responses in order."""
        return self.handle.batch.remote(OnePickle(calls))


class CoalescingCaller:
    """A client process's link to one partition actor that sends the requests its clients issue in the
    same event-loop turn together, in one `batch` actor call (as Kafka clients share one connection)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self._queue: list[tuple[str, Any, asyncio.Future]] = []
        self._scheduled = False
        self._in_flight: set[asyncio.Task] = set()
        self.calls = 0
        self.requests = 0

    def __call__(self, api: str, req: Any) -> Awaitable[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.append((api, req, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._send)
        return future

    def batch(self, calls: list) -> Awaitable[list]:
        """Many (api, request) pairs in one actor call (not coalesced further)."""
        return self.handle.batch.remote(OnePickle(calls))

    def _send(self) -> None:
        self._scheduled = False
        queue, self._queue = self._queue, []
        self.calls += 1
        self.requests += len(queue)
        task = asyncio.ensure_future(self._round_trip(queue))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _round_trip(self, queue: list[tuple[str, Any, asyncio.Future]]) -> None:
        try:
            results = await self.handle.batch.remote(OnePickle([(api, req) for api, req, _ in queue]))
        except Exception as e:
            for _, _, future in queue:
                future.set_exception(e)
            return
        for (_, _, future), result in zip(queue, results, strict=True):
            future.set_result(result)


class BatcherCaller:
    """The client's own RequestCoalescer as a Caller: requests of this process's clients share `batch` calls,
    as those of GroupMembers in one process do. `coalescer` counts the calls and requests; close it after."""

    def __init__(self, handle: Any) -> None:
        from groupcoord.actors.client.coalescer import RequestCoalescer

        self.coalescer = RequestCoalescer(handle)

    def __call__(self, api: str, req: Any) -> Awaitable[Any]:
        return asyncio.wrap_future(self.coalescer.submit(api, req))


class LocalCaller:
    """Calls a PartitionActor object that runs in this process's event loop (the pure shard, no Ray)."""

    def __init__(self, partition: Any) -> None:
        self.partition = partition

    def __call__(self, api: str, req: Any) -> Awaitable[Any]:
        return getattr(self.partition, api)(req)

    def batch(self, calls: list) -> Awaitable[list]:
        """Many (api, request) pairs; their responses in order."""
        return self.partition.batch(calls)


async def open_local_partition(path: Path, num_partitions: int = 1, partition: int = 0,
                               config: GroupConfig | None = None, fsync: str = "always") -> Any:
    """The PartitionActor class as a plain object in this event loop, once it has loaded its log.

    It runs the exact request, group-commit and timer code of the actor, over the same
    PartitionLog and fsync policy, minus Ray: the in-process baseline of every benchmark.
    """
    from groupcoord.actors.service import PartitionActor
    from groupcoord.storage import StorageRoot

    StorageRoot(path, num_partitions)  # as start() does: a partition only opens an existing root
    p = PartitionActor(partition, num_partitions, str(path), fsync, config)
    while not await p.is_loaded():
        await asyncio.sleep(0.005)
    return p


async def close_local_partition(p: Any) -> None:
    """Stop an in-process PartitionActor's background tasks and close its log."""
    await p.close()


class Driver:
    """A client process: runs the async load functions it is given in its own event loop.

    `run_local` hands the function this process's `state` dict, so an in-process shard opened by
    one call (see open_local_partition) serves the next: in-process baselines run in a Ray worker
    too, at the same (lowered) priority as the actors they are compared with.
    """

    def __init__(self) -> None:
        import groupcoord.actors  # noqa: F401  - as every client process does (it sets up the wire encoding)

        self.state: dict[str, Any] = {}

    async def run(self, fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        """`await fn(*args, **kwargs)` in this process."""
        return await fn(*args, **kwargs)

    async def run_local(self, fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        """`await fn(state, *args, **kwargs)` with this process's state dict."""
        return await fn(self.state, *args, **kwargs)

    async def pid(self) -> int:
        """This process's id."""
        return os.getpid()

    async def reset(self) -> int:
        """Forget what earlier runs left in `state` (closing an in-process shard left open); this process's id."""
        partition = self.state.pop("partition", None)
        if partition is not None:
            await close_local_partition(partition)
        self.state.clear()
        return os.getpid()

    async def nice(self) -> int:
        """This process's niceness (Ray lowers its workers' priority)."""
        return os.nice(0)


# Driver actors kept between benchmarks while `reuse_drivers` is in effect (None: each run starts and kills its own).
_DRIVER_POOL: list[Any] | None = None


@contextlib.contextmanager
def reuse_drivers() -> Iterator[None]:
    """Within this block, `stop_drivers` keeps the driver processes and `start_drivers` hands them out again
    (their state cleared) instead of starting new ones; they are killed when it ends.

    For runs of many short benchmarks on one Ray (the smoke tests), where starting a driver process
    (a Ray worker of its own) takes longer than the benchmark's own work.
    """
    global _DRIVER_POOL
    if _DRIVER_POOL is not None:  # already in effect: the outer block owns the drivers
        yield
        return
    _DRIVER_POOL = []
    try:
        yield
    finally:
        pool, _DRIVER_POOL = _DRIVER_POOL, None
        _kill(pool)


def _new_drivers(n: int) -> list[Any]:
    import ray

    # Driver processes import `benchmarks` from the repository, wherever the Ray workers start.
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    cls = ray.remote(Driver).options(num_cpus=0, runtime_env={"env_vars": {"PYTHONPATH": path}})
    return [cls.remote() for _ in range(n)]


def start_drivers(n: int) -> list[Any]:
    """`n` driver actors (no CPU reserved), ready to run load functions."""
    import ray

    kept: list[Any] = []
    if _DRIVER_POOL is not None:
        kept, _DRIVER_POOL[:] = _DRIVER_POOL[:n], _DRIVER_POOL[n:]
    drivers = kept + _new_drivers(n - len(kept))
    ready = [(d.reset if i < len(kept) else d.pid).remote() for i, d in enumerate(drivers)]
    for i, ref in enumerate(ready):
        try:
            ray.get(ref)
        except ray.exceptions.RayActorError:
            if i >= len(kept):
                raise
            drivers[i] = _new_drivers(1)[0]  # a kept driver that died since: a new one in its place
            ray.get(drivers[i].pid.remote())
    return drivers


def stop_drivers(drivers: list[Any]) -> None:
    """Kill driver actors (or, under `reuse_drivers`, keep them for the next run)."""
    if _DRIVER_POOL is not None:
        _DRIVER_POOL.extend(drivers)
    else:
        _kill(drivers)


def _kill(drivers: list[Any]) -> None:
    import ray

    for d in drivers:
        ray.kill(d)


def own_window(start_at: float, end_at: float, lead_s: float) -> tuple[float, float, float]:
    """The counting window [start, end] of a client that wanted `lead_s` of warm-up before `start_at`.

    A client process that gets its work late (a starved Ray worker) keeps the window's length and
    shifts it, so it always measures as long as the others; the shift is returned as its lateness,
    for the trial to report how far its clients' windows were apart.
    """
    late_s = max(0.0, time.time() + lead_s - start_at)
    return start_at + late_s, end_at + late_s, late_s


def split(items: Sequence[Any], parts: int) -> list[list[Any]]:
    """`items` dealt round-robin into `parts` lists (some may be empty)."""
    out: list[list[Any]] = [[] for _ in range(parts)]
    for i, item in enumerate(items):
        out[i % parts].append(item)
    return out


def run_benchmark(name: str, module: Any, argv: list[str] | None) -> dict:
    """Parse argv for `module`, run it inside a Ray session, print its report and write NAME.json."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks {name}", description=module.__doc__)
    module.add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    started = time.perf_counter()
    with ray_session():
        results = module.run(args)
    seconds = time.perf_counter() - started
    results["machine"] = results.get("machine") or machine()
    print(f"\n== {name} ==  ({seconds:.0f} s)")
    print(machine_line(results["machine"]))
    REPORT.clear()
    module.report(results)
    path = write_results(name, args, results, seconds)
    print(f"\nwrote {path}")
    return results
