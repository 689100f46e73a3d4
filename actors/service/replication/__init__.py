"""Replication of the offsets partitions: replicas, the leader's replicated log, elections, repair, and the
transport every call between them goes through (Ray in a service, a simulated network in the tests)."""
