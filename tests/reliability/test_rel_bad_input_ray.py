"""Bad input at the Ray entry points: partition actors' remote methods, GroupMember and AdminClient.

The service starts on a log prepared by a pure shard (groups "stable", "empty", "opaque" and
"full", members with 10-minute sessions), with a configuration whose every timer is at least two
minutes away (minimum session, initial rebalance delay, new-member join timeout): nothing
changes in the background, so a rejected request must leave the log end offset and every
listed, described and fetched thing exactly as it was. An exception that escapes to a caller where
an answer was due fails the example that raised it (hypothesis then shrinks it).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, NoReturn

import pytest
import ray
import rel_inputs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rel_inputs import (
    APIS,
    HUGE_BYTES,
    HUGE_STR,
    READ_ONLY_APIS,
    SUBSCRIPTION,
    build,
    check_response,
    drawn_requests,
    is_rejection,
    junk,
    texts,
)
from rel_shard import PREBUILT_GROUPS, Shard

from groupcoord.actors import start, stop
from groupcoord.actors.client.admin import AdminClient
from groupcoord.actors.client.errors import GroupCoordinatorError
from groupcoord.actors.client.member import GroupMember
from groupcoord.protocol import (
    DescribeGroupsRequest,
    Errors,
    GroupConfig,
    HeartbeatRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TopicPartition,
)
from groupcoord.storage import StorageRoot

NAMESPACE = "gc-rel-bad-input"
QUIET_MS = 120_000
CONFIG = GroupConfig(
    min_session_timeout_ms=QUIET_MS,
    max_session_timeout_ms=1_800_000,
    initial_rebalance_delay_ms=QUIET_MS,
    new_member_join_timeout_ms=QUIET_MS,
    max_size=4,
)
# Client arguments: a "huge" string of 40 KB (over the 32767-byte group id limit) keeps calls that
# iterate a string where a list is due (see the str-as-list test) from fanning out a million ids.
CLIENT_HUGE = {"@huge-str": "g" * 40_000, "@huge-bytes": b"\xfe" * 40_000}


@pytest.fixture(scope="module")
def prepared(ray_local, tmp_path_factory) -> tuple[Any, dict[str, str]]:
    """Start the service on a log holding the prebuilt groups; returns (service, placeholder ids)."""
    root = tmp_path_factory.mktemp("bad-input") / "root"
    plog = StorageRoot(str(root), 1).open_partition(0, sync="always")
    shard = Shard(
        GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=100, max_size=CONFIG.max_size),
        log=plog,
        session_ms=600_000,
        rebalance_ms=600_000,
        now_ms=int(time.time() * 1000),
        full_group=True,
    )
    plog.close()
    ray.cloudpickle.register_pickle_by_value(rel_inputs)  # HeartbeatRequestPlus travels by value
    service = start(num_partitions=1, storage_path=str(root), namespace=NAMESPACE, config=CONFIG)
    yield service, shard.ids
    stop(NAMESPACE)


def snapshot(handle: Any) -> tuple:
    """What clients can see of the partition: log end, groups listed and described, prebuilt offsets; and its pid."""
    status = ray.get(handle.status.remote(), timeout=60)
    listed = ray.get(handle.list_groups.remote(ListGroupsRequest()), timeout=60)
    ids = sorted(g.group_id for g in listed.groups)
    described = ray.get(handle.describe_groups.remote(DescribeGroupsRequest(ids)), timeout=60)
    offsets = [ray.get(handle.fetch_offsets.remote(OffsetFetchRequest(g)), timeout=60) for g in PREBUILT_GROUPS]
    return (status["log_end_offset"], listed, described, offsets), status["pid"]


def escaped(where: str, e: BaseException, what: Any) -> NoReturn:
    """Fail the running example: an exception reached the caller where an answer was due."""
    last = (str(e).strip().splitlines() or [""])[-1][:200]
    pytest.fail(f"{where}: {type(e).__name__}: {last}  <- {what!r:.160}")


# --- partition actors ------------------------------------------------------------------------


def send(svc: Any, ids: dict[str, str], drawn: rel_inputs.Drawn) -> None:
    """Send one drawn request to the partition actor and check answer, state and the actor's life."""
    handle = svc.partition(0)
    req = build(drawn, ids)
    before, pid = snapshot(handle)
    ref = getattr(handle, drawn.api).remote(req)
    if drawn.api == "join_group":  # only an accepted JoinGroup may wait (for the rebalance it started)
        ready, _ = ray.wait([ref], timeout=3)
        if not ready:
            return
    try:
        resp = ray.get(ref, timeout=60)  # a slow machine may take seconds; a request that parks never answers
    except ray.exceptions.GetTimeoutError:
        pytest.fail(f"{drawn.api} did not answer within 60 s: {req!r:.300}")
    except ray.exceptions.RayTaskError as e:
        escaped(f"PartitionActor.{drawn.api}", e, req)
    after, pid_after = snapshot(handle)
    assert pid_after == pid, f"the partition process changed ({pid} -> {pid_after}) after {req!r:.300}"
    codes = check_response(drawn.api, resp)
    if drawn.shape in ("namespace", "dict", "junk") and not (drawn.api == "list_groups" and req is None):
        assert set(codes) <= {Errors.INVALID_REQUEST}, resp
    if drawn.api in READ_ONLY_APIS or drawn.api == "heartbeat" or is_rejection(drawn.api, resp):
        if drawn.api == "join_group" and resp.error not in (Errors.INVALID_REQUEST, Errors.INVALID_GROUP_ID):
            # A JoinGroup that creates its group records it (Empty) even if it then fails, as Kafka does.
            assert after[3] == before[3]
            assert [g for g in after[2].groups if g.group_id in PREBUILT_GROUPS] == [
                g for g in before[2].groups if g.group_id in PREBUILT_GROUPS
            ]
        else:
            assert after == before, f"{drawn.api} answered {codes} but changed state: {req!r:.300}"


