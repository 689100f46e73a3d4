"""Ending an actor's process on purpose so that Ray restarts it from what is on disk: the one place that exits."""

from __future__ import annotations

import logging
import os
from typing import NoReturn

log = logging.getLogger(__name__)

# BSD sysexits: EX_SOFTWARE, an internal failure (broken storage, a supervised loop that cannot go on).
EXIT_FAILURE = 70
# EX_TEMPFAIL: a leader deposed by a newer epoch ends, to come back as a follower.
EXIT_DEPOSED = 75
# A crash asked for (fault tests and the demo).
EXIT_CRASH = 1


def exit_process(code: int, reason: str | None = None) -> NoReturn:
    """Log `reason` (if any), flush the logs and end this process at once with `code`: no cleanup runs, as in a
    crash, and Ray restarts the actor, which replays its log."""
    if reason is not None:
        log.critical("exiting with code %d: %s", code, reason)
    logging.shutdown()
    os._exit(code)
