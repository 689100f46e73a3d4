"""Start and stop Spark inside the Ray cluster through RayDP (its executors are Ray actors).

The defaults fit one small machine (one executor with one core) and short analyses; pass more
executors, cores and memory for a cluster. Only one RayDP Spark session can run per driver process.
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

# JVM flags for short analyses of small data: C1 only (no C2 compiling hot code the analysis is done
# with before it pays off) and the serial collector (no GC threads fighting for the cores). They halve
# the CPU the three JVMs (RayDP's app master, the driver, the executor) spend to start and run two
# analyses of a small history: 105 s to 50 s on 2 cores. Long jobs over big data want the JVM's defaults.
QUICK_JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

# The JVMs RayDP starts and the Spark setting that carries each one's flags.
JAVA_OPTIONS_KEYS = (
    "spark.ray.raydp_app_master.extraJavaOptions",
    "spark.driver.extraJavaOptions",
    "spark.executor.extraJavaOptions",
)


@dataclass
class SparkOptions:
    """How to size the Spark application RayDP starts; `configs` are extra Spark settings.

    `java_options` are flags for every JVM of the application; None picks QUICK_JAVA_OPTIONS for a
    single one-core executor (the small default) and the JVM's own defaults for anything bigger.
    An *.extraJavaOptions in `configs` is added after them (a later flag wins).
    """

    app_name: str = DEFAULT_APP_NAME
    num_executors: int = 1
    executor_cores: int = 1
    executor_memory: str = "1G"
    shuffle_partitions: int | None = None
    log_level: str = "ERROR"
    quiet: bool = True  # the JVMs log to a file (see log4j2-quiet.properties), not the terminal
    log_file: str | None = None  # where the quiet JVMs log (default: quiet.default_log_file())
    configs: dict[str, str] = field(default_factory=dict)
    java_options: tuple[str, ...] | None = None  # every JVM's flags (None: chosen by size, see above)

    def jvm_flags(self) -> tuple[str, ...]:
        """The flags every JVM starts with: `java_options`, or the choice for this size if None."""
        if self.java_options is not None:
            return tuple(self.java_options)
        return QUICK_JAVA_OPTIONS if self.num_executors * self.executor_cores == 1 else ()

    def spark_configs(self) -> dict[str, str]:
        """The Spark settings to start with: quiet, no UI, few shuffle partitions, the JVM flags, then `configs`."""
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
        java = {key: list(self.jvm_flags()) for key in JAVA_OPTIONS_KEYS}
        if self.quiet:
            # RayDP hands these to every JVM it starts as -Dlog4j2.configurationFile.
            conf["spark.log4j.config.file.name"] = QUIET_LOG4J2_CONFIG
            conf["spark.ray.log4j.config.file.name"] = QUIET_LOG4J2_CONFIG
            log_file = self.log_file or default_log_file()
            java["spark.driver.extraJavaOptions"].append(f"-Dgroupcoord.spark.log={log_file}")
        for key, flags in java.items():
            flags.extend([self.configs[key]] if self.configs.get(key) else [])
            if flags:
                conf[key] = " ".join(flags)
        conf.update({k: v for k, v in self.configs.items() if k not in java})
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
