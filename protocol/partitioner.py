"""Kafka's mapping of a group id to its offsets partition."""

from __future__ import annotations

from operator import mul

_INT_MIN = -(2**31)
_MASK = 0xFFFFFFFF
# 31**k mod 2**32 for k = _TABLE - 1 down to 0: the last n entries weigh the n code units of a short id.
_TABLE = 256
_WEIGHTS = [pow(31, k, 2**32) for k in range(_TABLE - 1, -1, -1)]


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: 31*h + c over UTF-16 code units, as a signed 32-bit int."""
    n = len(s)
    if n <= _TABLE and s.isascii():
        # sum(c_i * 31**(n-1-i)) mod 2**32, the same polynomial, summed in C (a router maps 100,000 ids at once).
        h = sum(map(mul, s.encode("ascii"), _WEIGHTS[_TABLE - n :])) & _MASK
    else:
        data = s.encode("utf-16-be", "surrogatepass")  # Java hashes UTF-16 code units, lone surrogates too
        h = 0
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK
    return h - 2**32 if h >= 2**31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The offsets partition that owns `group_id`: Utils.abs(hashCode) % n, as Kafka."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    h = java_string_hash(group_id)
    return (0 if h == _INT_MIN else abs(h)) % num_partitions
