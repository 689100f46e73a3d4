"""A deterministic asyncio event loop on a simulated clock: one per simulated process, stepped by the simulator.

It never blocks and never reads the machine's clock: `time()` is the simulation's, `select` returns at once,
and `run_in_executor` runs the function (the real storage code) inline after a simulated I/O delay instead
of in a thread. The simulator asks each loop when it next has work and steps the ones that do.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
import sys
import threading
from asyncio import base_events, events, format_helpers
from typing import Any, Callable, Iterator


class _Running:
    """The simulated process whose loop runs now: asyncio's running-loop slot, kept in Python.

    CPython's C accelerator checks os.getpid() at every get_running_loop() (to tell a forked child) and at every
    _set_running_loop(); on this machine a getpid costs microseconds, thousands of times a schedule. Within
    `simulated_running_loops` the Python-level getters read this slot, and the C slot is set only when another
    process's loop starts running (C code that looks it up, such as current_task(), still sees the right loop).
    """

    loop: SimLoop | None = None
    thread: int | None = None  # the simulator's thread: any other (a Ray client's, say) asks asyncio's own slot


_C_SET_RUNNING_LOOP = events._set_running_loop
_C_GET_RUNNING_LOOP = events._get_running_loop


def _get_running_loop() -> Any:
    if threading.get_ident() != _Running.thread:
        return _C_GET_RUNNING_LOOP()
    return _Running.loop


def _get_running_loop_or_raise() -> Any:
    loop = _get_running_loop()
    if loop is None:
        raise RuntimeError("no running event loop")
    return loop


def _switch_to(loop: SimLoop | None) -> None:
    if _Running.loop is not loop:
        _Running.loop = loop
        _C_SET_RUNNING_LOOP(loop)


@contextlib.contextmanager
def simulated_running_loops() -> Iterator[None]:
    """For one schedule: asyncio's running-loop getters read _Running; no loop runs before or after."""
    modules = (events, asyncio)
    saved = [(m, m.get_running_loop, m._get_running_loop) for m in modules]  # type: ignore[attr-defined]
    for m in modules:
        m.get_running_loop, m._get_running_loop = _get_running_loop_or_raise, _get_running_loop  # type: ignore
    _switch_to(None)
    _Running.thread = threading.get_ident()
    try:
        yield
    finally:
        _switch_to(None)
        _Running.thread = None
        for m, get, get_or_none in saved:
            m.get_running_loop, m._get_running_loop = get, get_or_none  # type: ignore[attr-defined]


_Handle, _TimerHandle = events.Handle, events.TimerHandle


class _NoSelector:
    """A selector with nothing to select: a simulated process does no real I/O on its loop."""

    def select(self, timeout: float | None) -> list:
        return []

    def close(self) -> None:
        pass

    def get_map(self) -> dict:
        return {}


