"""Bad input at the pure shard: every malformed request gets a valid answer and a rejected one changes nothing.

Each example builds a shard holding a Stable consumer group (two dynamic members and a static
one, with committed offsets), an Empty group with offsets, and a Stable group whose member
metadata is opaque bytes; then it sends one drawn request and checks the answer, the state
and that the answer arrives (advancing the manual clock for requests that park).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rel_inputs import (
    APIS,
    HUGE_BYTES,
    READ_ONLY_APIS,
    SUBSCRIPTION,
    VALIDATION_ERRORS,
    Drawn,
    build,
    check_response,
    drawn_requests,
    is_rejection,
)
from rel_shard import CONFIG, REBALANCE_MS, SESSION_MS, Shard

from groupcoord.protocol import (
    Errors,
    GroupConfig,
    GroupCoordinator,
    HeartbeatRequest,
    JoinGroupRequest,
    ManualClock,
    OffsetAndMetadata,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TopicPartition,
)

NO_TOP_LEVEL_ERROR = frozenset({"commit_offsets", "describe_groups", "delete_groups"})


def _expected_heartbeat(shard: Shard, member_id: str) -> Errors:
    """What a heartbeat of `member_id` in generation 1 of "stable" must answer, from the group as it is now."""
    group = shard.coord.groups.groups.get("stable")
    if group is None or member_id not in group.members or group.state == "Empty":
        return Errors.UNKNOWN_MEMBER_ID
    if group.state == "Dead":
        return Errors.COORDINATOR_NOT_AVAILABLE
    if group.generation_id != 1:
        return Errors.ILLEGAL_GENERATION
    return Errors.REBALANCE_IN_PROGRESS if group.state == "PreparingRebalance" else Errors.NONE


def _heartbeats_still_pass(shard: Shard, before: tuple) -> None:
    """The formed group still serves its members: NONE if the request left "stable" as it was, otherwise the
    code its new state calls for (a join started a rebalance, a leave removed the member, ...)."""
    c = shard.coord
    unchanged = _described(shard.snapshot(), "stable") == _described(before, "stable")
    for key in ("@m0", "@m1"):
        expected = Errors.NONE if unchanged else _expected_heartbeat(shard, shard.ids[key])
        hb = c.heartbeat(HeartbeatRequest("stable", 1, shard.ids[key])).result()
        assert hb.error == expected, (key, hb.error, expected)


def _described(snapshot: tuple, group_id: str) -> list:
    """The description of `group_id` in a Shard.snapshot()."""
    return [g for g in snapshot[2].groups if g.group_id == group_id]


def run_one(drawn: Drawn) -> None:
    """Build a shard, send the drawn request, and check answer, state and liveness."""
    shard = Shard()
    req = build(drawn, shard.ids)
    before = shard.snapshot()
    try:
        resp, immediate = shard.answer(drawn.api, req)
    except AssertionError:
        raise
    except Exception as e:  # an exception where an error code is due
        raise AssertionError(f"{drawn.api} raised {type(e).__name__}: {e} for {req!r:.400}") from e
    codes = check_response(drawn.api, resp)
    after = shard.snapshot()
    if drawn.shape in ("namespace", "dict", "junk") and not (drawn.api == "list_groups" and req is None):
        assert set(codes) <= {Errors.INVALID_REQUEST}, (drawn.shape, resp)
        # Commit, DescribeGroups and DeleteGroups answers have no top-level error: with nothing
        # to commit, describe or delete, the rejection can only be an empty answer.
        assert codes or drawn.api in NO_TOP_LEVEL_ERROR, (drawn.shape, resp)
    if drawn.api in READ_ONLY_APIS or drawn.api == "heartbeat":
        assert after[0] == before[0], f"{drawn.api} wrote to the log: {req!r:.300}"
    if drawn.api in READ_ONLY_APIS:
        assert after == before, f"a read changed state: {req!r:.300}"
    if immediate and is_rejection(drawn.api, resp):
        if set(codes) & VALIDATION_ERRORS or drawn.api != "join_group":
            assert after == before, f"rejected {drawn.api} ({codes}) changed state: {req!r:.300}"
        else:
            # Kafka (Java) records a new Empty group even when the JoinGroup that created it fails.
            assert after[1] == before[1] or set(after[1]) - set(before[1]) == {req.group_id}
            new_groups = [g for g in after[2].groups if g.group_id not in before[1]]
            assert all(g.group_state == "Empty" and not g.members for g in new_groups), new_groups
            old = [g for g in after[2].groups if g.group_id in before[1]]
            assert old == before[2].groups, f"rejected join ({codes}) changed existing groups: {req!r:.300}"
    _heartbeats_still_pass(shard, before)


def test_rel_shard_heartbeat_check_expects_the_code_of_a_changed_group() -> None:
    """The liveness check after each drawn request knows the exact answer: after a valid LeaveGroup of @m0 the
    group rebalances, so @m1 must hear REBALANCE_IN_PROGRESS and @m0 UNKNOWN_MEMBER_ID (not just any code)."""
    from groupcoord.protocol import LeaveGroupRequest, MemberIdentity

    shard = Shard()
    before = shard.snapshot()
    left = shard.coord.leave_group(LeaveGroupRequest("stable", [MemberIdentity(shard.ids["@m0"])])).result()
    assert left.members[0].error == Errors.NONE
    assert _expected_heartbeat(shard, shard.ids["@m0"]) == Errors.UNKNOWN_MEMBER_ID
    assert _expected_heartbeat(shard, shard.ids["@m1"]) == Errors.REBALANCE_IN_PROGRESS
    _heartbeats_still_pass(shard, before)


@pytest.mark.parametrize("api", APIS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_rel_shard_answers_every_drawn_request(api: str, data: st.DataObject) -> None:
    """Drawn requests of one API: valid codes, no exception, rejected ones change nothing."""
    run_one(data.draw(drawn_requests(api)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(api=st.sampled_from(APIS), drawn_shape=st.sampled_from(("namespace", "dict", "junk")), data=st.data())
def test_rel_shard_rejects_wrong_objects(api: str, drawn_shape: str, data: st.DataObject) -> None:
    """A dict, a look-alike object or junk in place of the request: INVALID_REQUEST and no change."""
    drawn = data.draw(drawn_requests(api, max_bad_fields=0))
    drawn.shape = drawn_shape
    run_one(drawn)  # list_groups(None) means "all groups": a valid call, which run_one allows


def test_rel_shard_limits_on_group_id_metadata_and_assignment() -> None:
    """A 1 MB group id, 10 MB protocol metadata and a 10 MB assignment are refused with clear codes."""
    shard = Shard()
    c = shard.coord
    before = shard.snapshot()
    big_id = "g" * (1 << 20)
    assert c.join_group(JoinGroupRequest(big_id, SESSION_MS)).result().error == Errors.INVALID_GROUP_ID
    assert c.heartbeat(HeartbeatRequest(big_id, 1, "m")).result().error == Errors.INVALID_GROUP_ID
    commit = c.commit_offsets(OffsetCommitRequest(big_id, {TopicPartition("t", 0): OffsetAndMetadata(1)})).result()
    assert set(commit.errors.values()) == {Errors.INVALID_GROUP_ID}
    ten_mb = HUGE_BYTES * 10
    join = c.join_group(JoinGroupRequest("stable", SESSION_MS, protocols=[("range", ten_mb)])).result()
    assert join.error == Errors.INVALID_REQUEST
    # Several protocols whose metadata is under the limit one by one but over it in total.
    many = [(f"p{i}", HUGE_BYTES[: (1 << 20) - 1]) for i in range(3)]
    assert c.join_group(JoinGroupRequest("stable", SESSION_MS, protocols=many)).result().error == Errors.INVALID_REQUEST
    sync = c.sync_group(SyncGroupRequest("stable", 1, shard.ids["@m0"], assignments={shard.ids["@m1"]: ten_mb}))
    assert sync.result().error == Errors.INVALID_REQUEST
    assert shard.snapshot() == before


def test_rel_shard_group_max_size_is_enforced() -> None:
    """group.max.size: a Stable group of 3 with max_size 3 refuses a fourth member, static or dynamic."""
    import dataclasses

    shard = Shard(dataclasses.replace(CONFIG, max_size=3))
    c = shard.coord
    before = shard.snapshot()
    protocols = [("range", SUBSCRIPTION)]
    dynamic = c.join_group(JoinGroupRequest("stable", SESSION_MS, protocols=protocols)).result()
    static = c.join_group(JoinGroupRequest("stable", SESSION_MS, group_instance_id="inst-z", protocols=protocols))
    assert dynamic.error == static.result().error == Errors.GROUP_MAX_SIZE_REACHED
    assert shard.snapshot() == before
    # An existing member still gets in.
    again = c.join_group(JoinGroupRequest("stable", SESSION_MS, REBALANCE_MS, shard.ids["@m1"], protocols=protocols))
    assert again.result().error == Errors.NONE


def test_rel_shard_duplicate_members_and_ids() -> None:
    """Duplicates in one request (leave twice, delete twice, fetch twice) are answered once each, sanely."""
    from groupcoord.protocol import DeleteGroupsRequest, LeaveGroupRequest, MemberIdentity, OffsetDeleteRequest

    shard = Shard()
    c = shard.coord
    m1 = shard.ids["@m1"]
    leave = c.leave_group(LeaveGroupRequest("stable", [MemberIdentity(m1), MemberIdentity(m1)])).result()
    check_response("leave_group", leave)
    assert leave.members[0].error == Errors.NONE
    assert all(isinstance(m.error, Errors) for m in leave.members)
    deleted = c.delete_groups(DeleteGroupsRequest(["empty", "empty", "nope", "nope"])).result()
    assert deleted.results == {"empty": Errors.NONE, "nope": Errors.GROUP_ID_NOT_FOUND}
    tp = TopicPartition("t", 0)
    fetched = c.fetch_offsets(OffsetFetchRequest("stable", [tp, tp, ("t", 0)])).result()
    assert list(fetched.offsets) == [tp] and fetched.offsets[tp].offset == 10
    dels = c.delete_offsets(OffsetDeleteRequest("stable", [TopicPartition("u", 0), ("u", 0)])).result()
    check_response("delete_offsets", dels)


def test_rel_shard_group_record_over_the_log_entry_limit_is_answered_with_an_error(tmp_path) -> None:
    """A group whose record outgrows the log's 256 MiB entry limit gets an error code, and nothing changes.

    Within the default limits (1 MiB metadata and 1 MiB assignment per member, group.max.size
    unbounded) 130 members make a 260 MiB group record; the leader's SyncGroup must be refused
    with an error code rather than raise, and the shard must not keep in memory what the log refused.
    """
    from groupcoord.storage import PartitionLog

    plog = PartitionLog(tmp_path / "p0", sync="never")
    clock = ManualClock(1_000_000)
    coord = GroupCoordinator(GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=100), clock, plog)
    metadata = b"m" * ((1 << 20) - 16)
    protocols = [("range", metadata)]

    def durable(deferred):
        coord.on_durable(plog.flush())
        return deferred

    ids = [
        durable(coord.join_group(JoinGroupRequest("big", SESSION_MS, REBALANCE_MS, protocols=protocols)))
        .result()
        .member_id
        for _ in range(130)
    ]
    parked = [coord.join_group(JoinGroupRequest("big", SESSION_MS, REBALANCE_MS, m, protocols=protocols)) for m in ids]
    while not all(d.done() for d in parked):
        clock.advance(100)
        coord.tick()
        durable(None)
    leader = parked[0].result().leader
    end_before = plog.end_offset
    assignment = b"a" * ((1 << 20) - 16)
    try:
        sync = coord.sync_group(SyncGroupRequest("big", 1, leader, assignments={m: assignment for m in ids}))
    except Exception as e:
        members = coord.groups.groups["big"].members
        kept = sum(1 for m in members.values() if m.assignment)
        raise AssertionError(
            f"the leader's SyncGroup raised {type(e).__name__}: {e}; log end {end_before} -> {plog.end_offset}, "
            f"yet {kept} members hold the refused assignment in memory"
        ) from e
    durable(sync)
    assert sync.done() and isinstance(sync.result().error, Errors)
    assert sync.result().error != Errors.NONE
    assert all(not m.assignment for m in coord.groups.groups["big"].members.values())
