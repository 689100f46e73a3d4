"""The group records a shard appends, and the record encoding (round trips and bad input)."""

import msgpack
import pytest
from shard_context import GROUP, START_MS, ShardContext

from groupcoord.protocol.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RecordFormatError,
    decode_batch,
    decode_record,
    encode_batch,
    encode_record,
)

# --- records appended by the membership protocol -----------------------------------------


def test_creating_a_group_appends_an_empty_group_record():
    ctx = ShardContext()
    ctx.send_join()
    assert ctx.log.records == [
        Record(GroupMetadataKey(GROUP), GroupMetadataValue("", 0, None, None, START_MS, ())),
    ]


def test_joins_heartbeats_and_follower_syncs_append_nothing():
    ctx = ShardContext()
    gen = ctx.join_members(2)
    assert len(ctx.log.records) == 1
    ctx.heartbeat(GROUP, gen.generation, gen.leader)
    ctx.send_sync(GROUP, gen.generation, gen.followers[0])
    ctx.send_join()
    assert len(ctx.log.records) == 1


def test_storing_the_leaders_assignment_appends_the_group_record():
    ctx = ShardContext()
    a, _pa = ctx.join(client_id="ca", client_host="/h-a", protocols=(("roundrobin", b"rr-a"), ("range", b"r-a")))
    b, _pb = ctx.join(
        client_id="cb",
        client_host="/h-b",
        group_instance_id="ib",
        session_timeout_ms=20_000,
        rebalance_timeout_ms=40_000,
        protocols=(("range", b"r-b"),),
    )
    ctx.advance(6_000)
    completed_at = ctx.clock.now_ms()
    ctx.advance(1_000)
    ctx.send_sync(GROUP, 1, a, {a: b"A", b: b"B"})
    last = ctx.log.records[-1]
    assert last.key == GroupMetadataKey(GROUP)
    value = last.value
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == (
        "consumer",
        1,
        "range",
        a,
    )
    assert value.current_state_timestamp == completed_at
    assert sorted(value.members) == sorted(
        [
            MemberMetadata(a, None, "ca", "/h-a", 30_000, 10_000, b"r-a", b"A"),
            MemberMetadata(b, "ib", "cb", "/h-b", 40_000, 20_000, b"r-b", b"B"),
        ]
    )


def test_a_group_becoming_empty_appends_a_record_without_members():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    ctx.advance(1_000)
    for m in gen.members:
        ctx.leave(GROUP, m)
    assert ctx.log.records[-1] == Record(
        GroupMetadataKey(GROUP), GroupMetadataValue("consumer", 2, None, None, ctx.clock.now_ms(), ())
    )


def test_rebalance_timeout_defaults_to_the_session_timeout():
    ctx = ShardContext()
    member_id, _ = ctx.join(rebalance_timeout_ms=-1, session_timeout_ms=7_000)
    ctx.advance(3_000)
    ctx.send_sync(GROUP, 1, member_id, {})
    (member,) = ctx.log.records[-1].value.members
    assert (member.rebalance_timeout, member.session_timeout) == (7_000, 7_000)


# --- encoding ----------------------------------------------------------------------------

GROUP_VALUE = GroupMetadataValue(
    "consumer",
    7,
    "range",
    "m-1",
    1_700_000_000_123,
    (
        MemberMetadata("m-1", None, "client-1", "/10.0.0.1", 30_000, 10_000, b"\x00\x01sub", b"\x00asg"),
        MemberMetadata("i-2-uuid", "i-2", "client-2", "/10.0.0.2", -1, 45_000, b"", b""),
    ),
)

RECORDS = [
    Record(OffsetCommitKey("g", "topic", 3), OffsetCommitValue(42, 5, "meta", 1_700_000_000_000)),
    Record(OffsetCommitKey("g", "topic", 4), OffsetCommitValue(0, -1, "", 1, 2_000)),
    Record(OffsetCommitKey("g", "tópico-群", 0), OffsetCommitValue(2**62, -1, "ü" * 10, 0)),
    Record(OffsetCommitKey("g", "topic", 3), None),
    Record(GroupMetadataKey("g"), GROUP_VALUE),
    Record(GroupMetadataKey("g"), GroupMetadataValue("", 0, None, None, -1, ())),
    Record(GroupMetadataKey("g"), None),
    Record(GroupMetadataKey(""), GroupMetadataValue("consumer", 3, None, None, 5, ())),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: f"{type(r.key).__name__}-{r.value is None}")
def test_record_round_trip(record):
    decoded = decode_record(encode_record(record))
    assert decoded == record
    assert type(decoded.key) is type(record.key)
    assert decoded.is_tombstone == (record.value is None)
    if record.value is not None:
        assert type(decoded.value) is type(record.value)


def test_decoded_group_members_are_member_metadata_with_bytes():
    decoded = decode_record(encode_record(Record(GroupMetadataKey("g"), GROUP_VALUE)))
    assert all(type(m) is MemberMetadata for m in decoded.value.members)
    assert isinstance(decoded.value.members, tuple)
    assert decoded.value.members[0].subscription == b"\x00\x01sub"


def test_batch_round_trip_keeps_order():
    assert decode_batch(encode_batch(RECORDS)) == RECORDS
    assert decode_batch(encode_batch([])) == []


def test_a_batch_is_its_records_back_to_back():
    assert encode_batch(RECORDS[:2]) == encode_record(RECORDS[0]) + encode_record(RECORDS[1])


def test_offset_key_version_zero_is_read_as_an_offset_commit():
    data = msgpack.packb([0, "g", "t", 1, [0, 10, -1, "", 5, -1]], use_bin_type=True)
    assert decode_record(data) == Record(OffsetCommitKey("g", "t", 1), OffsetCommitValue(10, -1, "", 5, -1))


@pytest.mark.parametrize(
    "obj",
    [
        [9, "g"],
        [2, "g", [99, "consumer", 1, None, None, -1, []]],
        [1, "g", "t", 0, [99, 1, -1, "", 0, -1]],
        [2],
        [1, "g", "t"],
        [2, "g", [0, "consumer", 1, None, None, -1, [["m", None, "c", "h", 1, 2, b""]]]],
        [2, "g", [0, "consumer", 1, None, None, -1, [7]]],
        [2, "g", [0, "consumer", 1, None, None]],
    ],
    ids=["unknown-key-type", "group-value-version", "offset-value-version", "short-group", "short-offset",
         "member-missing-a-field", "member-not-a-list", "short-group-value"],
)
def test_undecodable_records_raise_record_format_error(obj):
    with pytest.raises(RecordFormatError):
        decode_record(msgpack.packb(obj, use_bin_type=True))


def test_undecodable_batch_raises_record_format_error():
    with pytest.raises(RecordFormatError):
        decode_batch(encode_batch(RECORDS[:1]) + b"\xc1")


def test_encoding_an_unknown_key_type_is_a_type_error():
    with pytest.raises(TypeError):
        encode_record(Record(("not", "a", "key"), None))
