"""Hand Arrow data held in Ray's object store to Spark, and keep it alive while Spark may read it.

RayDP's JVM side reads blocks stored as Arrow IPC streams (Python `bytes`) straight from the
object store into a DataFrame, with no Python worker on the executors. Spark reads them again on
every action, so the blocks are pinned here until `release` or `release_all` (which stop_spark
calls).
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any, Sequence

import pyarrow as pa

from .schema import table_to_ipc

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

_pinned: dict[int, list[Any]] = {}
_keys = itertools.count(1)


def blocks_to_spark(spark: Any, schema: pa.Schema, refs: Sequence[Any]) -> tuple[Any, int]:
    """A Spark DataFrame over Ray object refs of Arrow IPC blocks with `schema`, and its pin key.

    The refs stay pinned until release(key) or release_all().
    """
    import ray
    from raydp.spark import ray_dataset_to_spark_dataframe

    # RayDP fetches the first block to the driver to choose its conversion: make it a tiny one.
    blocks = [ray.put(table_to_ipc(schema.empty_table())), *refs]
    df = ray_dataset_to_spark_dataframe(spark, schema, blocks)
    key = next(_keys)
    _pinned[key] = blocks
    return df, key


def arrow_to_spark(spark: Any, table: pa.Table) -> DataFrame:
    """A small driver-side Arrow table as a Spark DataFrame (through the object store, pinned until stop)."""
    import ray

    refs = [ray.put(table_to_ipc(table))] if table.num_rows else []
    df, _ = blocks_to_spark(spark, table.schema, refs)
    return df.coalesce(1)


def release(key: int) -> None:
    """Unpin the blocks behind the DataFrame of `key`; that DataFrame cannot be read afterwards."""
    _pinned.pop(key, None)


def release_all() -> None:
    """Unpin every block (when Spark stops)."""
    if _pinned:
        log.debug("releasing the Ray blocks of %d DataFrames", len(_pinned))
    _pinned.clear()
