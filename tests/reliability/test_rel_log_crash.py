"""Crash consistency of the partition log: a writer process SIGKILLed at random never loses an acknowledged record.

A child (rel_log_writer.py) appends deterministic records with sync "always" and reports each
durable offset after flush returns; it is killed by the parent at a random moment, or kills
itself inside an fsync or a compaction step. After every kill the log must open (recovery),
replay, decode, hold every acknowledged record (or more), hold exactly the record the writer
wrote at each offset, and (in append mode) have contiguous offsets; in compaction mode replay
must equal the latest-per-key state of everything up to the end. In "compact-child" the cleaner
reads and rewrites in its child process, which must not outlive the killed writer. The next child continues
from the recovered log, so recovery of recovered logs is exercised too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rel_crash_runner import crash_run

ROUNDS = {"append": 16, "compact": 16, "compact-child": 10}
# the longest a writer runs before its kill: long enough for a cleaner process to start and finish
MAX_RUN_S = {"append": 0.4, "compact": 0.4, "compact-child": 2.5}
MAX_ROUNDS = 48  # more rounds only while too few of the faults below happened (a slow machine fsyncs less)
KILL_P = 0.003  # per fsync (four times that per compaction step)
SEEDS = {"append": 1, "compact": 2, "compact-child": 3}
# writers that died inside an fsync or a compaction step, not only between calls (in compact-child, fsyncs
# kill ten times less often, see rel_log_writer, and the kills that count are those while a cleaner runs)
MIN_SELF_KILLS = {"append": 3, "compact": 3, "compact-child": 0}
MIN_COMPACTIONS = {"append": 0, "compact": 3, "compact-child": 2}
MIN_KILLS_WHILE_CLEANING = {"append": 0, "compact": 0, "compact-child": 2}


@pytest.mark.parametrize("mode", ["append", "compact", "compact-child"])
def test_rel_sigkilled_writer_loses_no_acknowledged_record(tmp_path: Path, mode: str) -> None:
    """SIGKILL at random points of appends (and compactions): the reopened log holds the acked prefix or more."""
    figures = crash_run(tmp_path / "log", mode, ROUNDS[mode], seed=SEEDS[mode], max_run_s=MAX_RUN_S[mode],
                        kill_p=KILL_P, min_self_kills=MIN_SELF_KILLS[mode], min_compactions=MIN_COMPACTIONS[mode],
                        max_rounds=MAX_ROUNDS, min_kills_while_cleaning=MIN_KILLS_WHILE_CLEANING[mode])
    print(
        f"log crash ({mode}): {figures.kills} kills ({figures.self_kills} inside fsync/compaction), "
        f"{figures.compactions} compactions completed, {figures.kills_while_cleaning} kills while a cleaner ran, "
        f"highest acked offset {figures.acked}, "
        f"final end {figures.ends[-1]}, {figures.records_checked} records verified"
    )
    assert figures.acked > 0, "the writer never acknowledged anything"
    assert figures.kills >= ROUNDS[mode]
    assert figures.self_kills >= MIN_SELF_KILLS[mode], "too few kills landed inside an fsync or a compaction step"
    assert figures.compactions >= MIN_COMPACTIONS[mode], "the compaction thread completed too few compactions"
    assert figures.kills_while_cleaning >= MIN_KILLS_WHILE_CLEANING[mode], "too few kills landed while a cleaner ran"