@pytest.mark.parametrize("api", APIS)
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_rel_partition_actor_answers_drawn_requests(prepared, api: str, data: st.DataObject) -> None:
    """Drawn requests to each remote method: codes, no crash, no state change when rejected."""
    svc, ids = prepared
    send(svc, ids, data.draw(drawn_requests(api)))


def test_rel_partition_actor_limits(prepared) -> None:
    """1 MB group id, 10 MB protocol metadata, 10 MB assignment and group.max.size, through the actor."""
    svc, ids = prepared
    handle = svc.partition(0)
    before, pid = snapshot(handle)
    ten_mb = HUGE_BYTES * 10
    session = 600_000
    cases: list[tuple[str, Any, Errors]] = [
        ("join_group", JoinGroupRequest(HUGE_STR, session, protocols=[("range", SUBSCRIPTION)]),
         Errors.INVALID_GROUP_ID),
        ("heartbeat", HeartbeatRequest(HUGE_STR, 1, "m"), Errors.INVALID_GROUP_ID),
        ("join_group", JoinGroupRequest("stable", session, protocols=[("range", ten_mb)]), Errors.INVALID_REQUEST),
        ("sync_group", SyncGroupRequest("stable", 1, ids["@m0"], assignments={ids["@m1"]: ten_mb}),
         Errors.INVALID_REQUEST),
        ("join_group", JoinGroupRequest("full", session, protocols=[("range", SUBSCRIPTION)]),
         Errors.GROUP_MAX_SIZE_REACHED),
    ]
    for api, req, expected in cases:
        resp = ray.get(getattr(handle, api).remote(req), timeout=60)
        assert resp.error == expected, (api, resp.error)
    after, pid_after = snapshot(handle)
    assert (after, pid_after) == (before, pid)


def test_rel_partition_actor_routes_lone_surrogate_group_ids_to_an_error_code(prepared) -> None:
    """A group id with a lone surrogate is answered INVALID_REQUEST/INVALID_GROUP_ID, not an exception."""
    svc, _ = prepared
    handle = svc.partition(0)
    for api, req in [
        ("heartbeat", HeartbeatRequest("g\ud800", 1, "m")),
        ("describe_groups", DescribeGroupsRequest(["\udfff"])),
        ("fetch_offsets", OffsetFetchRequest("\ud83d")),
    ]:
        try:
            resp = ray.get(getattr(handle, api).remote(req), timeout=60)
        except ray.exceptions.RayTaskError as e:
            pytest.fail(f"PartitionActor.{api}({req!r}) raised {type(e).__name__}: {str(e).splitlines()[-1]}")
        assert set(check_response(api, resp)) <= {Errors.INVALID_REQUEST, Errors.INVALID_GROUP_ID}


# --- clients ---------------------------------------------------------------------------------


