"""OffsetCommitRun: a commit's records by column read, encode and replay as the same Records one by one would."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.protocol.commit_run import OffsetCommitRun
from groupcoord.protocol.offsets.columns import DENSE_PARTITIONS, GroupOffsets
from groupcoord.protocol.records import OffsetCommitKey, OffsetCommitValue, Record, decode_batch, encode_batch

INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1
T0 = 1_700_000_000_000
TOPICS = ["t", "orders", "ümlaut-tøpic", "x" * 200]
METADATA = ["", "", "m", "ünïcode ✓", "y" * 300, "z" * 70_000]  # fixstr, str8, str16 and str32 lengths
# Each integer column in every msgpack width: fixints (negative too), int32 and int64 values.
PARTITIONS = st.one_of(st.integers(0, 127), st.integers(0, 40_000), st.just(INT32_MAX))
OFFSETS = st.one_of(st.integers(-1, 127), st.integers(-1, 2**31), st.just(INT64_MAX))
EPOCHS = st.one_of(st.just(-1), st.integers(-1, 127), st.integers(-1, INT32_MAX))
ROWS = st.lists(st.tuples(st.sampled_from(TOPICS), PARTITIONS, OFFSETS, EPOCHS, st.sampled_from(METADATA)),
                max_size=60)
EXPIRES = st.sampled_from([-1, -1, T0 + 86_400_000])


def _run(group: str, rows: list[tuple], committed: int = T0, expire: int = -1) -> OffsetCommitRun:
    columns = tuple(zip(*rows, strict=True)) if rows else ((), (), (), (), ())
    topics, partitions, offsets, epochs, metadata = columns
    return OffsetCommitRun(group, topics, partitions, offsets, epochs, metadata, committed, expire)


def _records(group: str, rows: list[tuple], committed: int = T0, expire: int = -1) -> list[Record]:
    return [Record(OffsetCommitKey(group, t, p), OffsetCommitValue(o, e, m, committed, expire))
            for t, p, o, e, m in rows]


@settings(max_examples=150, deadline=None)
@given(ROWS, st.sampled_from(["g", "grüppe", "a-much-longer-group-id"]), EXPIRES)
def test_a_run_reads_and_encodes_as_its_records_one_by_one(rows: list, group: str, expire: int) -> None:
    run, records = _run(group, rows, T0, expire), _records(group, rows, T0, expire)
    assert list(run) == records and len(run) == len(records) and run == records
    assert [run[i] for i in range(len(run))] == records and run[1:3] == records[1:3]
    assert pickle.loads(pickle.dumps(run)) == run
    # What the log stores decodes to the same records, in any msgpack width the columns chose.
    assert decode_batch(run.encode()) == records


def test_columns_of_small_values_encode_byte_for_byte_as_encode_batch() -> None:
    rows = [("t", p, 100 + p % 20, -1, "") for p in range(100)] + [("orders", 3, 5, 2, "m")]
    assert _run("g", rows).encode() == encode_batch(_records("g", rows))


def test_an_empty_run_encodes_to_nothing_and_columns_of_different_lengths_are_refused() -> None:
    assert _run("g", []).encode() == b"" and not _run("g", [])
    with pytest.raises(ValueError, match="differ in length"):
        OffsetCommitRun("g", ("t",), (0, 1), (5,), (-1,), ("",), T0)


PUT_PARTITIONS = st.one_of(st.integers(0, 40), st.sampled_from([DENSE_PARTITIONS - 1, DENSE_PARTITIONS, INT32_MAX]))
VALUES = st.tuples(st.one_of(st.integers(-1, 2**40), st.just(INT64_MAX), st.just(2**63)),  # 2**63: no int64
                   st.one_of(st.integers(-1, 50), st.just(2**40)),  # 2**40: no int32, kept beside the columns
                   st.sampled_from(["", "m", "longer metadata"]))
PUTS = st.lists(st.tuples(st.sampled_from(TOPICS[:3]), PUT_PARTITIONS, VALUES), max_size=80)


@settings(max_examples=150, deadline=None)
@given(PUTS, st.lists(PUTS, min_size=1, max_size=4), st.lists(EXPIRES, min_size=4, max_size=4))
def test_put_run_leaves_the_store_that_a_put_per_record_leaves(before: list, runs: list, expires: list) -> None:
    by_run, by_record = GroupOffsets(), GroupOffsets()
    for topic, partition, (offset, epoch, metadata) in before:  # rows already there, some with an expiry
        value = OffsetCommitValue(offset, epoch, metadata, T0, T0 if partition % 3 == 0 else -1)
        by_run.put(topic, partition, value)
        by_record.put(topic, partition, value)
    for i, (puts, expire) in enumerate(zip(runs, expires, strict=False)):
        rows = [(t, p, o, e, m) for t, p, (o, e, m) in puts]
        run = _run("g", rows, T0 + i, expire)
        new = sum(by_record.put(t, p, v) for (_, t, p), v in run)
        assert by_run.put_run(run.topics, run.partitions, run.offsets, run.epochs, run.metadata,
                               run.commit_timestamp, run.expire_timestamp) == new
        assert dict(by_run.items()) == dict(by_record.items())
        assert len(by_run) == len(by_record)
