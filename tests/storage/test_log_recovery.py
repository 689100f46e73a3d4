"""Opening a log after a crash: torn tails are cut off, corruption anywhere else is an error."""

from __future__ import annotations

import os
import re

import pytest
from storage_helpers import commit, flat, group_metadata

from groupcoord.storage import CorruptLogError, PartitionLog
from groupcoord.storage.framing import HEADER_SIZE
from groupcoord.storage.segment import segment_file_name

BATCHES = [
    [commit("g", "t", 0, 1), commit("g", "t", 1, 2)],
    [group_metadata("g", 1)],
    [commit("g", "t", 0, 3)],
    [commit("g", "t", 2, 4), group_metadata("g", 2, members=1), commit("g", "u", 0, 5)],
]


def write_log(directory, batches=BATCHES, **options) -> list[int]:
    """Write each batch as one entry; returns the byte position of each entry in the segment."""
    log = PartitionLog(directory, **options)
    positions = []
    for b in batches:
        positions.append(log.segments()[-1].size)
        log.append(b)
        log.flush()
    log.close()
    return positions


def test_torn_tail_at_every_byte_of_the_last_entry(tmp_path):
    src = tmp_path / "src"
    positions = write_log(src)
    seg = segment_file_name(0)
    data = (src / seg).read_bytes()
    last = positions[-1]
    before = flat(BATCHES[:-1])
    extra = [commit("after", "t", 0, 99)]
    for cut in range(last, len(data)):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        (d / seg).write_bytes(data[:cut])
        log = PartitionLog(d)
        assert list(log.replay()) == before, cut
        assert log.end_offset == log.durable_offset == len(before)
        assert os.path.getsize(d / seg) == last
        assert log.append(extra) == len(before) + 1
        assert log.flush() == len(before) + 1
        log.close()
        reopened = PartitionLog(d)
        assert list(reopened.replay()) == before + extra
        reopened.close()


def test_torn_tail_of_the_last_segment_keeps_earlier_segments(tmp_path):
    batches = [[commit("g", "t", i, i)] for i in range(20)]
    positions = write_log(tmp_path, batches, segment_bytes=200)
    log = PartitionLog(tmp_path)
    segments = log.segments()
    log.close()
    assert len(segments) > 3
    last = segments[-1]
    os.truncate(last.path, last.size - 3)
    log = PartitionLog(tmp_path)
    assert list(log.replay()) == flat(batches[:-1])
    assert log.end_offset == len(batches) - 1
    log.close()
    assert positions  # written one entry per flush


def test_bad_checksum_on_the_very_last_entry_is_a_torn_tail(tmp_path):
    positions = write_log(tmp_path)
    path = tmp_path / segment_file_name(0)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    log = PartitionLog(tmp_path)
    assert list(log.replay()) == flat(BATCHES[:-1])
    assert os.path.getsize(path) == positions[-1]
    log.close()


def test_zero_filled_tail_is_torn(tmp_path):
    write_log(tmp_path)
    path = tmp_path / segment_file_name(0)
    size = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(bytes(4096))
    log = PartitionLog(tmp_path)
    assert list(log.replay()) == flat(BATCHES)
    assert os.path.getsize(path) == size
    log.close()


def test_last_entries_of_one_write_partly_zeroed_are_torn(tmp_path):
    """One flush wrote two entries; after a power loss the file has its length but zeros inside."""
    log = PartitionLog(tmp_path)
    log.append(BATCHES[0])
    log.flush()
    start = log.segments()[-1].size
    log.append(BATCHES[1])
    log.append(BATCHES[2])
    log.flush()
    log.close()
    path = tmp_path / segment_file_name(0)
    data = bytearray(path.read_bytes())
    data[start + HEADER_SIZE + 3 :] = bytes(len(data) - start - HEADER_SIZE - 3)
    path.write_bytes(bytes(data))
    log = PartitionLog(tmp_path)
    assert list(log.replay()) == BATCHES[0]
    assert os.path.getsize(path) == start
    log.close()


def corrupt_byte(path, position):
    data = bytearray(path.read_bytes())
    data[position] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("where", ["payload", "length", "base_offset", "timestamp"])
def test_corruption_mid_log_raises_with_file_and_position(tmp_path, where):
    positions = write_log(tmp_path)
    path = tmp_path / segment_file_name(0)
    entry = positions[1]
    offset_in_entry = {"payload": HEADER_SIZE + 2, "length": 2, "base_offset": 12, "timestamp": 25}[where]
    corrupt_byte(path, entry + offset_in_entry)
    before = path.read_bytes()
    with pytest.raises(CorruptLogError) as info:
        PartitionLog(tmp_path)
    message = str(info.value)
    assert str(path) in message
    assert re.search(rf"\bbyte {entry}\b", message), message
    assert "checksum" in message
    assert info.value.path == str(path) and info.value.position == entry
    assert path.read_bytes() == before  # nothing was cut off


def test_corruption_in_a_closed_segment_raises(tmp_path):
    batches = [[commit("g", "t", i, i)] for i in range(20)]
    write_log(tmp_path, batches, segment_bytes=200)
    first = tmp_path / segment_file_name(0)
    corrupt_byte(first, os.path.getsize(first) - 1)  # the last entry of a closed segment
    with pytest.raises(CorruptLogError, match=re.escape(str(first))):
        PartitionLog(tmp_path)


def test_incomplete_entry_at_the_end_of_a_closed_segment_raises(tmp_path):
    batches = [[commit("g", "t", i, i)] for i in range(20)]
    write_log(tmp_path, batches, segment_bytes=200)
    first = tmp_path / segment_file_name(0)
    os.truncate(first, os.path.getsize(first) - 5)
    with pytest.raises(CorruptLogError, match="incomplete entry"):
        PartitionLog(tmp_path)


def test_garbage_after_the_last_entry_is_corruption_not_a_torn_tail(tmp_path):
    write_log(tmp_path)
    path = tmp_path / segment_file_name(0)
    size = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(b"\x01" * 100)
    with pytest.raises(CorruptLogError, match=rf"byte {size}\b"):
        PartitionLog(tmp_path)


def test_overlapping_segments_raise(tmp_path):
    batches = [[commit("g", "t", i, i)] for i in range(20)]
    write_log(tmp_path, batches, segment_bytes=200)
    log = PartitionLog(tmp_path)
    second = log.segments()[1]
    log.close()
    os.rename(second.path, tmp_path / segment_file_name(second.base_offset - 1))
    with pytest.raises(CorruptLogError):
        PartitionLog(tmp_path)


def test_replay_checks_checksums_too(tmp_path):
    write_log(tmp_path)
    log = PartitionLog(tmp_path)
    path = tmp_path / segment_file_name(0)
    corrupt_byte(path, HEADER_SIZE + 1)  # damaged after the log was opened
    with pytest.raises(CorruptLogError, match="byte 0"):
        list(log.replay())
    log.close()
