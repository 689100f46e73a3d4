"""The one Spark session of the spark tests: RayDP on the suite's local Ray, started once, stopped after the last."""

from __future__ import annotations

import pytest
from session_resources import release_after_last_use

from groupcoord.spark import SparkOptions, start_spark, stop_spark


@pytest.fixture(scope="session")
def spark():
    """Spark on the shared local Ray (started here if no module started it yet), for every spark test module."""
    import ray

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                 namespace="groupcoord-tests")
    session = start_spark(SparkOptions(app_name="groupcoord-tests", executor_memory="512M"))
    release_after_last_use("spark", stop_spark)
    yield session
    stop_spark()