def call_guarded(fn: Callable[[], Any], timeout_s: float = 30) -> tuple[str, Any]:
    """Run fn in a daemon thread; ("ok", value), ("raised", exception) or ("hung", None)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["ok"] = fn()
        except BaseException as e:
            box["raised"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        return "hung", None
    return ("ok", box["ok"]) if "ok" in box else ("raised", box["raised"])


def acceptable(outcome: tuple[str, Any]) -> bool:
    """A value, a typed coordinator error, or a client-side TypeError/ValueError (not a server crash)."""
    kind, value = outcome
    if kind == "ok":
        return True
    if kind == "hung":
        return False
    if isinstance(value, ray.exceptions.RayTaskError):
        return False  # an exception on the server, passed through
    return isinstance(value, (GroupCoordinatorError, TypeError, ValueError))


def judge(where: str, fn: Callable[[], Any], what: Any) -> tuple[str, Any]:
    """Call fn guarded; fail the running example unless its outcome is acceptable; the outcome."""
    outcome = call_guarded(fn)
    kind, value = outcome
    if kind == "hung":
        pytest.fail(f"{where}: hung for 30 s  <- {what!r:.160}")
    if not acceptable(outcome):
        escaped(where, value, what)
    return outcome


ADMIN_CALLS: dict[str, Callable[[AdminClient, Any, Any], Any]] = {
    "list_groups": lambda a, x, y: a.list_groups(states=x),
    "describe_groups": lambda a, x, y: a.describe_groups(x),
    "delete_groups": lambda a, x, y: a.delete_groups(x),
    "remove_members": lambda a, x, y: a.remove_members(x, y),
    "list_group_offsets": lambda a, x, y: a.list_group_offsets(x, y),
    "alter_group_offsets": lambda a, x, y: a.alter_group_offsets(x, y),
    "delete_group_offsets": lambda a, x, y: a.delete_group_offsets(x, y),
    "create_topic": lambda a, x, y: a.create_topic(x, y),
    "create_partitions": lambda a, x, y: a.create_partitions(x, y),
    "describe_topics": lambda a, x, y: a.describe_topics(x),
    "report_end_offsets": lambda a, x, y: a.report_end_offsets(x, y),
}
client_args = st.one_of(
    junk,
    st.lists(st.one_of(texts, st.sampled_from(PREBUILT_GROUPS)), max_size=3),
    st.dictionaries(st.tuples(texts, st.integers(-2, 3)), st.one_of(st.integers(-5, 10**20), junk), max_size=2),
    st.dictionaries(st.integers(-2, 5), st.one_of(st.integers(-5, 100), junk), max_size=2),
    st.sampled_from((*PREBUILT_GROUPS, "t")),
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(method=st.sampled_from(sorted(ADMIN_CALLS)), x=client_args, y=client_args)
def test_rel_admin_client_answers_bad_arguments(prepared, method: str, x: Any, y: Any) -> None:
    """AdminClient methods with junk arguments: a value, a typed error or a TypeError/ValueError, promptly."""
    svc, _ = prepared
    admin = AdminClient(svc, request_timeout_ms=5_000)
    x, y = (rel_inputs._resolve(v, CLIENT_HUGE) for v in (x, y))
    judge(f"AdminClient.{method}", lambda: ADMIN_CALLS[method](admin, x, y), (x, y))
    assert ray.get(svc.partition(0).is_loaded.remote(), timeout=60)


MEMBER_CALLS: dict[str, Callable[[GroupMember, Any], Any]] = {
    "committed": lambda m, x: m.committed(x),
    "commit": lambda m, x: m.commit(x),
    "seek": lambda m, x: m.seek(x, 5),
    "assign": lambda m, x: m.assign(x),
    "subscribe": lambda m, x: m.subscribe(x),
}


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    group=st.booleans().flatmap(lambda valid: st.sampled_from(("empty", "manual")) if valid else junk),
    method=st.sampled_from(sorted(MEMBER_CALLS)),
    x=client_args,
)
def test_rel_group_member_answers_bad_arguments(prepared, group: Any, method: str, x: Any) -> None:
    """GroupMember (manually assigned, so no join waits) with junk group ids and arguments."""
    svc, _ = prepared
    group, x = (rel_inputs._resolve(v, CLIENT_HUGE) for v in (group, x))
    built = judge("GroupMember()", lambda: GroupMember(svc, group, request_timeout_ms=5_000), group)
    if built[0] == "raised":
        return
    member = built[1]
    try:
        if method not in ("assign", "subscribe"):
            member.assign([TopicPartition("t", 0)])
        judge(f"GroupMember.{method}", lambda: MEMBER_CALLS[method](member, x), (group, x))
    finally:
        call_guarded(lambda: member.close(timeout_ms=5_000))


@pytest.mark.parametrize(("group", "rejection"), [
    (None, TypeError), (5, TypeError), (b"bytes", TypeError), (["g"], TypeError),
    ("", Errors.INVALID_GROUP_ID), (HUGE_STR, Errors.INVALID_GROUP_ID),
    ("g\ud800", Errors.INVALID_REQUEST),  # not encodable: refused before its length is looked at
])
def test_rel_group_member_with_a_bad_group_id_fails_clearly_on_poll(prepared, group: Any, rejection: Any) -> None:
    """A subscribing GroupMember with an invalid group id: a TypeError at once for a group id that is no str, a
    typed error from its first poll for a str the coordinator refuses; never a quiet empty poll, a hang or a
    foreign exception."""
    svc, _ = prepared

    def build_and_poll() -> Any:
        member = GroupMember(svc, group, topics=["t"], session_timeout_ms=600_000, request_timeout_ms=5_000)
        try:
            return member.poll(5_000)  # long enough for the coordinator's first answer
        finally:
            member.close(timeout_ms=5_000)

    kind, value = judge("GroupMember(topics).poll", build_and_poll, group)
    assert kind == "raised", f"poll with group id {group!r:.60} answered {value!r} instead of refusing the group id"
    if isinstance(rejection, Errors):
        assert isinstance(value, GroupCoordinatorError) and value.error == rejection, repr(value)
    else:
        assert isinstance(value, rejection), repr(value)


def test_rel_admin_client_does_not_take_a_string_for_a_list_of_group_ids(prepared) -> None:
    """describe_groups("stable") must describe "stable" or refuse a bare str, not describe "s", "t", "a", ..."""
    svc, _ = prepared
    admin = AdminClient(svc, request_timeout_ms=5_000)
    try:
        described = admin.describe_groups("stable")
    except TypeError:
        return
    assert set(described) == {"stable"}, f"describe_groups('stable') described {sorted(described)}"


# --- the CLI ---------------------------------------------------------------------------------

cli_words = st.one_of(texts.filter(lambda t: t != "@huge-str"), st.sampled_from(("stable", "empty", "t", "t:0,1")),
                      st.integers(-(2**70), 2**70).map(str), st.just("g" * 40_000))
cli_commands = st.one_of(
    st.tuples(st.just("groups"), st.just("list"), st.sampled_from(("--state", "")), cli_words),
    st.tuples(st.just("groups"), st.just("describe"), cli_words,
              st.sampled_from(("--members", "--offsets", "--state", "--verbose", ""))),
    st.tuples(st.just("groups"), st.just("delete"), cli_words, cli_words),
    st.tuples(st.just("offsets"), st.just("reset"), cli_words, st.just("--topic"), cli_words,
              st.sampled_from(("--to-earliest", "--to-latest", "--to-offset", "--shift-by", "--to-datetime",
                               "--by-duration")), cli_words, st.sampled_from(("--dry-run", "--execute", ""))),
    st.tuples(st.just("offsets"), st.just("delete"), cli_words, st.just("--topic"), cli_words),
    st.tuples(st.just("topics"), st.just("create"), cli_words, st.just("--partitions"), cli_words),
    st.tuples(st.just("topics"), st.just("end-offsets"), cli_words, cli_words, cli_words),
    st.lists(cli_words, max_size=3).map(tuple),
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(command=cli_commands)
def test_rel_cli_answers_bad_arguments_with_a_message(prepared, command: tuple[str, ...]) -> None:
    """Every drawn command line ends with exit status 0, 1 (a one-line error) or 2 (usage), no traceback."""
    from click.testing import CliRunner

    from groupcoord.actors.tools.cli import main

    args = [a for a in command if a != ""]
    handle = prepared[0].partition(0)
    before, pid = snapshot(handle)
    outcome = call_guarded(lambda: CliRunner().invoke(main, ["--namespace", NAMESPACE, *args]), timeout_s=60)
    if outcome[0] != "ok":
        pytest.fail(f"groupcoord {' '.join(args)!r:.160}: {outcome[0]} {outcome[1]!r:.200}")
    result = outcome[1]
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        escaped("groupcoord " + " ".join(args[:2]), result.exception, args)
    assert result.exit_code in (0, 1, 2) and "Traceback" not in result.output, \
        f"groupcoord {args!r:.160}: exit {result.exit_code}: {result.output[-300:]!r}"
    after, pid_after = snapshot(handle)
    assert pid_after == pid
    if result.exit_code == 2:  # a usage error: nothing ran
        assert after == before
