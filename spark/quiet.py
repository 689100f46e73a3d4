"""Keeping the logs of the processes Spark on Ray starts (the Spark driver JVM, Ray's core) off the terminal."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The log4j2 configuration RayDP's JVMs get in quiet mode: their log goes to a file, errors to stderr.
QUIET_LOG4J2_CONFIG = str(Path(__file__).with_name("log4j2-quiet.properties"))


def default_log_file() -> str:
    """Where the quiet Spark driver and Ray's core write what they would have printed on the terminal."""
    return os.path.join(tempfile.gettempdir(), f"groupcoord-spark-{os.getuid()}.log")


@contextmanager
def stderr_to_file(path: str | None = None) -> Iterator[str]:
    """Send this process's stderr (file descriptor 2) to `path` for the block; children started meanwhile keep it.

    A JVM or Ray's C++ core started inside the block writes its own log lines to the file for
    its whole life, while this process's stderr is restored when the block ends.
    """
    path = path or default_log_file()
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield path
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)
