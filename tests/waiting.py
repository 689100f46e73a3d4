"""Polling with a deadline, for tests that wait on Ray actors (never a fixed sleep for a timeout)."""

from __future__ import annotations

import os
import select
import time
from typing import Any, Callable

import ray

# Errors of an actor that is restarting or of a call that timed out: polled through, not failed on.
RETRIED = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, ray.exceptions.GetTimeoutError)


def wait_for(
    condition: Callable[[], Any],
    timeout_s: float = 60.0,
    what: str = "condition",
    interval_s: float = 0.05,
    details: Callable[[], str] = lambda: "",
) -> Any:
    """Poll `condition` until it returns something truthy; AssertionError naming `what` (and `details()`) after
    `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except RETRIED as e:
            last = e
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what} (last error: {last!r}) {details()}")


def wait_for_exit(pid: int, timeout_s: float) -> bool:
    """Whether process `pid` (not necessarily our child) has ended within `timeout_s`: woken by the kernel through
    a pidfd (Linux), not by polling."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout_s)
        return bool(readable)
    finally:
        os.close(fd)
