"""Crash consistency of the partition log: a writer process SIGKILLed at random never loses an acknowledged record.

A child (rel_log_writer.py) appends deterministic records with sync "always" and reports each
durable offset after flush returns; it is killed by the parent at a random moment, or kills
itself inside an fsync or a compaction step. After every kill the log must open (recovery),
replay, decode, hold every acknowledged record (or more), hold exactly the record the writer
wrote at each offset, and (in append mode) have contiguous offsets; in compaction mode replay
must equal the latest-per-key state of everything up to the end. The next child continues
from the recovered log, so recovery of recovered logs is exercised too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rel_crash_runner import crash_run

ROUNDS = {"append": 16, "compact": 16}
KILL_P = 0.003  # per fsync (four times that per compaction step)
SEEDS = {"append": 1, "compact": 2}


@pytest.mark.parametrize("mode", ["append", "compact"])
def test_rel_sigkilled_writer_loses_no_acknowledged_record(tmp_path: Path, mode: str) -> None:
    """SIGKILL at random points of appends (and compactions): the reopened log holds the acked prefix or more."""
    figures = crash_run(tmp_path / "log", mode, ROUNDS[mode], seed=SEEDS[mode], kill_p=KILL_P)
    print(
        f"log crash ({mode}): {figures.kills} kills ({figures.self_kills} inside fsync/compaction), "
        f"highest acked offset {figures.acked}, final end {figures.ends[-1]}, "
        f"{figures.records_checked} records verified"
    )
    assert figures.acked > 0, "the writer never acknowledged anything"
