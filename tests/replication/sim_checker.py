"""The simulator's checker: the properties replication promises, checked at every step and at the end.

- every acknowledged commit is returned (its value or a later one) by whichever leader serves a read;
- a value once returned is never replaced by an older one (per key, reads in real-time order);
- no two replicas acknowledge a commit as leader of one epoch;
- replicas agree on every record below their high watermark, and compaction never removes the latest
  committed record of a key;
- liveness: once faults stop with a majority up and connected, commits are acknowledged again in bounded time.
"""

from __future__ import annotations

from typing import Any


class Checker:
    """Collects the history of a run and the violations found in it."""

    def __init__(self) -> None:
        self.acked: dict[str, list[tuple[float, int]]] = {}
        self.status: dict[int, str] = {}  # commit value -> pending, acked or failed
        self.duplicated: set[int] = set()  # commit values the network delivered twice
        self.returned: dict[str, list[tuple[float, int]]] = {}
        self.epoch_leaders: dict[int, str] = {}
        self.committed: dict[int, Any] = {}  # offset -> record, as replicas hold them below their watermark
        self.replica_hw: dict[str, int] = {}  # the highest watermark each replica ever knew
        self.violations: list[str] = []
        self.acks = 0
        self.reads = 0
        self.last_ack_at = -1.0

    def fail(self, now: float, message: str) -> None:
        if len(self.violations) < 20:
            self.violations.append(f"t={now:.4f}: {message}")

    # --- client history ---------------------------------------------------------------------------

    # One client writes each key, one commit at a time, with increasing values: acknowledged writes of a key
    # are ordered in real time. A commit that got no answer (a timeout, a dead leader) is indeterminate: it may
    # take effect at any later time, so reading its value proves nothing wrong.

    def commit_sent(self, value: int) -> None:
        self.status[value] = "pending"

    def commit_duplicated(self, value: int) -> None:
        """The network delivered the commit twice: one copy may be refused while the other takes effect."""
        self.duplicated.add(value)

    def commit_failed(self, value: int) -> None:
        """The commit was refused with an error (NOT_COORDINATOR, ...): it must never become visible, unless
        the network duplicated it (the other copy's fate is unknown, as a timeout's is)."""
        if value not in self.duplicated:
            self.status[value] = "failed"

    def commit_acked(self, key: str, value: int, now: float) -> None:
        self.status[value] = "acked"
        self.acked.setdefault(key, []).append((now, value))
        self.acks += 1
        self.last_ack_at = now

    def read_returned(self, key: str, value: int, started: float, now: float, server: str) -> None:
        """A read of `key` that started at `started` returned `value` (served by `server`)."""
        self.reads += 1
        status = self.status.get(value, "acked" if value == -1 else "unknown")
        must = max((v for t, v in self.acked.get(key, ()) if t <= started), default=-1)
        seen = max((v for t, v in self.returned.get(key, ()) if t <= started), default=-1)
        if status in ("failed", "unknown"):
            self.fail(now, f"read of {key} from {server} returned {value}, a commit that was {status} "
                           f"(refused commits must never become visible)")
        elif status == "acked" and value < must:
            self.fail(now, f"read of {key} from {server} returned {value}, but {must} was acknowledged before it "
                           f"started (an acknowledged commit is lost)")
        elif status == "acked" and value < seen:
            self.fail(now, f"read of {key} from {server} returned {value} after a read had returned {seen} "
                           f"(a value went back)")
        self.returned.setdefault(key, []).append((now, value))

    def leader_acked(self, epoch: int, replica_id: str, now: float) -> None:
        holder = self.epoch_leaders.setdefault(epoch, replica_id)
        if holder != replica_id:
            self.fail(now, f"two leaders acknowledged commits in epoch {epoch}: {holder} and {replica_id}")

    # --- replicas' logs ----------------------------------------------------------------------------

    def check_log(self, replica_id: str, records: list[tuple[int, Any]], hw: int, end: int, now: float) -> None:
        """A replica's records below its high watermark agree with every other's; the latest committed record of
        each key is kept wherever the replica's log reaches it.

        What is below a replica's watermark is committed, and stays so: the prefix checked is the highest watermark
        this replica ever knew (a restarted one may learn a lower one than before, and have compacted up to the
        old), never past its end, and never into a deposed leader's divergent suffix (above any it knew).
        """
        known = self.replica_hw[replica_id] = max(self.replica_hw.get(replica_id, 0), hw)
        reach = min(known, end)
        latest_here: dict[Any, int] = {}
        for offset, record in records:
            if offset >= reach:
                break
            if offset < hw:
                other = self.committed.setdefault(offset, record)
                if other != record:
                    self.fail(now, f"replica {replica_id} holds {record!r} at offset {offset} below its watermark "
                                   f"{hw}, another replica holds {other!r}")
                    return
            latest_here[record[0]] = offset
        latest: dict[Any, int] = {}
        for offset in sorted(o for o in self.committed if o < reach):
            latest[self.committed[offset][0]] = offset
        for key, offset in latest.items():
            mine = latest_here.get(key)
            if (mine is None and self.committed[offset][1] is not None) or (mine is not None and mine < offset):
                self.fail(now, f"replica {replica_id} lost the latest committed record of {key!r} (offset {offset}, "
                               f"committed below {known}); it keeps only offset {mine}")
                return
