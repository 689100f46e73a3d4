"""partition_for: Kafka's Utils.abs(groupId.hashCode()) % n, with Java String.hashCode."""

import pytest

from groupcoord.protocol.partitioner import java_string_hash, partition_for


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