class SimLoop(asyncio.BaseEventLoop):
    """An event loop whose time is `clock()` and whose executor is inline (see the module docstring)."""

    def __init__(self, clock: Callable[[], float], io_delay: Callable[[], float]) -> None:
        super().__init__()
        self._selector = _NoSelector()
        self._sim_clock = clock
        self._io_delay = io_delay
        self.blocked = 0.0  # how long the running executor job waits on the network (SimTransport.wait)
        # A dropped loop (its process crashed) leaves pending tasks behind, as a killed process would.
        self.set_exception_handler(lambda loop, context: None)

    def __del__(self) -> None:
        pass  # a dropped loop (a crashed process) is never closed: its coroutines end as garbage, as a process's do

    def time(self) -> float:
        return self._sim_clock()

    def _process_events(self, event_list: list) -> None:
        pass

    def _write_to_self(self) -> None:
        pass

    def run_in_executor(self, executor: Any, func: Callable, *args: Any) -> asyncio.Future:
        future = self.create_future()

        def run() -> None:
            if future.cancelled():
                return
            self.blocked = 0.0
            try:
                result = func(*args)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as e:  # handed to the awaiting coroutine, as a thread's exception would be
                self._finish(future, self.blocked, None, e)
            else:
                self._finish(future, self.blocked, result, None)

        self.call_later(self._io_delay(), run)
        return future

    def _finish(self, future: asyncio.Future, after: float, result: Any, error: BaseException | None) -> None:
        """Complete an executor job's future, `after` the time its thread spent blocked waiting on the network."""
        def complete() -> None:
            if future.cancelled():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        if after > 0:
            self.call_later(after, complete)
        else:
            complete()

    def _run_once(self) -> None:
        """BaseEventLoop._run_once without what a simulated loop never needs (polling a selector, debug timing):
        the same handles run in the same order, with less work per step."""
        if self._debug:
            super()._run_once()
            return
        scheduled = self._scheduled
        count = len(scheduled)
        if count > base_events._MIN_SCHEDULED_TIMER_HANDLES and \
                self._timer_cancelled_count / count > base_events._MIN_CANCELLED_TIMER_HANDLES_FRACTION:
            super()._run_once()  # the rare clean-up of many cancelled timers: asyncio's own code, as it is
            return
        heappop = heapq.heappop
        while scheduled and scheduled[0]._cancelled:
            self._timer_cancelled_count -= 1
            heappop(scheduled)._scheduled = False
        ready = self._ready
        end_time = self._sim_clock() + self._clock_resolution
        while scheduled and scheduled[0]._when < end_time:
            handle = heappop(scheduled)
            handle._scheduled = False
            ready.append(handle)
        popleft = ready.popleft
        for _ in range(len(ready)):
            handle = popleft()
            if handle._cancelled:
                continue
            # Handle._run, without its frame (a step's callbacks are most of the simulator's calls)
            try:
                handle._context.run(handle._callback, *handle._args)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException:
                self._handle_failed(handle)

    def _handle_failed(self, handle: Any) -> None:
        """What Handle._run does with a callback's exception: hand it to the exception handler."""
        exc = sys.exc_info()[1]
        cb = format_helpers._format_callback_source(handle._callback, handle._args)
        context = {"message": f"Exception in callback {cb}", "exception": exc, "handle": handle}
        if handle._source_traceback:
            context["source_traceback"] = handle._source_traceback
        self.call_exception_handler(context)

    # call_soon, call_later and call_at as BaseEventLoop has them, without the checks for debug mode (then they
    # are asyncio's own) and the extra call of each: every task step, future callback and timer comes through here.

    def call_soon(self, callback: Callable, *args: Any, context: Any = None) -> asyncio.Handle:
        if self._debug or self._closed:
            return super().call_soon(callback, *args, context=context)
        handle = _Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle

    def call_later(self, delay: float, callback: Callable, *args: Any, context: Any = None) -> asyncio.TimerHandle:
        if self._debug or self._closed or delay is None:
            return super().call_later(delay, callback, *args, context=context)
        timer = _TimerHandle(self._sim_clock() + delay, callback, args, self, context)
        heapq.heappush(self._scheduled, timer)
        timer._scheduled = True
        return timer

    def call_at(self, when: float, callback: Callable, *args: Any, context: Any = None) -> asyncio.TimerHandle:
        if self._debug or self._closed or when is None:
            return super().call_at(when, callback, *args, context=context)
        timer = _TimerHandle(when, callback, args, self, context)
        heapq.heappush(self._scheduled, timer)
        timer._scheduled = True
        return timer

    def next_time(self) -> float:
        """When this loop next has something to run (now if callbacks are ready; inf if nothing is pending)."""
        if self._ready:
            return self.time()
        while self._scheduled and self._scheduled[0]._cancelled:
            self._timer_cancelled_count -= 1
            self._scheduled[0]._scheduled = False
            heapq.heappop(self._scheduled)
        return self._scheduled[0]._when if self._scheduled else math.inf

    def step(self) -> None:
        """Run what is due now (one turn of the loop), as the running loop (it stays set after: the world's own
        code between steps never asks for a running loop; see _Running)."""
        if _Running.loop is not self:
            _switch_to(self)
        self._run_once()

    def enter(self) -> Any:
        """Make this the running loop (to construct an actor in it); returns the one to restore after."""
        previous = _Running.loop
        _switch_to(self)
        return previous

    @staticmethod
    def leave(previous: Any) -> None:
        """Restore the loop that ran before `enter`."""
        _switch_to(previous)
