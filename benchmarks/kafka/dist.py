"""Where Kafka 4.4's jars live, and fetching them once: `make kafka-jars` or `ensure_jars()`.

The jars (the broker, kafka_2.13, and the command-line tools, kafka-tools, with their dependencies,
about 90 files and 60 MB) come from Maven Central through `mvn dependency:copy-dependencies` over
`benchmarks/kafka/pom.xml`, into `$GROUPCOORD_CACHE/kafka-<version>/libs` (by default
`~/.cache/groupcoord`). Later calls find them there and download nothing.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
from pathlib import Path

logger = logging.getLogger(__name__)

KAFKA_VERSION = "4.4.0"
POM = Path(__file__).with_name("pom.xml")


class KafkaJarsUnavailable(RuntimeError):
    """Kafka's jars are not in the cache and could not be fetched (no Maven, or Maven failed)."""


def cache_root() -> Path:
    """The cache folder of groupcoord's downloads (`GROUPCOORD_CACHE`, else ~/.cache/groupcoord)."""
    return Path(os.environ.get("GROUPCOORD_CACHE", Path.home() / ".cache" / "groupcoord"))


def jars_dir(version: str = KAFKA_VERSION) -> Path:
    """The folder that holds Kafka's jars once fetched."""
    return cache_root() / f"kafka-{version}" / "libs"


def ensure_jars(version: str = KAFKA_VERSION) -> Path:
    """Return the folder of Kafka's jars, fetching them with Maven the first time.

    Processes that ask at once (two test workers, a benchmark beside the tests) fetch once: the others wait on a
    lock file beside the jars and then find them.
    """
    libs = jars_dir(version)
    marker = libs / ".complete"
    if marker.exists():
        return libs
    libs.parent.mkdir(parents=True, exist_ok=True)
    with open(libs.with_name("libs.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            _fetch(version, libs)
            marker.touch()
    return libs


def _fetch(version: str, libs: Path) -> None:
    """Copy Kafka's runtime jars from Maven into `libs` (through a partial folder, renamed when complete)."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaJarsUnavailable("Kafka's jars are not cached and `mvn` is not on PATH: install Maven")
    partial = libs.with_name("libs.partial")
    shutil.rmtree(partial, ignore_errors=True)
    logger.info("fetching Apache Kafka %s's jars from Maven Central into %s", version, libs)
    cmd = [mvn, "-q", "-B", "-f", str(POM), f"-Dkafka.version={version}", "dependency:copy-dependencies",
           f"-DoutputDirectory={partial}", "-DincludeScope=runtime"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise KafkaJarsUnavailable(f"mvn failed ({done.returncode}): {(done.stdout + done.stderr)[-2000:]}")
    shutil.rmtree(libs, ignore_errors=True)
    partial.rename(libs)


def classpath(version: str = KAFKA_VERSION) -> str:
    """A Java class path of every Kafka jar (fetched first if needed)."""
    return str(ensure_jars(version) / "*")


if __name__ == "__main__":
    print(ensure_jars())
