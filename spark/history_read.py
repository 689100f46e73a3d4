"""Read the exported history for a time range: Spark with its own Parquet reader, or pyarrow for pandas.

Both read the same files (see history.py for the layout) and return the commits and groups with
the columns of COMMITS_SCHEMA and GROUPS_SCHEMA. A time range [since_ms, until_ms] (either end
may be open) selects records by append time: the `date` directories outside it are never opened
(partition pruning) and the bound on log_timestamp is pushed down into the Parquet scan, which
skips row groups by their statistics.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from .history import DAY_MS, TABLES
from .history_store import HistoryStore
from .schema import COMMITS_SCHEMA, GROUPS_SCHEMA

log = logging.getLogger(__name__)

SCHEMAS = {"commits": COMMITS_SCHEMA, "groups": GROUPS_SCHEMA}
PARTITIONING = pa.schema([pa.field("date", pa.string()), pa.field("log_partition", pa.int32())])


@dataclass
class HistoryFrames:
    """The history's commits and groups as Spark DataFrames (read lazily by Spark)."""

    commits: Any
    groups: Any
    history: str
    since_ms: int | None
    until_ms: int | None

    def release(self) -> None:
        """Nothing to release: Spark reads the files (kept for the loaded-log interface)."""


def _day(ms: int) -> str:
    return str(np.datetime64(int(ms) // DAY_MS, "D"))


def _has_files(store: HistoryStore, table: str) -> bool:
    return any(name.startswith("date=") for name in store.list(table))


def history_tables(history: str, *, since_ms: int | None = None,
                   until_ms: int | None = None) -> tuple[pa.Table, pa.Table]:
    """The history's commits and groups in [since_ms, until_ms] as Arrow tables (the pandas reports' input)."""
    store = HistoryStore(history)
    out = []
    for table in TABLES:
        schema = SCHEMAS[table]
        if not _has_files(store, table):
            out.append(schema.empty_table())
            continue
        dataset = ds.dataset(store.path(table), format="parquet", filesystem=store.arrow_filesystem(),
                             partitioning=ds.partitioning(PARTITIONING, flavor="hive"))
        condition = None
        for op, bound in (("ge", since_ms), ("le", until_ms)):
            if bound is None:
                continue
            day = ds.field("date") >= _day(bound) if op == "ge" else ds.field("date") <= _day(bound)
            ts = ds.field("log_timestamp") >= bound if op == "ge" else ds.field("log_timestamp") <= bound
            condition = day & ts if condition is None else condition & day & ts
        read = dataset.to_table(columns=schema.names, filter=condition)
        out.append(read.cast(schema))
    return out[0], out[1]


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import IntegerType, StringType, StructField

    fields = [f for f in from_arrow_schema(schema).fields if f.name != "log_partition"]
    return [*fields, StructField("date", StringType()), StructField("log_partition", IntegerType())]


def history_frames(spark: Any, history: str, *, since_ms: int | None = None,
                   until_ms: int | None = None) -> HistoryFrames:
    """The history's commits and groups in [since_ms, until_ms] as Spark DataFrames, read by Spark itself."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType

    store = HistoryStore(history)
    frames = []
    for table in TABLES:
        schema = SCHEMAS[table]
        spark_schema = StructType(_spark_schema(schema))
        if not _has_files(store, table):
            frames.append(spark.createDataFrame([], from_arrow_schema(schema)))
            continue
        location = store.path(table) if store.local else f"{store.url.rstrip('/')}/{table}"
        df = spark.read.schema(spark_schema).option("basePath", location).parquet(location)
        if since_ms is not None:
            df = df.where((F.col("date") >= _day(since_ms)) & (F.col("log_timestamp") >= since_ms))
        if until_ms is not None:
            df = df.where((F.col("date") <= _day(until_ms)) & (F.col("log_timestamp") <= until_ms))
        frames.append(df.select(*schema.names))
    return HistoryFrames(frames[0], frames[1], history, since_ms, until_ms)

