"""Run GroupMembers in background threads that keep polling, as consumer loops would."""

from __future__ import annotations

import threading
import time

from groupcoord.actors.client.member import GroupMember
from groupcoord.protocol import TopicPartition


class PollingMember:
    """A GroupMember whose poll loop runs in its own thread; records listener calls in order."""

    def __init__(self, service, group: str, name: str, **options) -> None:
        self.name = name
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []
        self.errors: list[BaseException] = []
        options.setdefault("session_timeout_ms", 3000)
        options.setdefault("heartbeat_interval_ms", 300)
        options.setdefault("topics", ["t"])
        self.member = GroupMember(
            service,
            group,
            client_id=name,
            on_partitions_revoked=lambda tps: self.events.append(("revoked", frozenset(tps))),
            on_partitions_assigned=lambda tps: self.events.append(("assigned", frozenset(tps))),
            **options,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"poll-{name}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.member.poll(100)
            except BaseException as e:
                self.errors.append(e)
                return
            time.sleep(0.05)

    def assignment(self) -> set[TopicPartition]:
        return self.member.assignment()

    def stop_polling(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def close(self) -> None:
        self.stop_polling()
        self.member.close()


def settled(members, partitions: set[TopicPartition]) -> bool:
    """Every partition owned by exactly one member, all members Stable in one generation."""
    owned = [tp for m in members for tp in m.assignment()]
    generations = {m.member.generation_id for m in members}
    return (
        len(owned) == len(set(owned))
        and set(owned) == partitions
        and len(generations) == 1
        and all(m.member.membership.is_stable() and not m.member.membership.rejoin_needed for m in members)
    )

