"""Typed exceptions for Kafka error codes: every error a client sees is one of these, never a number."""

from __future__ import annotations

from groupcoord.protocol import Errors


class GroupCoordinatorError(Exception):
    """An error answered by the coordinator; `.error` is its Kafka code, `.retriable` says whether to retry."""

    error: Errors = Errors.UNKNOWN_SERVER_ERROR

    @property
    def retriable(self) -> bool:
        return self.error.retriable

    @property
    def code(self) -> int:
        return int(self.error)

    def __init__(self, message: str = "") -> None:
        name = self.error.name
        if not message:
            message = f"{name} ({int(self.error)})"
        elif name not in message:
            message = f"{message} ({name})"
        super().__init__(message)


def _class_name(error: Errors) -> str:
    return "".join(part.capitalize() for part in error.name.split("_")) + "Error"


ERROR_CLASSES: dict[Errors, type[GroupCoordinatorError]] = {}
for _e in Errors:
    if _e is Errors.NONE:
        continue
    _cls = type(
        _class_name(_e),
        (GroupCoordinatorError,),
        {"error": _e, "__doc__": f"Kafka error {_e.name} ({int(_e)}).", "__module__": __name__},
    )
    ERROR_CLASSES[_e] = _cls
    globals()[_cls.__name__] = _cls


class CommitFailedError(GroupCoordinatorError):
    """A commit failed because the group rebalanced; the partitions may now belong to another member."""

    error = Errors.REBALANCE_IN_PROGRESS

    def __init__(self, cause: Errors, message: str = "") -> None:
        self.error = cause
        super().__init__(
            message
            or (
                f"Commit cannot be completed since the group has already rebalanced and assigned the "
                f"partitions to another member ({cause.name}). Call poll() to rejoin, then commit again."
            )
        )

    @property
    def retriable(self) -> bool:
        return False


def error_for(error: Errors, message: str = "") -> GroupCoordinatorError:
    """The typed exception for `error`, with an optional message."""
    return ERROR_CLASSES[Errors(error)](message)


def raise_for(error: Errors, message: str = "") -> None:
    """Raise the typed exception for `error`, unless it is NONE."""
    if error != Errors.NONE:
        raise error_for(error, message)
