"""A replica's durable leader-epoch state: the epoch it promised and the epochs its log's records came from.

Kafka keeps a leader-epoch-checkpoint file per partition (KIP-101): (epoch, start offset) pairs
that let a follower find where its log diverges from a new leader's. Ours also holds the highest
epoch the replica promised to an election, so that a replica never accepts records from a leader
of an older epoch, even after a restart. The file is replaced atomically and fsynced, through the
file-operation seam; a writer of the log checks its writer epoch first (`fence`), so a replica that
a newer writer of the same log replaced changes nothing.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from .errors import StorageConfigError
from .fileops import OS_FILES, FileOps, makedirs_durably, replace_file_durably

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "leader-epoch-checkpoint.json"


@dataclass(frozen=True)
class EpochState:
    """The promised epoch and the (leader_epoch, start_offset) history of the log, oldest first."""

    promised_epoch: int = 0
    history: tuple[tuple[int, int], ...] = ()

    def last_epoch(self, end_offset: int) -> int:
        """The epoch of the last record below `end_offset` (0 when the log holds none of a known epoch)."""
        epochs = [e for e, start in self.history if start < end_offset]
        return epochs[-1] if epochs else 0

    def end_of_epoch(self, epoch: int, end_offset: int) -> int:
        """Where records of epochs up to `epoch` end in this log (Kafka's OffsetForLeaderEpoch)."""
        later = [start for e, start in self.history if e > epoch]
        return min([end_offset, *later])

    def with_epoch_start(self, epoch: int, start_offset: int) -> EpochState:
        """This state with `epoch` starting at `start_offset` (entries at or past it dropped)."""
        kept = tuple((e, s) for e, s in self.history if e < epoch and s < start_offset)
        return replace(self, history=(*kept, (epoch, start_offset)))

    def truncated(self, end_offset: int) -> EpochState:
        """This state without the epochs that start at or past `end_offset`."""
        return replace(self, history=tuple((e, s) for e, s in self.history if s < end_offset))


class LeaderEpochCheckpoint:
    """Reads and atomically replaces the epoch state file in a partition's directory."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        files: FileOps | None = None,
        fence: Callable[[], None] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.path = self.directory / CHECKPOINT_FILE
        self.files = files if files is not None else OS_FILES
        self.fence = fence  # raises StaleWriterError once a newer writer opened the log

    def read(self) -> EpochState:
        """The stored state, or an empty one when there is no file yet."""
        try:
            data = json.loads(self.path.read_text())
            return EpochState(int(data["promised_epoch"]), tuple((int(e), int(s)) for e, s in data["history"]))
        except FileNotFoundError:
            return EpochState()
        except (ValueError, KeyError, TypeError) as e:
            raise StorageConfigError(f"leader epoch checkpoint {self.path} is unreadable: {e}") from e

    def write(self, state: EpochState) -> None:
        """Replace the file with `state`, durably."""
        body = {"promised_epoch": state.promised_epoch, "history": [list(h) for h in state.history]}
        if self.fence is not None:
            self.fence()
        write_json_atomically(self.path, body, self.files)


def write_json_atomically(path: str | os.PathLike[str], body: Any, files: FileOps = OS_FILES) -> None:
    """Replace the JSON file at `path` durably (its directory created if missing), through the seam."""
    path = Path(path)
    makedirs_durably(files, path.parent)
    replace_file_durably(files, path, json.dumps(body).encode())
