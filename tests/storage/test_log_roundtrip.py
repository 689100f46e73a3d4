"""Records go in, and come back out in order with their offsets, also after reopening."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import (
    ManualMs,
    commit,
    files_in,
    flat,
    group_metadata,
    group_tombstone,
    offset_tombstone,
    random_batches,
)

from groupcoord.protocol.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from groupcoord.protocol.shard.log import RecordLog
from groupcoord.storage import LogRecord, PartitionLog
from groupcoord.storage.framing import HEADER, HEADER_SIZE, MAGIC
from groupcoord.storage.segment import parse_segment_file_name, segment_file_name

ALL_KINDS = [
    commit("g1", "orders", 0, 42, "meta"),
    commit("g1", "orders", 1, 7),
    offset_tombstone("g1", "orders", 1),
    group_metadata("g1", 5, members=3),
    group_metadata("empty", 0, members=0),
    group_tombstone("gone"),
    commit("ünïcødé-group", "topic/ü", 2**31 - 1, 2**62, "x" * 5000),
]


def test_every_record_kind_round_trips_through_reopen(tmp_path):
    log = PartitionLog(tmp_path / "p")
    assert log.append(ALL_KINDS[:3]) == 3
    assert log.append(ALL_KINDS[3:]) == len(ALL_KINDS)
    log.flush()
    assert list(log.replay()) == ALL_KINDS
    log.close()
    reopened = PartitionLog(tmp_path / "p")
    got = list(reopened.replay())
    assert got == ALL_KINDS
    assert [type(r.key) for r in got] == [type(r.key) for r in ALL_KINDS]
    assert reopened.end_offset == reopened.durable_offset == len(ALL_KINDS)
    reopened.close()


def test_offsets_count_records_from_zero_and_timestamps_come_from_the_clock(tmp_path):
    clock = ManualMs(1000)
    log = PartitionLog(tmp_path, clock=clock)
    assert log.end_offset == 0
    assert log.append([commit("g", "t", 0, 1)]) == 1
    clock.advance(5)
    assert log.append([commit("g", "t", 0, 2), commit("g", "t", 1, 3)]) == 3
    assert log.append([]) == 3
    log.flush()
    assert [(r.offset, r.timestamp_ms) for r in log.read()] == [(0, 1000), (1, 1005), (2, 1005)]
    assert [r.record for r in log.read(start_offset=2)] == [commit("g", "t", 1, 3)]
    log.close()


def test_partition_log_is_a_record_log(tmp_path):
    log: RecordLog = PartitionLog(tmp_path)
    assert log.append([commit("g", "t", 0, 1)]) == 1
    assert log.durable_offset == 0
    log.close()  # type: ignore[attr-defined]


def test_missing_and_empty_directories_are_empty_logs(tmp_path):
    missing = tmp_path / "a" / "b" / "partition"
    log = PartitionLog(missing)
    assert list(log.replay()) == []
    assert log.end_offset == log.durable_offset == 0
    assert files_in(missing) == [segment_file_name(0)]
    log.close()
    (tmp_path / "empty").mkdir()
    log = PartitionLog(tmp_path / "empty")
    assert list(log.replay()) == []
    log.close()


def test_entry_header_layout(tmp_path):
    clock = ManualMs(123456)
    log = PartitionLog(tmp_path, clock=clock)
    log.append([commit("g", "t", 0, 1), commit("g", "t", 1, 2)])
    log.close()
    data = (tmp_path / segment_file_name(0)).read_bytes()
    plen, _pcrc, magic, attrs, base, count, ts, _hcrc = HEADER.unpack_from(data, 0)
    assert (magic, attrs, base, count, ts) == (MAGIC, 0, 0, 2, 123456)
    assert len(data) == HEADER_SIZE + plen


def test_many_segments_reopen(tmp_path):
    batches = random_batches(seed=1, batches=400)
    log = PartitionLog(tmp_path, segment_bytes=600, sync="never")
    ends = []
    for b in batches:
        ends.append(log.append(b))
        log.flush()
    log.close()
    names = files_in(tmp_path)
    assert len(names) > 50
    assert all(len(n) == len("00000000000000000000.log") for n in names)
    reopened = PartitionLog(tmp_path, segment_bytes=600)
    assert reopened.end_offset == ends[-1]
    assert list(reopened.replay()) == flat(batches)
    # each segment is named after the offset of its first record
    firsts = {r.offset for r in reopened.read()}
    assert all(parse_segment_file_name(n) in firsts for n in names)
    # reading from any offset starts exactly there
    records = flat(batches)
    for start in (0, 1, 17, len(records) // 2, len(records) - 1, len(records)):
        assert [r.offset for r in reopened.read(start)] == list(range(start, len(records)))
        assert list(reopened.iter_records(start)) == records[start:]
    assert reopened.append([commit("g", "t", 0, 0)]) == ends[-1] + 1
    reopened.close()


def test_a_batch_bigger_than_a_segment_gets_a_segment_of_its_own(tmp_path):
    log = PartitionLog(tmp_path, segment_bytes=100, sync="never")
    big = [commit("g", "t", i, i) for i in range(50)]
    log.append([commit("g", "t", 0, 0)])
    log.flush()
    log.append(big)
    log.flush()
    log.append([commit("g", "t", 0, 1)])
    log.flush()
    assert [s.base_offset for s in log.segments()] == [0, 1, 51]
    assert list(log.replay()) == [commit("g", "t", 0, 0), *big, commit("g", "t", 0, 1)]
    log.close()


def test_records_staged_but_not_flushed_are_not_read(tmp_path):
    log = PartitionLog(tmp_path)
    log.append([commit("g", "t", 0, 0)])
    assert list(log.replay()) == []
    log.flush()
    log.append([commit("g", "t", 0, 1)])
    assert list(log.replay()) == [commit("g", "t", 0, 0)]
    log.close()
    assert len(list(PartitionLog(tmp_path).replay())) == 2  # close flushed it


def test_read_yields_log_records(tmp_path):
    log = PartitionLog(tmp_path, clock=ManualMs(7))
    log.append(ALL_KINDS)
    log.flush()
    got = list(log.read())
    assert got == [LogRecord(i, 7, r) for i, r in enumerate(ALL_KINDS)]
    log.close()


names = st.text(min_size=0, max_size=12)
records_strategy = st.one_of(
    st.builds(
        lambda g, t, p, v: Record(OffsetCommitKey(g, t, p), v),
        names,
        names,
        st.integers(0, 2**31 - 1),
        st.one_of(
            st.none(),
            st.builds(
                OffsetCommitValue,
                st.integers(-1, 2**63 - 1),
                st.integers(-1, 2**31 - 1),
                names,
                st.integers(-1, 2**62),
                st.integers(-1, 2**62),
            ),
        ),
    ),
    st.builds(
        lambda g, v: Record(GroupMetadataKey(g), v),
        names,
        st.one_of(
            st.none(),
            st.builds(
                GroupMetadataValue,
                names,
                st.integers(-1, 2**31 - 1),
                st.one_of(st.none(), names),
                st.one_of(st.none(), names),
                st.integers(-1, 2**62),
                st.just(()),
            ),
        ),
    ),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(records_strategy, min_size=1, max_size=5), max_size=8))
def test_arbitrary_batches_round_trip(tmp_path_factory, batches):
    d = tmp_path_factory.mktemp("prop")
    log = PartitionLog(d, sync="never", segment_bytes=300)
    for b in batches:
        log.append(b)
        if len(b) % 2:
            log.flush()
    log.close()
    reopened = PartitionLog(d, sync="never")
    assert list(reopened.replay()) == flat(batches)
    reopened.close()
