"""Classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): the group, its state machine and its managers."""
