"""A JoinGroup or SyncGroup in flight: sent once, its answer collected by as many polls as it takes.

Kafka's consumer keeps a join's future across poll() calls: poll(timeout) returns by its deadline
even while the coordinator holds the join, and the next poll goes on waiting for the same answer.
Each exchange also has its own deadline (the rebalance timeout plus Kafka's 5 s lapse), after
which it is given up and the member joins again.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

# Kafka's JoinGroup request timeout is rebalance.timeout.ms plus this much (AbstractCoordinator).
JOIN_TIMEOUT_LAPSE_S = 5.0


class PollDeadline(Exception):
    """The caller's poll deadline came before the coordinator's answer; the exchange stays in flight."""


@dataclasses.dataclass
class Exchange:
    """One join or sync sent to the coordinator, the membership epoch it was sent in, and its deadline."""

    method: str
    request: Any
    call: Any  # what CoordinatorClient.submit returned: .result(timeout_s) or TimeoutError
    epoch: int
    deadline: float  # when (by the membership's monotonic clock) the exchange is given up

    @classmethod
    def send(
        cls, client: Any, method: str, request: Any, epoch: int, rebalance_timeout_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> "Exchange":
        """Send `request` now; it may take the rebalance timeout (plus the lapse) to be answered."""
        deadline = clock() + rebalance_timeout_ms / 1000 + JOIN_TIMEOUT_LAPSE_S
        return cls(method, request, client.submit(method, request), epoch, deadline)

    def collect(self, poll_deadline: float | None, clock: Callable[[], float] = time.monotonic) -> Any:
        """The answer; PollDeadline if `poll_deadline` comes first; TimeoutError once the exchange's deadline passed."""
        until = self.deadline if poll_deadline is None else min(self.deadline, poll_deadline)
        try:
            return self.call.result(max(0.0, until - clock()))
        except TimeoutError:
            if clock() >= self.deadline:
                raise TimeoutError(f"{self.method} was not answered within the rebalance timeout") from None
            raise PollDeadline() from None
