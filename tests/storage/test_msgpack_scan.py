"""The compiled msgpack scan (storage.msgpack_scan.parse_records) reads every field of an offset commit as msgpack
does, at every integer width and string length msgpack encodes, in both its precompiled and its numba build."""

from __future__ import annotations

import random

import numpy as np
import pytest

from groupcoord.protocol.records import OffsetCommitKey, OffsetCommitValue, Record, encode_batch
from groupcoord.storage import kernels
from groupcoord.storage.scan_layout import COMMIT

# Each side of every boundary between msgpack's integer encodings (fixint, uint8-64, negative fixint, int8-64).
INTS = [-(2**63), -(2**31) - 1, -(2**31), -32769, -32768, -129, -128, -33, -32, -1, 0, 127, 128, 255, 256, 65535,
        65536, 2**32 - 1, 2**32, 2**63 - 1,
        -4660, 4660, -123_456_789, 123_456_789, -(2**40) - 12345, 1_700_000_000_123]  # distinct bytes in each width
# fixstr, str8, str16 and str32 lengths, with multi-byte UTF-8.
STRINGS = ["", "a", "x" * 31, "y" * 32, "é" * 127, "z" * 256, "w" * 65535, "v" * 65536]


def _kernels(build: str) -> kernels.Kernels:
    compiled = kernels.precompiled() if build == "precompiled" else kernels.numba_kernels()
    assert compiled is not None, "run `make kernels`"
    return compiled


def _parse(build: str, records: list[Record]) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, bytes]:
    payload = encode_batch(records)
    n = len(records)
    kind, spans, ints = np.zeros(n, np.int8), np.zeros((8, n), np.int64), np.zeros((6, n), np.int64)
    ends, counts = np.array([len(payload)], np.int64), np.array([n], np.int64)
    bad = _kernels(build).parse_records(np.frombuffer(payload, np.uint8), ends, counts, kind, spans, ints, True)
    return bad, kind, spans, ints, payload


def _text(payload: bytes, start: int, length: int) -> str:
    return payload[start : start + length].decode()


@pytest.mark.parametrize("build", ["precompiled", "numba"])
def test_every_field_of_every_width_reads_as_msgpack_wrote_it(build: str) -> None:
    rng = random.Random(7)
    records = []
    for i, value in enumerate(INTS):
        key = OffsetCommitKey(rng.choice(STRINGS[:5]) + f"g{i}", rng.choice(STRINGS) + "t", abs(value) % 2**31)
        others = [rng.choice(INTS) for _ in range(3)]
        records.append(Record(key, OffsetCommitValue(value, others[0], STRINGS[i % len(STRINGS)], *others[1:])))
        records.append(Record(key, None))  # a tombstone between them
    bad, kind, spans, ints, payload = _parse(build, records)
    assert bad == -1
    assert (kind == COMMIT).all()
    starts = np.cumsum(spans[1]) - spans[1]
    assert (spans[0] == starts).all() and spans[0, -1] + spans[1, -1] == len(payload)
    for r, (key, value) in enumerate(records):
        assert (_text(payload, spans[2, r], spans[3, r]), _text(payload, spans[4, r], spans[5, r])) == key[:2]
        assert ints[0, r] == key.partition
        assert ints[5, r] == (value is None)
        if value is not None:
            assert (ints[1, r], ints[2, r], ints[3, r], ints[4, r]) == (value.offset, value.leader_epoch,
                                                                        value.commit_timestamp, value.expire_timestamp)
            assert _text(payload, spans[6, r], spans[7, r]) == value.metadata


@pytest.mark.parametrize("build", ["precompiled", "numba"])
def test_an_integer_past_int64_stops_the_scan_at_its_record(build: str) -> None:
    good = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, -1, "", 2, -1))
    past = Record(OffsetCommitKey("g", "t", 1), OffsetCommitValue(2**63, -1, "", 2, -1))  # msgpack's uint64
    bad, *_ = _parse(build, [good, good, past, good])
    assert bad == 2


@pytest.mark.parametrize("build", ["precompiled", "numba"])
def test_nil_metadata_reads_as_a_nil_string(build: str) -> None:
    record = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, -1, None, 2, -1))  # type: ignore[arg-type]
    bad, _, spans, ints, _ = _parse(build, [record, record])
    assert bad == -1 and list(spans[7]) == [-1, -1] and list(ints[1]) == [1, 1]
