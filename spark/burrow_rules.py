"""Burrow's consumer-status rules, without Spark: shared by burrow.py (Spark) and pandas_reports.py.

Burrow (linkedin/Burrow, core/internal/evaluator/caching.go) looks at a window of the last N
commits of a partition (default 10), each stored with its lag at commit time, plus the current
lag and the recent log-end offsets, and decides, in this order:

* current lag at most `allowed_lag` (0 by default, Burrow's allowed-lag setting): OK;
* STOP: (now - last commit time) > (last - first commit time of the window), unless some recent
  end offset (the last N samples) is at or below the last committed offset;
* then, only if no commit of the window had a lag of at most `allowed_lag`: REWIND if an offset
  ever decreases in the window, STALL if the offset never changes, WARN if the lag never
  decreases;
* otherwise OK.

A partition whose window is filled less than `min_complete` (Burrow's minimum-complete) is OK.
A group takes its worst partition's status, STOP, STALL and REWIND becoming ERR.

Here a commit's lag is the end offset last reported at or before its commit time minus its
offset (at least 0; null when no end offset was reported before it). Where a partition has no
end offsets at all, the current lag is unknown and taken as above `allowed_lag`, so STOP, REWIND
and STALL are judged on commit progress alone; WARN needs at least two commits with a known lag
(Burrow only keeps commits once it knows the broker offset, so its windows always have them). A
key whose latest record is a tombstone has no committed offset and is left out.

One difference from Burrow's current evaluator is kept from the first version: Burrow now judges
REWIND before the lag test (and forgives a rewind once the consumer is back at the offset it
rewound from), while here REWIND, like STALL and WARN, needs a window without a small lag.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

# Burrow's StatusConstant order: a larger value is worse.
SEVERITY = {"OK": 1, "WARN": 2, "ERR": 3, "STOP": 4, "STALL": 5, "REWIND": 6}


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
