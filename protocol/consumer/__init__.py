"""KIP-848 consumer groups (ConsumerGroupHeartbeat): the group, its records, reconciliation, the server assignors."""
