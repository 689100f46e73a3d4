"""The shard runtime: `GroupCoordinator` (one shard = one offsets partition), its purgatory of deadlines on an
injected clock, deferred responses, the log interface and the shard's counters and gauges."""
