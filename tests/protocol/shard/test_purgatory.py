"""Purgatory: timers by key, fired in deadline order by fire_due."""

from groupcoord.protocol.shard.purgatory import Purgatory


def _recorder():
    fired: list[str] = []
    return fired, lambda name: lambda: fired.append(name)


def test_due_timers_fire_in_deadline_order():
    p = Purgatory()
    fired, cb = _recorder()
    p.schedule("c", 30, cb("c"))
    p.schedule("a", 10, cb("a"))
    p.schedule("b", 20, cb("b"))
    assert p.fire_due(25) == 2
    assert fired == ["a", "b"]
    assert p.fire_due(29) == 0
    assert p.fire_due(30) == 1
    assert fired == ["a", "b", "c"]
    assert len(p) == 0


def test_timers_with_the_same_deadline_fire_in_scheduling_order():
    p = Purgatory()
    fired, cb = _recorder()
    for name in ("x", "y", "z"):
        p.schedule(name, 5, cb(name))
    p.fire_due(5)
    assert fired == ["x", "y", "z"]


def test_scheduling_a_key_again_replaces_its_timer():
    p = Purgatory()
    fired, cb = _recorder()
    p.schedule("k", 10, cb("first"))
    p.schedule("k", 50, cb("second"))
    assert len(p) == 1
    assert p.deadline("k") == 50
    assert p.fire_due(10) == 0
    assert p.fire_due(50) == 1
    assert fired == ["second"]


def test_rescheduling_earlier_moves_the_timer_forward():
    p = Purgatory()
    fired, cb = _recorder()
    p.schedule("k", 50, cb("late"))
    p.schedule("k", 5, cb("early"))
    assert p.next_deadline() == 5
    p.fire_due(5)
    assert fired == ["early"]
    assert p.fire_due(100) == 0


def test_cancel_disarms_a_timer():
    p = Purgatory()
    fired, cb = _recorder()
    p.schedule("k", 10, cb("k"))
    p.schedule("other", 20, cb("other"))
    p.cancel("k")
    p.cancel("never-armed")
    assert "k" not in p and "other" in p
    assert p.deadline("k") is None
    assert p.next_deadline() == 20
    p.fire_due(100)
    assert fired == ["other"]


def test_timers_armed_while_firing_that_are_due_also_fire():
    p = Purgatory()
    fired, cb = _recorder()

    def first():
        fired.append("first")
        p.schedule("chained", 8, cb("chained"))
        p.schedule("later", 200, cb("later"))

    p.schedule("first", 5, first)
    assert p.fire_due(10) == 2
    assert fired == ["first", "chained"]
    assert p.deadline("later") == 200


def test_a_timer_may_rearm_its_own_key():
    p = Purgatory()
    count = []

    def tick():
        count.append(1)
        if len(count) < 3:
            p.schedule("self", 10 * (len(count) + 1), tick)

    p.schedule("self", 10, tick)
    assert p.fire_due(100) == 3
    assert "self" not in p


def test_next_deadline_and_len():
    p = Purgatory()
    assert p.next_deadline() is None
    p.schedule("a", 7, lambda: None)
    p.schedule("b", 3, lambda: None)
    assert (p.next_deadline(), len(p)) == (3, 2)
    p.cancel("b")
    assert (p.next_deadline(), len(p)) == (7, 1)


def test_scheduling_an_armed_key_again_moves_its_one_timer_either_way():
    p = Purgatory()
    fired, cb = _recorder()
    p.schedule("k", 10, cb("k"))
    p.schedule("k", 40, cb("k"))
    assert len(p) == 1 and p.fire_due(39) == 0
    p.schedule("k", 20, cb("k"))
    assert p.fire_due(20) == 1
    assert fired == ["k"] and len(p) == 0


def test_next_deadline_is_exact_up_to_exact_until_and_never_late_past_it():
    p = Purgatory()
    p.schedule("a", 100, lambda: None)
    p.schedule("b", 150, lambda: None)
    p.schedule("a", 400, lambda: None)  # "a"'s heap entry still says 100
    assert p.next_deadline(exact_until=50) == 100  # past 50: a lower bound, early but never late
    assert p.next_deadline(exact_until=120) == 150  # "a" was put in order, "b" is exact
    assert p.next_deadline() == 150
    assert p.fire_due(399) == 1 and p.next_deadline() == 400


class _CountingHeapq:
    """heapq for the purgatory, counting the entries it pushes (a push or a replace each)."""

    def __init__(self):
        import heapq

        self.heapq, self.moves = heapq, 0

    def heappush(self, heap, item):
        self.moves += 1
        self.heapq.heappush(heap, item)

    def heapreplace(self, heap, item):
        self.moves += 1
        return self.heapq.heapreplace(heap, item)

    def heappop(self, heap):
        return self.heapq.heappop(heap)


def test_a_timer_pushed_later_by_every_heartbeat_moves_in_the_heap_once_per_session(monkeypatch):
    """The partition's loop asks for the next deadline after every batch, exact only near now; 1,000 session
    timers (as KIP-848 members have) are pushed later every second, with a 3 s session, for 30 s. Ordering
    every re-armed timer on each ask moved each timer once per heartbeat (30,000 moves); and still no timer
    fires early or late."""
    from groupcoord.protocol.shard import purgatory

    counting = _CountingHeapq()
    monkeypatch.setattr(purgatory, "heapq", counting)
    p = Purgatory()
    expired: list[tuple[str, int]] = []
    now = 0
    members = [f"m{i}" for i in range(1000)]
    silent_from = {"m7": 10_000}  # stops heartbeating at 10 s: due at its last heartbeat + 3 s
    last: dict[str, int] = {}
    actions = {m: (lambda m=m: expired.append((m, now))) for m in members}
    for m in members:
        p.schedule(m, 3000, actions[m])
    heartbeats = 0
    while now < 30_000:
        now += 20
        for i, m in enumerate(members):
            phase = i % 50 * 20  # each member's heartbeat falls in one of the 20 ms ticks of its second
            if now % 1000 == phase and now < silent_from.get(m, 1 << 62):
                p.schedule(m, now + 3000, actions[m])
                last[m] = now
                heartbeats += 1
        p.next_deadline(exact_until=now + 100)
        p.fire_due(now)
    assert expired == [("m7", last["m7"] + 3000)]
    # once per (session - interval) = 2 s, a heap entry moves to its timer's deadline: half as often as heartbeats
    assert heartbeats > 29_000 and counting.moves < 0.55 * heartbeats, (counting.moves, heartbeats)
