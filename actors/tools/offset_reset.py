"""Planning `groupcoord offsets reset`: the new offset of each partition under Kafka's reset options."""

from __future__ import annotations

import bisect
import csv
import datetime as dt
import io
import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from groupcoord.protocol import TopicPartition

RESET_KINDS = ("to-earliest", "to-latest", "to-offset", "shift-by", "to-datetime", "by-duration")
EARLIEST_OFFSET = 0

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


class ResetError(ValueError):
    """A reset option or argument that cannot be used; the message says what to write instead."""


@dataclass(frozen=True)
class ResetSpec:
    """One of Kafka's reset strategies with its argument (None for earliest/latest)."""

    kind: str
    value: int | str | None = None


def parse_topic_arg(arg: str) -> tuple[str, list[int] | None]:
    """`topic` or `topic:0,1,2` → (topic, partitions or None for all)."""
    topic, sep, parts = arg.partition(":")
    if not topic:
        raise ResetError(f"--topic needs a topic name, as TOPIC or TOPIC:0,1,2; got {arg!r}")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise ResetError(f"partitions in {arg!r} must be integers, as TOPIC:0,1,2") from None
    if not partitions or partitions[0] < 0:
        raise ResetError(f"partitions in {arg!r} must be non-negative integers, as TOPIC:0,1,2")
    return topic, partitions


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Kafka's --by-duration takes it (PnDTnHnM, seconds allowed) in ms."""
    m = _DURATION.match(text.strip().upper()) if isinstance(text, str) else None
    if not m or not any(m.groups()) or text.upper().endswith("T"):
        raise ResetError(f"--by-duration takes an ISO-8601 duration such as P1DT2H30M or PT15M; got {text!r}")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def parse_datetime_ms(text: str) -> int:
    """An ISO-8601 timestamp (UTC when no zone is given) in ms since the epoch."""
    try:
        when = dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise ResetError(
            f"--to-datetime takes an ISO-8601 time such as 2026-01-31T12:00:00; got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def offset_at(samples: list[tuple[int, int]], timestamp_ms: int) -> int:
    """The log-end offset at `timestamp_ms`, interpolated between timestamped samples (ts, offset)."""
    if not samples:
        raise ResetError(
            "no end offsets were ever reported for this partition, so times cannot be mapped to offsets"
        )
    times = [t for t, _ in samples]
    i = bisect.bisect_left(times, timestamp_ms)
    if i == 0:
        return EARLIEST_OFFSET if timestamp_ms < times[0] else samples[0][1]
    if i == len(samples):
        return samples[-1][1]
    (t1, o1), (t2, o2) = samples[i - 1], samples[i]
    if t2 == t1:
        return o2
    return o1 + (o2 - o1) * (timestamp_ms - t1) // (t2 - t1)


def plan_reset(
    spec: ResetSpec,
    partitions: Iterable[TopicPartition],
    current: Mapping[TopicPartition, int],
    end_offsets: Mapping[TopicPartition, int],
    history: Mapping[TopicPartition, list[tuple[int, int]]] | None = None,
    now_ms: int | None = None,
) -> dict[TopicPartition, int]:
    """The new offset of every partition, clamped to [earliest, log end] as Kafka does."""
    history = history or {}
    plan: dict[TopicPartition, int] = {}
    for tp in partitions:
        end = end_offsets.get(tp)
        if spec.kind == "to-earliest":
            new = EARLIEST_OFFSET
        elif spec.kind == "to-latest":
            if end is None:
                raise ResetError(
                    f"the log-end offset of {tp.topic}-{tp.partition} is unknown; report it with "
                    f"`groupcoord topics end-offsets {tp.topic} {tp.partition}=N`"
                )
            new = end
        elif spec.kind == "to-offset":
            new = _int_value(spec)
        elif spec.kind == "shift-by":
            if tp not in current:
                raise ResetError(f"{tp.topic}-{tp.partition} has no committed offset to shift")
            new = current[tp] + _int_value(spec)
        elif spec.kind in ("to-datetime", "by-duration"):
            if spec.kind == "to-datetime":
                when = parse_datetime_ms(str(spec.value))
            else:
                if now_ms is None:
                    raise ResetError("by-duration needs the current time")
                when = now_ms - parse_duration_ms(str(spec.value))
            new = offset_at(sorted(history.get(tp, [])), when)
        else:
            raise ResetError(f"unknown reset option {spec.kind!r}; use one of {', '.join(RESET_KINDS)}")
        new = max(new, EARLIEST_OFFSET)
        if end is not None:
            new = min(new, end)
        plan[tp] = new
    return plan


def export_csv(plan: Mapping[TopicPartition, int]) -> str:
    """The plan in kafka-consumer-groups.sh's export format: topic,partition,offset lines."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for tp in sorted(plan):
        writer.writerow([tp.topic, tp.partition, plan[tp]])
    return out.getvalue()


def _int_value(spec: ResetSpec) -> int:
    """The integer of a to-offset or shift-by reset; a spec without one is a ResetError."""
    if spec.value is None:
        raise ResetError(f"{spec.kind} needs a number")
    return int(spec.value)
