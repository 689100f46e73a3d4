"""The scheduled history export: a detached Ray actor that runs the export on its own, and on demand."""

from __future__ import annotations

from waiting import wait_for

from groupcoord.actors.tools.history_exporter import start_exporter, stop_exporter
from groupcoord.protocol.records import OffsetCommitKey, OffsetCommitValue, Record
from groupcoord.spark.history_read import history_tables
from groupcoord.storage import StorageRoot

T0 = 1_700_000_000_000


def _append(storage: StorageRoot, first: int, count: int) -> None:
    with storage.open_partition(0, sync="never", clock=lambda: T0 + first) as log:
        log.append([Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(first + i, 1, "", T0 + first + i, -1))
                    for i in range(count)])


def test_the_exporter_actor_exports_on_its_schedule_and_on_demand(ray_local, tmp_path):
    storage = StorageRoot(tmp_path / "storage", 1)
    history = str(tmp_path / "history")
    _append(storage, 0, 10)
    exporter = start_exporter(str(storage.path), history, interval_s=0.2, namespace="history-exporter-test")
    try:
        assert ray_local.get(exporter.export_now.remote())["runs"] >= 1
        _append(storage, 10, 5)
        # The schedule alone picks up the new records.
        wait_for(lambda: ray_local.get(exporter.status.remote())["rows"] == 15, what="the scheduled export")
        commits, _ = history_tables(history)
        assert sorted(commits["offset"].to_pylist()) == list(range(15))
        assert ray_local.get(exporter.status.remote())["failures"] == 0
    finally:
        assert stop_exporter("history-exporter-test")
    assert not stop_exporter("history-exporter-test")
