"""Kafka's mapping of a group id to its offsets partition."""

from __future__ import annotations

_INT_MIN = -(2**31)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: 31*h + c over UTF-16 code units, as a signed 32-bit int."""
    data = s.encode("utf-16-be", "surrogatepass")  # Java hashes UTF-16 code units, lone surrogates too
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The offsets partition that owns `group_id`: Utils.abs(hashCode) % n, as Kafka."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    h = java_string_hash(group_id)
    return (0 if h == _INT_MIN else abs(h)) % num_partitions
