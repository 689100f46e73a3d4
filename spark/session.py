"""Start and stop Spark inside the Ray cluster through RayDP (its executors are Ray actors).

The defaults fit one small machine (one executor with one core); pass more executors, cores
and memory for a cluster. Only one RayDP Spark session can run per driver process.
"""

from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Iterator

from .quiet import QUIET_LOG4J2_CONFIG, default_log_file, stderr_to_file

log = logging.getLogger(__name__)

DEFAULT_APP_NAME = "groupcoord-analytics"


@dataclass
class SparkOptions:
    """How to size the Spark application RayDP starts; `configs` are extra Spark settings."""

    app_name: str = DEFAULT_APP_NAME
    num_executors: int = 1
    executor_cores: int = 1
    executor_memory: str = "1G"
    shuffle_partitions: int | None = None
    log_level: str = "ERROR"
    quiet: bool = True  # the JVMs log to a file (see log4j2-quiet.properties), not the terminal
    log_file: str | None = None  # where the quiet JVMs log (default: quiet.default_log_file())
    configs: dict[str, str] = field(default_factory=dict)

    def spark_configs(self) -> dict[str, str]:
        """The Spark settings to start with: quiet, no UI, few shuffle partitions, then `configs`."""
        cores = max(1, self.num_executors * self.executor_cores)
        shuffle = self.shuffle_partitions or max(2, 2 * cores)
        conf = {
            "spark.sql.shuffle.partitions": str(shuffle),
            "spark.default.parallelism": str(shuffle),
            "spark.sql.adaptive.enabled": "true",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.session.timeZone": "UTC",
        }
        if self.quiet:
            # RayDP hands these to every JVM it starts as -Dlog4j2.configurationFile.
            conf["spark.log4j.config.file.name"] = QUIET_LOG4J2_CONFIG
            conf["spark.ray.log4j.config.file.name"] = QUIET_LOG4J2_CONFIG
            conf["spark.driver.extraJavaOptions"] = f"-Dgroupcoord.spark.log={self.log_file or default_log_file()}"
        conf.update(self.configs)
        return conf


def ensure_ray(address: str | None = None, **init_kwargs: Any) -> None:
    """Connect to Ray (a cluster at `address`, or a local instance) unless already connected."""
    import ray

    if not ray.is_initialized():
        log.info("connecting to Ray at %s", address or "a new local instance")
        ray.init(address=address, **init_kwargs)


def start_spark(options: SparkOptions | None = None, *, ray_address: str | None = None) -> Any:
    """Start Spark on Ray with RayDP and return its SparkSession (takes about half a minute)."""
    import raydp

    options = options or SparkOptions()
    ensure_ray(ray_address)
    # Python workers (only needed by Python UDFs, which the reports avoid) use this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log.info(
        "starting Spark on Ray: %d executor(s) x %d core(s), %s each",
        options.num_executors, options.executor_cores, options.executor_memory,
    )
    # The Spark driver JVM inherits our stderr and loads Ray's core, which logs INFO lines there.
    with stderr_to_file(options.log_file) if options.quiet else nullcontext():
        spark = raydp.init_spark(
            options.app_name,
            num_executors=options.num_executors,
            executor_cores=options.executor_cores,
            executor_memory=options.executor_memory,
            configs=options.spark_configs(),
        )
    spark.sparkContext.setLogLevel(options.log_level)
    log.info("Spark %s is up (app %s)", spark.version, options.app_name)
    return spark


def stop_spark() -> None:
    """Stop the RayDP Spark session of this process, if any (its executor actors go away)."""
    import raydp

    from .blocks import release_all

    log.info("stopping Spark")
    try:
        raydp.stop_spark()
    finally:
        release_all()


@contextmanager
def spark_session(options: SparkOptions | None = None, *, ray_address: str | None = None) -> Iterator[Any]:
    """A SparkSession on Ray for the duration of a `with` block, stopped cleanly afterwards."""
    spark = start_spark(options, ray_address=ray_address)
    try:
        yield spark
    finally:
        stop_spark()
