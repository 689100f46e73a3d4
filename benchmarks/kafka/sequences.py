"""Seeded random sequences of group requests for the differential tests.

A sequence is a tuple of `Step`s. A step names an action (a group request), the member slot that
sends it (slot -1: an admin connection of its own) and symbolic options ("the slot's current
generation", "a stale one", "a member id nobody was given"), so that one sequence can run against
any target: the runner resolves the options against what that target answered so far.
`generate(seed)` walks a small model of each slot (not joined, joined, synced) so that most steps
are the next sensible request of a client and some are invalid on purpose.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

# Topics every target must have before a run (name -> partitions); the last name must not exist.
TOPICS: dict[str, int] = {"conf-a": 3, "conf-b": 2}
MISSING_TOPIC = "conf-missing"
ADMIN = -1

# Request versions a step may use (all valid in Kafka 4.4).
VERSIONS: dict[str, tuple[int, ...]] = {
    "join": (5, 7, 9), "sync": (3, 5), "heartbeat": (3, 4), "leave": (3, 5),
    "commit": (7, 8, 9), "fetch": (7, 8, 9), "describe": (5,), "list": (4, 5), "delete": (2,),
    "offset_delete": (0,), "find": (3, 6), "cg_join": (1,), "cg_heartbeat": (1,), "cg_leave": (1,),
    "cg_describe": (0, 1),
}


@dataclass(frozen=True)
class Step:
    """One request of a sequence: its action, the sending slot and its symbolic options."""

    action: str
    slot: int = ADMIN
    opts: tuple[tuple[str, Any], ...] = ()

    def opt(self, name: str, default: Any = None) -> Any:
        """The option `name`, or `default`."""
        for key, value in self.opts:
            if key == name:
                return value
        return default

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.opts)
        who = "admin" if self.slot == ADMIN else f"slot={self.slot}"
        return f"{self.action}({who}{', ' if args else ''}{args})"


def step(action: str, slot: int = ADMIN, **opts: Any) -> Step:
    """A step with its options in a stable order."""
    return Step(action, slot, tuple(sorted(opts.items())))


@dataclass
class _SlotModel:
    protocol: str  # "classic" or "consumer"
    static: bool
    topics: tuple[str, ...]
    phase: int = 0  # classic: 0 new, 1 has member id, 2 joined, 3 synced; consumer: 0 out, 1 in


def _invalid(rng: random.Random, rate: float) -> bool:
    return rng.random() < rate


def _classic_step(rng: random.Random, slot: int, m: _SlotModel, bad: float) -> Step:
    v = rng.choice
    if m.phase <= 1 or rng.random() < 0.08:
        opts: dict[str, Any] = dict(v=v(VERSIONS["join"]), static=m.static, topics=m.topics)
        if _invalid(rng, bad):
            opts[rng.choice(["member", "session", "ptype", "group"])] = "bad"
        m.phase = min(m.phase + 1, 2) if not m.static else 2
        return step("join", slot, **opts)
    if m.phase == 2 and rng.random() < 0.7:
        m.phase = 3
        opts = dict(v=v(VERSIONS["sync"]))
        if _invalid(rng, bad):
            opts[rng.choice(["gen", "member"])] = "bad"
        return step("sync", slot, **opts)
    kind = rng.choices(["heartbeat", "commit", "fetch", "leave", "offset_delete"], [4, 4, 2, 1, 1])[0]
    if kind == "heartbeat":
        opts = dict(v=v(VERSIONS["heartbeat"]))
        if _invalid(rng, bad):
            opts[rng.choice(["gen", "member"])] = "bad"
        return step("heartbeat", slot, **opts)
    if kind == "commit":
        return _commit(rng, slot, m, bad)
    if kind == "fetch":
        return _fetch(rng, slot)
    if kind == "offset_delete":
        return _offset_delete(rng, slot)
    m.phase = 0
    opts = dict(v=v(VERSIONS["leave"]))
    if _invalid(rng, bad):
        opts["member"] = "bad"
    return step("leave", slot, **opts)


def _consumer_step(rng: random.Random, slot: int, m: _SlotModel, bad: float) -> Step:
    if m.phase == 0 or rng.random() < 0.05:
        m.phase = 1
        opts: dict[str, Any] = dict(v=1, static=m.static, topics=m.topics,
                                    assignor=rng.choice([None, None, "uniform", "range"]))
        if _invalid(rng, bad):
            opts[rng.choice(["assignor", "member", "topics"])] = "bad"
        return step("cg_join", slot, **opts)
    kind = rng.choices(["cg_heartbeat", "commit", "fetch", "cg_leave"], [6, 3, 2, 1])[0]
    if kind == "cg_heartbeat":
        opts = dict(v=1, full=rng.random() < 0.3)
        if _invalid(rng, bad):
            opts[rng.choice(["epoch", "member"])] = "bad"
        return step("cg_heartbeat", slot, **opts)
    if kind == "commit":
        return _commit(rng, slot, m, bad)
    if kind == "fetch":
        return _fetch(rng, slot)
    m.phase = 0
    return step("cg_leave", slot, v=1)


def _commit(rng: random.Random, slot: int, m: _SlotModel, bad: float) -> Step:
    topic = rng.choice([*TOPICS, *TOPICS]) if not _invalid(rng, bad / 2) else MISSING_TOPIC
    parts = sorted(rng.sample(range(TOPICS.get(topic, 2)), rng.randint(1, TOPICS.get(topic, 2))))
    opts: dict[str, Any] = dict(v=rng.choice(VERSIONS["commit"]), topic=topic, partitions=tuple(parts),
                                offset=rng.choice([0, 5, 17, 1000]))
    if rng.random() < 0.1:
        opts["gen"] = "none"  # -1 and an empty member id: a commit from outside the group
    elif _invalid(rng, bad):
        opts[rng.choice(["gen", "member"])] = "bad"
    return step("commit", slot, **opts)


def _fetch(rng: random.Random, slot: int) -> Step:
    return step("fetch", slot, v=rng.choice(VERSIONS["fetch"]), topics=rng.choice(["all", "conf-a", "named"]),
                group=rng.choice(["own", "own", "other"]), member=rng.choice(["none", "current"]))


def _offset_delete(rng: random.Random, slot: int) -> Step:
    return step("offset_delete", slot, v=0, topic=rng.choice(list(TOPICS)), partitions=(0,))


def _admin_step(rng: random.Random) -> Step:
    kind = rng.choices(["describe", "list", "cg_describe", "find", "delete", "fetch"], [4, 2, 3, 1, 1, 2])[0]
    if kind == "describe":
        return step("describe", v=5, groups=rng.choice(["own", "both", "empty"]))
    if kind == "list":
        return step("list", v=rng.choice(VERSIONS["list"]), states=rng.choice(["", "Stable", "Empty"]))
    if kind == "cg_describe":
        return step("cg_describe", v=rng.choice(VERSIONS["cg_describe"]), groups=rng.choice(["own", "both"]))
    if kind == "find":
        return step("find", v=rng.choice(VERSIONS["find"]), group=rng.choice(["own", "own", "empty"]))
    if kind == "delete":
        return step("delete", v=2, group=rng.choice(["own", "other"]))
    return _fetch(rng, ADMIN)


def generate(seed: int, length: int | None = None, invalid_rate: float = 0.12) -> tuple[Step, ...]:
    """A reproducible sequence for `seed`: 1-3 member slots (classic, consumer, or both) and 6-16 steps."""
    rng = random.Random(seed)
    n_slots = rng.choice([1, 1, 2, 2, 3])
    flavour = rng.choices(["classic", "consumer", "mixed"], [5, 4, 1])[0]
    models = []
    for _ in range(n_slots):
        protocol = flavour if flavour != "mixed" else rng.choice(["classic", "consumer"])
        topics = tuple(sorted(rng.sample(list(TOPICS), rng.randint(1, len(TOPICS)))))
        models.append(_SlotModel(protocol, rng.random() < 0.3, topics))
    steps = []
    for _ in range(length or rng.randint(6, 16)):
        if rng.random() < 0.15:
            steps.append(_admin_step(rng))
            continue
        slot = rng.randrange(n_slots)
        m = models[slot]
        pick = _classic_step if m.protocol == "classic" else _consumer_step
        steps.append(pick(rng, slot, m, invalid_rate))
    return tuple(steps)
