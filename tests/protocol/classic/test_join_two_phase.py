"""Two-phase JoinGroup for dynamic members (KIP-394), pending member ids and one-step joins."""

import re
import uuid

from shard_context import GROUP, REBALANCE_MS, SESSION_MS, ShardContext

from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import MemberIdentity


def _uuid4_suffix(member_id: str, prefix: str) -> uuid.UUID:
    assert member_id.startswith(prefix + "-"), member_id
    suffix = member_id[len(prefix) + 1 :]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", suffix), suffix
    parsed = uuid.UUID(suffix)
    assert parsed.version == 4
    return parsed


def test_first_join_of_dynamic_member_returns_member_id_required():
    ctx = ShardContext()
    r = ctx.send_join(client_id="consumer-1").result()
    assert r.error == Errors.MEMBER_ID_REQUIRED
    _uuid4_suffix(r.member_id, "consumer-1")
    assert (r.generation_id, r.leader, r.members) == (-1, "", [])
    assert r.protocol_type is None and r.protocol_name is None


def test_pending_member_is_not_a_member_yet():
    ctx = ShardContext()
    ctx.send_join()
    described = ctx.describe()
    assert described.group_state == "Empty"
    assert described.members == []


def test_every_first_phase_join_gets_a_fresh_member_id():
    ctx = ShardContext()
    ids = {ctx.send_join(client_id="same").result().member_id for _ in range(3)}
    assert len(ids) == 3


def test_second_join_with_the_pending_id_adds_the_member():
    ctx = ShardContext()
    member_id, pending = ctx.join(client_id="consumer-1")
    assert not pending.done()
    assert ctx.state() == "PreparingRebalance"
    assert ctx.member_ids() == {member_id}
    ctx.advance(3_000)
    r = pending.result()
    assert (r.error, r.member_id, r.generation_id, r.leader) == (Errors.NONE, member_id, 1, member_id)


def test_static_member_joins_in_one_step_with_instance_id_prefixed_id():
    ctx = ShardContext()
    pending = ctx.send_join(group_instance_id="instance-1", client_id="consumer-1")
    assert not pending.done()
    ctx.advance(3_000)
    r = pending.result()
    assert r.error == Errors.NONE
    _uuid4_suffix(r.member_id, "instance-1")


def test_pending_member_id_expires_after_its_session_timeout():
    ctx = ShardContext()
    short = ctx.send_join(session_timeout_ms=5_000).result().member_id
    longer = ctx.send_join(session_timeout_ms=8_000).result().member_id
    ctx.advance(5_000)
    expired = ctx.rejoin(GROUP, short, session_timeout_ms=5_000).result()
    assert (expired.error, expired.member_id) == (Errors.UNKNOWN_MEMBER_ID, short)
    still_pending = ctx.rejoin(GROUP, longer, session_timeout_ms=8_000)
    assert not still_pending.done()
    assert ctx.member_ids() == {longer}


def test_pending_member_blocks_early_completion_until_rebalance_timeout():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    newcomer = ctx.send_join(session_timeout_ms=100_000).result().member_id
    joins = {m: ctx.rejoin(GROUP, m) for m in gen.members}
    assert not any(d.done() for d in joins.values())
    ctx.advance(REBALANCE_MS - 1)
    assert not any(d.done() for d in joins.values())
    ctx.advance(1)
    assert {d.result().generation_id for d in joins.values()} == {2}
    assert ctx.member_ids() == set(gen.members)
    late = ctx.rejoin(GROUP, newcomer, session_timeout_ms=100_000)
    assert not late.done()
    assert ctx.state() == "PreparingRebalance"
    assert newcomer in ctx.member_ids()


def test_expiry_of_the_last_pending_member_completes_the_join_phase():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    ctx.send_join(session_timeout_ms=5_000)
    joins = [ctx.rejoin(GROUP, m) for m in gen.members]
    ctx.advance(4_999)
    assert not any(d.done() for d in joins)
    ctx.advance(1)
    assert [d.result().generation_id for d in joins] == [2, 2]
    assert ctx.state() == "CompletingRebalance"


def test_leave_group_of_a_pending_member_id():
    ctx = ShardContext()
    pending_id = ctx.send_join().result().member_id
    response = ctx.leave(GROUP, pending_id)
    assert response.error == Errors.NONE
    assert [(m.member_id, m.error) for m in response.members] == [(pending_id, Errors.NONE)]
    r = ctx.rejoin(GROUP, pending_id).result()
    assert r.error == Errors.UNKNOWN_MEMBER_ID


def test_leave_of_the_last_pending_member_completes_a_blocked_join_phase():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    pending_id = ctx.send_join(session_timeout_ms=100_000).result().member_id
    joins = [ctx.rejoin(GROUP, m) for m in gen.members]
    assert not any(d.done() for d in joins)
    ctx.leave(GROUP, MemberIdentity(pending_id))
    assert [d.result().generation_id for d in joins] == [2, 2]


def test_join_without_required_member_id_is_one_step():
    ctx = ShardContext()
    pending = ctx.send_join(client_id="old-client", require_known_member_id=False)
    assert not pending.done()
    assert ctx.state() == "PreparingRebalance"
    ctx.advance(3_000)
    r = pending.result()
    assert (r.error, r.generation_id, r.leader) == (Errors.NONE, 1, r.member_id)
    _uuid4_suffix(r.member_id, "old-client")


def test_member_added_by_second_phase_expires_after_its_session():
    """The join phase completion arms the session timer of the new member."""
    ctx = ShardContext()
    member_id, pending = ctx.join(session_timeout_ms=SESSION_MS)
    ctx.advance(3_000)
    assert pending.result().error == Errors.NONE
    ctx.advance(SESSION_MS - 1)
    assert ctx.member_ids() == {member_id}
    ctx.advance(1)
    assert ctx.member_ids() == set()
