"""The messages between replicas and the router: frozen dataclasses, one per request and answer."""

from __future__ import annotations

from dataclasses import dataclass

Batch = tuple[int, list]  # (base offset, records) of a contiguous run of the leader's log


@dataclass(frozen=True)
class PromiseAnswer:
    """A replica's answer to an election's promise request.

    `ok` False: it promised `promised` (a higher epoch) already, or it lost its storage (`lost`) and must
    not vote until repair replaces it. When `ok`: how up to date its log is (last epoch, end offset).
    """

    ok: bool
    promised: int
    replica_id: str = ""
    last_epoch: int = 0
    end: int = 0
    leading: bool = False
    lost: bool = False


@dataclass(frozen=True)
class Follow:
    """A new leader's handshake: its epoch, id, epoch history and log end (the follower cuts where it diverges)."""

    epoch: int
    leader_id: str
    leader_history: tuple[tuple[int, int], ...]
    leader_end: int


@dataclass(frozen=True)
class Replicate:
    """The leader's records from `from_offset` (the follower's end as the leader knows it) and its high watermark."""

    epoch: int
    leader_id: str
    from_offset: int
    batches: list[Batch]
    hw: int


@dataclass(frozen=True)
class FollowerAnswer:
    """A follower's answer to Follow or Replicate.

    `end`: its log is the leader's prefix up to here, durably; `fenced`: it promised this newer epoch;
    `handshake`: it needs a Follow first; `retry`: ask again later (it is restarting); `lost`: it lost its
    storage, so nothing it acknowledged before counts any more (it waits to be replaced).
    """

    end: int | None = None
    fenced: int | None = None
    handshake: bool = False
    retry: bool = False
    lost: bool = False
