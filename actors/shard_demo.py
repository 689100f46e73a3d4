"""A scripted rebalance of three members on one coordinator shard, printed step by step."""

from __future__ import annotations

from groupcoord.protocol import Errors, ManualClock, MemoryLog
from groupcoord.protocol.config import GroupConfig
from groupcoord.protocol.coordinator import GroupCoordinator
from groupcoord.protocol.messages import (
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
)

GROUP = "demo-group"
SESSION_MS = 10_000


class ShardDemo:
    """Drives a GroupCoordinator on a manual clock and narrates what happens."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.log = MemoryLog()
        self.coord = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=3000), self.clock, self.log)

    def say(self, text: str) -> None:
        print(f"[t={self.clock.now_ms():>6} ms] {text}")

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.coord.tick()

    def join(self, client: str, member_id: str = ""):
        req = JoinGroupRequest(
            GROUP,
            SESSION_MS,
            SESSION_MS,
            member_id=member_id,
            client_id=client,
            protocols=[("range", client.encode())],
        )
        return self.coord.join_group(req)

    def two_phase_join(self, client: str):
        first = self.join(client).result()
        self.say(f"{client}: JoinGroup -> {first.error.name}, member id {first.member_id}")
        return first.member_id, self.join(client, first.member_id)

    def state(self) -> str:
        return self.coord.describe_groups(DescribeGroupsRequest([GROUP])).result().groups[0].group_state

    def sync_all(self, joins: dict[str, object]) -> None:
        responses = {c: d.result() for c, d in joins.items()}
        generation = next(iter(responses.values())).generation_id
        leader = next(iter(responses.values())).leader
        members = sorted(r.member_id for r in responses.values())
        self.say(
            f"generation {generation}: leader {leader[:12]}..., {len(members)} members; state {self.state()}"
        )
        partitions = list(range(6))
        plan = {m: bytes(partitions[i :: len(members)]) for i, m in enumerate(members)}
        syncs = {}
        for client, resp in responses.items():
            assignments = plan if resp.member_id == leader else {}
            syncs[client] = self.coord.sync_group(
                SyncGroupRequest(GROUP, generation, resp.member_id, assignments=assignments)
            )
        for client, d in syncs.items():
            self.say(
                f"{client}: SyncGroup -> {d.result().error.name}, partitions {list(d.result().assignment)}"
            )
        self.say(f"group state {self.state()}; {len(self.log.records)} records in the log")

    def run(self) -> None:
        ids, joins = {}, {}
        for client in ("alice", "bob", "carol"):
            ids[client], joins[client] = self.two_phase_join(client)
            self.advance(500)
        self.say(f"all three parked in the initial rebalance delay; state {self.state()}")
        self.advance(3000)
        self.sync_all(joins)

        self.say("bob leaves the group")
        self.coord.leave_group(LeaveGroupRequest(GROUP, [MemberIdentity(ids["bob"])]))
        rejoins = {c: self.join(c, ids[c]) for c in ("alice", "carol")}
        self.sync_all(rejoins)

        self.say("carol stops heartbeating; alice keeps going")
        generation = rejoins["alice"].result().generation_id
        for _ in range(4):
            self.advance(3000)
            hb = self.coord.heartbeat(HeartbeatRequest(GROUP, generation, ids["alice"])).result()
            if hb.error != Errors.NONE:
                self.say(f"alice: Heartbeat -> {hb.error.name}: carol's session expired, rejoining")
                break
        self.sync_all({"alice": self.join("alice", ids["alice"])})

        self.say("restart: a fresh shard replays the log")
        fresh = GroupCoordinator(self.coord.config, self.clock, MemoryLog())
        fresh.load(self.log.records)
        g = fresh.describe_groups(DescribeGroupsRequest([GROUP])).result().groups[0]
        self.say(f"after replay: state {g.group_state}, members {[m.member_id[:12] for m in g.members]}")


def main() -> None:
    ShardDemo().run()


if __name__ == "__main__":
    main()
