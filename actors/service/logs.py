"""Structured logs of the service: every line carries its partition, and its group and member where there is one.

A partition actor (one per process) installs one handler on the `groupcoord` logger: a filter
adds the partition to every record (and empty group/member fields where the call gave none, via
logging's `extra`), another rate-limits repeated lines, and the formatter writes either text
(`key=value` context after the level) or JSON lines. Ray sends the process's stderr to its
worker log files (and to the driver when it forwards logs).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

LOG_FORMATS = ("text", "json")
ROOT_LOGGER = "groupcoord"

# Per-request lines (the same message template, or the same `rate_key`) pass at most BURST times
# per window; the next one that passes says how many were suppressed. ERROR and worse always pass.
RATE_LIMIT_BURST = 10
RATE_LIMIT_WINDOW_S = 10.0

_CONTEXT_FIELDS = ("partition", "group", "member")
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [partition=%(partition)s%(group_ctx)s%(member_ctx)s] %(message)s"


def log_context(group: str | None = None, member: str | None = None, **more: Any) -> dict[str, Any]:
    """The `extra` of a log call about a group (and member): `log.info(..., extra=log_context(g, m))`."""
    return {"group": group, "member": member, **more}


class ContextFilter(logging.Filter):
    """Adds the process's partition to every record, and empty group/member fields where a call set none."""

    def __init__(self, partition: int | None) -> None:
        super().__init__()
        self.partition = partition

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "partition", None) is None:
            record.partition = self.partition
        for name in ("group", "member"):
            if not hasattr(record, name):
                setattr(record, name, None)
        record.group_ctx = "" if record.group is None else f" group={record.group}"
        record.member_ctx = "" if record.member is None else f" member={record.member}"
        return True


class RateLimitFilter(logging.Filter):
    """Lets at most `burst` records with the same key through per `window_s`; counts the rest.

    The key is the record's `rate_key` extra if it has one, else its logger and message template,
    so a line logged per request cannot flood the logs. ERROR and CRITICAL are never limited.
    """

    def __init__(self, burst: int = RATE_LIMIT_BURST, window_s: float = RATE_LIMIT_WINDOW_S,
                 clock: Any = time.monotonic) -> None:
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self.clock = clock
        self._windows: dict[Any, list] = {}  # key -> [window start, passed, suppressed]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        key = getattr(record, "rate_key", None) or (record.name, record.msg)
        now = self.clock()
        window = self._windows.get(key)
        if window is None or now - window[0] >= self.window_s:
            suppressed = window[2] if window is not None else 0
            self._windows[key] = [now, 1, 0]
            if len(self._windows) > 10_000:
                self._windows = {k: w for k, w in self._windows.items() if now - w[0] < self.window_s}
            if suppressed:
                record.suppressed = suppressed
                record.msg = f"{record.msg} (and {suppressed} similar lines suppressed)"
            return True
        if window[1] < self.burst:
            window[1] += 1
            return True
        window[2] += 1
        return False


class JsonLineFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, partition, group, member and any other extras."""

    _STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "group_ctx", "member_ctx"}

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _CONTEXT_FIELDS:
            doc[name] = getattr(record, name, None)
        for name, value in vars(record).items():
            if name not in self._STANDARD and name not in doc and name != "rate_key":
                doc[name] = value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def make_handler(partition: int | None, fmt: str = "text", stream: Any = None) -> logging.Handler:
    """A handler writing the service's log lines with their context, rate-limited, as text or JSON lines."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {LOG_FORMATS}, not {fmt!r}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.addFilter(ContextFilter(partition))
    handler.addFilter(RateLimitFilter())
    handler.setFormatter(JsonLineFormatter() if fmt == "json" else logging.Formatter(_TEXT_FORMAT))
    handler.set_name("groupcoord-structured")
    return handler


def configure_service_logging(partition: int | None, fmt: str = "text", level: str | int = "INFO") -> logging.Logger:
    """Send this process's `groupcoord` log lines through one structured handler (replacing an earlier one)."""
    root = logging.getLogger(ROOT_LOGGER)
    for old in [h for h in root.handlers if h.get_name() == "groupcoord-structured"]:
        root.removeHandler(old)
    root.addHandler(make_handler(partition, fmt))
    root.setLevel(level)
    root.propagate = False  # Ray's own handler would print every line a second time, without context
    return root
