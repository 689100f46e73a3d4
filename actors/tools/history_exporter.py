"""The history export on a schedule: a Ray actor that runs groupcoord.spark's export every few seconds.

The actor reads the partition logs through storage/ (never through the partition actors), so it
cannot slow the service down, and it reserves no CPU. Each run takes what was appended since the
last checkpoint (see spark/history.py); a run that fails is logged and retried at the next tick,
and a crash of the actor loses nothing, as every run starts from the checkpoint in the history.
One exporter per namespace and history, under a fixed name, detached from the driver.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import ray

from groupcoord.spark.history import DEFAULT_STEP_RECORDS, export_history

log = logging.getLogger(__name__)

EXPORTER_NAME = "groupcoord-history-exporter"


@ray.remote(num_cpus=0, max_restarts=-1)
class HistoryExporter:
    """Exports `storage_path`'s new records into `history` every `interval_s` seconds (0: only when asked)."""

    def __init__(self, storage_path: str, history: str, interval_s: float = 60.0,
                 step_records: int = DEFAULT_STEP_RECORDS) -> None:
        self.storage_path = storage_path
        self.history = history
        self.interval_s = interval_s
        self.step_records = step_records
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._status: dict[str, Any] = {"runs": 0, "rows": 0, "failures": 0, "last_error": None,
                                        "last_run_ms": None, "last_rows": 0}
        if interval_s > 0:
            threading.Thread(target=self._loop, name="history export", daemon=True).start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.export_now()
            except Exception:  # logged and counted in export_now; the next tick tries again
                pass

    def export_now(self) -> dict[str, Any]:
        """Run one export now (after any run in progress); returns the status afterwards."""
        with self._lock:
            try:
                result = export_history(self.storage_path, self.history, step_records=self.step_records)
            except Exception as e:
                self._status["failures"] += 1
                self._status["last_error"] = f"{type(e).__name__}: {e}"
                log.exception("history export of %s into %s failed", self.storage_path, self.history)
                raise
            self._status["runs"] += 1
            self._status["rows"] += result.total_rows
            self._status["last_rows"] = result.total_rows
            self._status["last_run_ms"] = time.time_ns() // 1_000_000
            self._status["last_error"] = None
            return dict(self._status)

    def status(self) -> dict[str, Any]:
        """Runs, rows exported, failures and the last error, and where it exports from and to."""
        return dict(self._status) | {"storage_path": self.storage_path, "history": self.history,
                                     "interval_s": self.interval_s}

    def stop(self) -> None:
        """Stop the schedule (a run in progress finishes)."""
        self._stop.set()


def start_exporter(storage_path: str, history: str, *, interval_s: float = 60.0, namespace: str | None = None,
                   step_records: int = DEFAULT_STEP_RECORDS) -> Any:
    """Start (or find) the detached exporter actor of `namespace`; returns its handle."""
    return HistoryExporter.options(name=EXPORTER_NAME, namespace=namespace, lifetime="detached",
                                   get_if_exists=True).remote(storage_path, history, interval_s, step_records)


def stop_exporter(namespace: str | None = None, timeout_s: float = 30.0) -> bool:
    """Stop and remove the exporter actor of `namespace`; False if none runs. Returns once Ray has released its
    name, so that a start_exporter right after makes a new exporter rather than finding the dying one."""
    try:
        actor = ray.get_actor(EXPORTER_NAME, namespace=namespace)
    except ValueError:
        return False
    # A run cut short here is harmless: the next export finishes or undoes it from the checkpoint.
    ray.kill(actor, no_restart=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(EXPORTER_NAME, namespace=namespace)
        except ValueError:
            return True
        time.sleep(0.05)
    raise TimeoutError(f"the exporter of namespace {namespace!r} was killed, but Ray had not released its name "
                       f"after {timeout_s:g} s")
