"""Quiet by default: the tools print their own output, while Ray's and the JVM's logs go to their log files.

`groupcoord -v ...` brings Ray's INFO lines, its workers' output and Spark's default logging back.
"""

from __future__ import annotations

import logging
import os
from contextlib import nullcontext
from typing import Any

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_verbose = False


def configure_output(verbose: bool) -> None:
    """Set this process's logging and the environment Ray and Spark start with, before either starts."""
    global _verbose
    _verbose = verbose
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format=_FORMAT)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not verbose:
        # Ray's C++ core logs INFO lines to stderr in every process that loads it (the Spark driver JVM too).
        os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "warning")
        for noisy in ("ray", "py4j", "raydp"):
            logging.getLogger(noisy).setLevel(logging.ERROR)


def is_verbose() -> bool:
    """Whether `-v` was given (configure_output's setting)."""
    return _verbose


def ray_init_options(verbose: bool | None = None) -> dict[str, Any]:
    """ray.init keywords: Ray's own log level, and whether the cluster's worker output is echoed here."""
    verbose = _verbose if verbose is None else verbose
    return {"logging_level": logging.INFO if verbose else logging.ERROR, "log_to_driver": verbose}


def init_ray(**kwargs: Any) -> None:
    """ray.init with the quiet options; Ray's C++ start-up lines go to the log file unless `-v`."""
    import ray

    # Here, not at the top: importing groupcoord.spark loads pandas and pyarrow (about a second of CPU),
    # which a command that never starts Ray should not pay for.
    from groupcoord.spark.quiet import stderr_to_file

    with nullcontext() if _verbose else stderr_to_file():
        ray.init(**ray_init_options(), **kwargs)


def ensure_ray(address: str | None, namespace: str | None = None) -> None:
    """Connect to the Ray cluster at `address` (or the one running here, or a new local one), quietly.

    With address "local", a Ray of this command's own that ends with it: started without the dashboard,
    whose head and agent processes would take CPU from the command's own work and serve nobody.
    """
    import ray

    if not ray.is_initialized():
        private = {"include_dashboard": False} if address == "local" else {}
        init_ray(address=address, namespace=namespace, **private)
