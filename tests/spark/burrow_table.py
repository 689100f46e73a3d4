"""The rows of Burrow's evaluator test table (core/internal/evaluator/caching_test.go, current release).

Each row: (offsets, commit times in ms, lags at commit time (None: unknown), current lag, recent
broker end offsets, now in ms, allowed lag, Burrow's status). Burrow's timeNow is in seconds.
"""

from __future__ import annotations

_STEPS = [100_000, 200_000, 300_000, 400_000, 500_000]
_RUN = [792748079 + i for i in range(15)]
_RUN_TIMES = [1512224618356, 1512224619362, 1512224620366, 1512224621367, 1512224622370, 1512224623373,
              1512224624378, 1512224625379, 1512224626383, 1512224627383, 1512224628383, 1512224629388,
              1512224630391, 1512224631394, 1512224632397]

ROWS = [
    # 0: zero lag somewhere: OK
    ([1000, 2000, 3000, 4000, 5000], _STEPS, [0, 50, 100, 150, 200], 200, [5200], 600_000, 0, "OK"),
    # 1: time since the last commit equals the window's span, not more: OK
    ([1000, 2000, 3000, 4000, 5000], _STEPS, [0, 50, 100, 150, 200], 200, [5200], 900_000, 0, "OK"),
    # 2: stopped even though the lag was zero at the start
    ([1000, 2000, 3000, 4000, 5000], _STEPS, [0, 50, 100, 150, 200], 200, [5200], 1_000_000, 0, "STOP"),
    # 3: stopped with a lag that is never zero
    ([1000, 2000, 3000, 4000, 5000], _STEPS, [50, 100, 150, 200, 250], 250, [5250], 1_000_000, 0, "STOP"),
    # 4: the offset never moves, but the lag was zero once: OK
    ([1000] * 5, _STEPS, [0, 50, 100, 150, 200], 200, [1200], 600_000, 0, "OK"),
    # 5: the offset never moves and the lag is never zero: STALL
    ([1000] * 5, _STEPS, [100, 150, 200, 250, 300], 300, [1300], 600_000, 0, "STALL"),
    # 6: STALL also when the lag stays the same
    ([1000] * 5, _STEPS, [100] * 5, 100, [1100], 600_000, 0, "STALL"),
    # 7: a rewind the consumer caught up from within the window: OK
    ([1000, 2000, 3000, 2000, 4000], _STEPS, [100, 150, 200, 1250, 300], 300, [4300], 600_000, 0, "OK"),
    # 8: current lag zero: OK even though the timestamps say stopped
    ([1000, 2000, 3000, 4000, 5000], _STEPS, [50, 100, 150, 200, 250], 0, [5250], 1_000_000, 0, "OK"),
    # 9: current lag and no commit for long enough: STOP although every window lag was zero
    (_RUN, _RUN_TIMES, [0] * 15, 931, [792749024, 792749000, 792748800, 792748600, 792748500],
     1512224650_000, 0, "STOP"),
    # 10: as 9, but a recent broker offset is at the committed offset: OK
    (_RUN, _RUN_TIMES, [0] * 15, 1, [792748094, 792748093, 792748093, 792748093], 1512224650_000, 0, "OK"),
    # 11: as 0 with unknown lags in between: OK
    ([1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000, 5500],
     [100_000 + 50_000 * i for i in range(10)], [0, None, 50, None, 100, None, 150, None, 200, None], 200, [5700],
     600_000, 0, "OK"),
    # 12: a current lag within the allowed lag: OK although stopped
    ([1000, 2000, 2000], [100_000, 200_000, 300_000], [2, 1, 1], 1, [2001], 550_000, 1, "OK"),
    # 13: as 5 with an allowed lag below every lag: still STALL
    ([1000] * 5, _STEPS, [100, 150, 200, 250, 300], 300, [1300], 600_000, 99, "STALL"),
    # 14: as 7 with an allowed lag: OK
    ([1000, 2000, 3000, 2000, 4000], _STEPS, [100, 150, 200, 1250, 300], 300, [4300], 600_000, 99, "OK"),
    # 15: a rewind the consumer has not caught up from: REWIND
    ([1000, 2000, 3000, 2000, 2500], _STEPS, [100, 150, 200, 1250, 300], 300, [4300], 600_000, 0, "REWIND"),
]
