"""partition_for: Kafka's Utils.abs(groupId.hashCode()) % n, with Java String.hashCode."""

import random

import pytest

from groupcoord.protocol.partitioner import java_string_hash, partition_for, partitions_for


@pytest.mark.parametrize(
    ("group_id", "java_hash", "partition"),
    [
        ("groupId", 293428218, 18),
        ("otherGroup", -204443313, 13),
        ("my-group", -1906497762, 12),
        ("foo", 101574, 24),
        ("group-id", 506313513, 13),
        ("", 0, 0),
        ("polygenelubricants", -(2**31), 0),
        ("é-群组", 8029956, 6),
    ],
)
def test_partition_for_fifty_partitions(group_id, java_hash, partition):
    assert java_string_hash(group_id) == java_hash
    assert partition_for(group_id, 50) == partition


def test_partition_for_two_partitions_separates_the_unit_test_groups():
    assert partition_for("groupId", 2) == 0
    assert partition_for("otherGroup", 2) == 1


def test_characters_outside_the_bmp_hash_as_two_utf16_units():
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16: 31 * 0xD83D + 0xDE00.
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00


def test_integer_min_value_hash_maps_to_partition_zero_for_any_count():
    for n in (1, 3, 7, 50, 1000):
        assert partition_for("polygenelubricants", n) == 0


def test_one_partition_owns_every_group():
    assert {partition_for(g, 1) for g in ("a", "groupId", "é-群组", "")} == {0}


@pytest.mark.parametrize("n", [0, -1])
def test_non_positive_partition_count_is_rejected(n):
    with pytest.raises(ValueError):
        partition_for("groupId", n)


def _reference_hash(s: str) -> int:
    """Java's String.hashCode written out: h = 31 * h + unit over the UTF-16 code units, 32-bit signed."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (h * 31 + int.from_bytes(data[i : i + 2], "big")) % 2**32
    return h - 2**32 if h >= 2**31 else h


def test_the_ascii_fast_path_agrees_with_javas_loop_at_every_length_and_past_its_table():
    rng = random.Random(30)
    ids = ["~" * n for n in range(0, 300)] + ["x" * 255 + "é", "é" + "x" * 300, "\ud800" + "a" * 10]
    ids += ["".join(chr(rng.randrange(0, 128)) for _ in range(rng.randrange(0, 400))) for _ in range(500)]
    assert [java_string_hash(s) for s in ids] == [_reference_hash(s) for s in ids]


@pytest.mark.parametrize("n", [1, 3, 16, 50, 1000])
def test_a_list_of_ids_maps_each_to_the_partition_its_own_hash_gives(n):
    rng = random.Random(n)
    ascii_ids = ["", "polygenelubricants", "groupId", "~" * 256] + [
        "".join(chr(rng.randrange(0, 128)) for _ in range(rng.randrange(0, 60))) for _ in range(3000)]
    # Hashed at once; then the lists the bulk pass leaves to the one-id path: a non-ASCII id, an id past the
    # weight table, a short list.
    for ids in (ascii_ids, [*ascii_ids, "é-群组"], [*ascii_ids, "x" * 257], ascii_ids[:10]):
        assert partitions_for(ids, n) == [partition_for(g, n) for g in ids]


def test_a_list_of_ids_needs_a_positive_partition_count():
    with pytest.raises(ValueError):
        partitions_for(["groupId"] * 300, 0)
