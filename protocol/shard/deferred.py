"""A response that completes later, once the records behind it are durable."""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

T = TypeVar("T")

_UNSET = object()


class NotDoneError(RuntimeError):
    """result() was called on a Deferred that has not completed."""


class Deferred(Generic[T]):
    """A single-assignment result with completion callbacks (no threads, no event loop)."""

    __slots__ = ("_callbacks", "_value")

    def __init__(self) -> None:
        self._value: object = _UNSET
        self._callbacks: list[Callable[[T], None]] | None = None  # made by the first add_callback

    @classmethod
    def completed(cls, value: T) -> "Deferred[T]":
        """A Deferred that is already done with `value`."""
        d: Deferred[T] = cls()
        d._value = value
        return d

    def done(self) -> bool:
        """Whether the result is set."""
        return self._value is not _UNSET

    def result(self) -> T:
        """The result; raises NotDoneError if the Deferred has not completed yet."""
        if self._value is _UNSET:
            raise NotDoneError("the response is not complete yet (its records are not durable)")
        return self._value  # type: ignore[return-value]  # not _UNSET, so a T (mypy cannot narrow a sentinel)

    def complete(self, value: T) -> None:
        """Set the result and run the callbacks; a second completion is a bug."""
        if self._value is not _UNSET:
            raise RuntimeError("Deferred completed twice")
        self._value = value
        callbacks, self._callbacks = self._callbacks, None
        for cb in callbacks or ():
            cb(value)

    def add_callback(self, cb: Callable[[T], None]) -> None:
        """Call `cb(result)` on completion (at once if already done)."""
        if self._value is _UNSET:
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append(cb)
        else:
            cb(self._value)  # type: ignore[arg-type]  # done, so a T (as in result)
