"""Session resources (a JVM) closed once the last collected test that uses their fixture has run.

An idle Kafka broker or Spark takes CPU from every test after it, so waiting for the end of the
session costs the rest of the suite; tests/conftest.py calls these from pytest's hooks.
"""

from __future__ import annotations

from typing import Any, Callable

_LAST_USE: dict[str, str] = {}  # fixture name -> node id of the last test whose fixture closure holds it
_RELEASE: dict[str, Callable[[], None]] = {}


def note_users(items: list[Any]) -> None:
    """Remember, for every fixture, the last collected test that uses it."""
    for item in items:
        for name in getattr(item, "fixturenames", ()):
            _LAST_USE[name] = item.nodeid


def release_after_last_use(fixture_name: str, close: Callable[[], None]) -> None:
    """Have `close` called after the teardown of the last collected test that uses `fixture_name`; it must be
    idempotent, since the fixture's own teardown runs it again."""
    _RELEASE[fixture_name] = close


def release_unused(item: Any) -> None:
    """Close the resources whose last user `item` was."""
    for name, close in list(_RELEASE.items()):
        if _LAST_USE.get(name) == item.nodeid:
            del _RELEASE[name]
            close()
