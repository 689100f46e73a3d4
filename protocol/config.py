"""The shard's configuration, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupConfig:
    """Kafka's group coordinator settings (group.* and offsets.* broker configs), in milliseconds."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    new_member_join_timeout_ms: int = 300000
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    # The consumer group protocol (KIP-848): Kafka 4.x's group.consumer.* broker settings.
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # Limits of our own (Kafka bounds these only through its message sizes): 32767 is the
    # longest string Kafka's record keys can hold; 1 MiB is Kafka's default message.max.bytes.
    max_group_id_bytes: int = 32767
    max_metadata_bytes: int = 1024 * 1024
    max_assignment_bytes: int = 1024 * 1024
    # Kafka's strings carry an int16 length: member, instance and client ids, client hosts,
    # protocol types and names, topic names and reasons are held to it (UTF-8 bytes; a generated
    # member id may add its "-<uuid>" suffix to a client or instance id of this length).
    max_name_bytes: int = 32767
    # How many items one request may carry: protocols of a JoinGroup; partitions of an
    # OffsetCommit, OffsetFetch or OffsetDelete; group ids of a DescribeGroups or DeleteGroups;
    # members of a LeaveGroup; assignments of a SyncGroup.
    max_protocols: int = 256
    max_partitions_per_request: int = 100_000
    max_items_per_request: int = 10_000

    def __post_init__(self) -> None:
        if self.max_size < 1:
            raise ValueError(f"max_size must be at least 1, got {self.max_size}")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("min_session_timeout_ms must not exceed max_session_timeout_ms")
        if self.consumer_max_size < 1:
            raise ValueError(f"consumer_max_size must be at least 1, got {self.consumer_max_size}")
        if not self.consumer_assignors:
            raise ValueError("consumer_assignors must name at least one assignor (the first is the default)")
        if self.consumer_heartbeat_interval_ms <= 0 or self.consumer_session_timeout_ms <= 0:
            raise ValueError("consumer_heartbeat_interval_ms and consumer_session_timeout_ms must be positive")
        if self.offsets_retention_check_interval_ms <= 0:
            raise ValueError("offsets_retention_check_interval_ms must be positive")
