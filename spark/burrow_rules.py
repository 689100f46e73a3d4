"""Burrow's consumer-status rules, without Spark: shared by burrow.py (Spark) and pandas_reports.py.

Burrow (linkedin/Burrow, core/internal/evaluator/caching.go, as of its current release) looks at
a window of the last N commits of a partition (default 10), each stored with its lag at commit
time, plus the current lag and the recent log-end offsets, and decides, in this order:

* current lag at most `allowed_lag` (0 by default, Burrow's allowed-lag setting): OK;
* STOP: (now - last commit time) > (last - first commit time of the window), unless some recent
  end offset (the last N samples) is at or below the last committed offset;
* REWIND: an offset is below the one before it, and no later commit of the window is back at or
  past that earlier offset (a rewind the consumer has caught up from is forgiven);
* then, only if no commit of the window had a lag of at most `allowed_lag`: STALL if the offset
  never changes, WARN if the lag never decreases;
* otherwise OK.

A partition whose window is filled less than `min_complete` (Burrow's minimum-complete) is OK.
A group takes its worst partition's status, STOP, STALL and REWIND becoming ERR; a group that
is asked for and has no committed offset is NOTFOUND, as Burrow answers for a group it does not
know. Partitions of topics that no longer exist are left out, as Burrow drops them when a topic
is deleted.

Here a commit's lag is the end offset last reported at or before its commit time minus its
offset (at least 0; null when no end offset was reported before it). Where a partition has no
end offsets at all, the current lag is unknown and taken as above `allowed_lag`, so STOP, REWIND
and STALL are judged on commit progress alone; WARN needs at least two commits with a known lag
(Burrow only keeps commits once it knows the broker offset, so its windows always have them). A
key whose latest record is a tombstone has no committed offset and is left out.
"""

from __future__ import annotations

import itertools
import logging
from typing import Sequence

log = logging.getLogger(__name__)

# Burrow's StatusConstant order: a larger value is worse.
SEVERITY = {"NOTFOUND": 0, "OK": 1, "WARN": 2, "ERR": 3, "STOP": 4, "STALL": 5, "REWIND": 6}


def group_status_of(worst_severity: int) -> str:
    """A group's status from the worst severity of its partitions (STOP, STALL, REWIND become ERR)."""
    if worst_severity >= SEVERITY["ERR"]:
        return "ERR"
    return "WARN" if worst_severity == SEVERITY["WARN"] else "OK"


def check_status_options(window: int, allowed_lag: int) -> None:
    """Raise ValueError for a window of fewer than one commit or a negative allowed lag."""
    if window < 1:
        raise ValueError(f"window must be at least 1, not {window}")
    if allowed_lag < 0:
        raise ValueError(f"allowed_lag must be at least 0, not {allowed_lag}")


def rewind_unrecovered(offsets: Sequence[int]) -> bool:
    """Whether the offsets go back somewhere and never return to the offset they went back from."""
    for i in range(1, len(offsets)):
        if offsets[i] < offsets[i - 1]:
            return not any(o >= offsets[i - 1] for o in offsets[i:])
    return False


def evaluate(offsets: Sequence[int], timestamps: Sequence[int], lags: Sequence[int | None],
             current_lag: int | None, recent_end_offsets: Sequence[int], now_ms: int, *,
             allowed_lag: int = 0) -> str:
    """Burrow's status of one partition's window of commits (oldest first), by the rules above."""
    if current_lag is not None and current_lag <= allowed_lag:
        return "OK"
    last = offsets[-1]
    stopped = (now_ms - timestamps[-1]) > (timestamps[-1] - timestamps[0])
    if stopped and not any(end <= last for end in recent_end_offsets):
        return "STOP"
    if rewind_unrecovered(offsets):
        return "REWIND"
    if any(lag is not None and lag <= allowed_lag for lag in lags):
        return "OK"
    if all(o == offsets[0] for o in offsets):
        return "STALL"
    known = [lag for lag in lags if lag is not None]
    if len(known) >= 2 and all(b >= a for a, b in itertools.pairwise(known)):
        return "WARN"
    return "OK"
