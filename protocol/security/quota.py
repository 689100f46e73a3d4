"""Kafka's request quota as a request rate per principal, answered with the time to throttle."""

from __future__ import annotations


class RequestQuota:
    """Per-principal token buckets: `rates` maps a principal (or "User:*", the default) to requests per second.

    A principal over its rate is told how long to wait (Kafka's throttle_time_ms): the time until
    its bucket is back to zero. A bucket holds one second's worth of requests (the burst).
    """

    def __init__(self, rates: dict[str, float]) -> None:
        self.rates = {p: float(r) for p, r in rates.items() if r is not None and r > 0}
        self._buckets: dict[str, tuple[float, float]] = {}  # principal -> (tokens, when)

    def rate_for(self, principal: str) -> float | None:
        """The principal's own rate, else the default ("User:*"), else None (no quota)."""
        rate = self.rates.get(principal)
        return rate if rate is not None else self.rates.get("User:*")

    def record(self, principal: str, requests: int, now_s: float) -> int:
        """Count `requests` requests of `principal` at time `now_s`; the throttle time in ms (0: within quota)."""
        rate = self.rate_for(principal) if self.rates else None
        if rate is None:
            return 0
        tokens, when = self._buckets.get(principal, (rate, now_s))
        tokens = min(rate, tokens + (now_s - when) * rate) - requests
        self._buckets[principal] = (tokens, now_s)
        return 0 if tokens >= 0 else int(-tokens / rate * 1000) + 1
