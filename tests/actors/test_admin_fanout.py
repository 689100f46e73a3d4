"""The router's ListGroups and DescribeGroups fan-out: rows merged and ordered, arriving as the responses themselves.

The partitions are stand-ins whose `.remote` answers at once (no Ray): what is checked is the merge,
the order, the errors and what the caller unpickles.
"""

from __future__ import annotations

import asyncio
import pickle

from groupcoord.actors.service import admin_fanout
from groupcoord.protocol import Errors
from groupcoord.protocol.messages import (
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    describe_response_from_rows,
    descriptions_in,
    in_request_order,
    pack_described_rows,
)


class _Method:
    def __init__(self, answer) -> None:
        self.answer = answer
        self.calls: list = []

    def remote(self, req, credentials=None):
        self.calls.append((req, credentials))

        async def answer():
            if isinstance(self.answer, BaseException):
                raise self.answer
            return self.answer(req) if callable(self.answer) else self.answer

        return answer()


class _Partition:
    def __init__(self, listing=None, describe=None) -> None:
        self.list_groups_rows = _Method(listing)
        self.describe_groups_packed = _Method(describe)


def _arrive(holder):
    """What a caller of the router gets: the holder pickled across Ray and unpickled."""
    return pickle.loads(pickle.dumps(holder))


def test_a_listing_is_merged_by_group_id_and_arrives_as_a_list_groups_response():
    parts = [_Partition(listing=(0, [("b", "consumer", "Stable", "classic"), ("d", "", "Empty", "classic")])),
             _Partition(listing=(0, [("a", "consumer", "Reconciling", "consumer"), ("c", "x", "Empty", "classic")]))]
    req = ListGroupsRequest(("Stable",), ("classic",))
    got = _arrive(asyncio.run(admin_fanout.list_groups(parts, req, "creds")))
    assert type(got) is ListGroupsResponse and got.error is Errors.NONE
    assert [g.group_id for g in got.groups] == ["a", "b", "c", "d"]
    assert got.groups[0] == ListedGroup("a", "consumer", "Reconciling", "consumer")
    assert all(p.list_groups_rows.calls == [(req, "creds")] for p in parts)  # the filters and credentials go on


def test_a_partition_that_fails_or_errs_is_reported_with_the_others_groups():
    parts = [_Partition(listing=RuntimeError("actor died")), _Partition(listing=(0, [("g", "", "Empty", "classic")]))]
    got = _arrive(asyncio.run(admin_fanout.list_groups(parts, ListGroupsRequest(), None)))
    assert got.error is Errors.COORDINATOR_NOT_AVAILABLE and [g.group_id for g in got.groups] == ["g"]
    parts = [_Partition(listing=(Errors.COORDINATOR_LOAD_IN_PROGRESS.value, [])),
             _Partition(listing=(0, [("g", "", "Empty", "classic")]))]
    got = _arrive(asyncio.run(admin_fanout.list_groups(parts, ListGroupsRequest(), None)))
    assert got.error is Errors.COORDINATOR_LOAD_IN_PROGRESS and len(got.groups) == 1


def _row(group_id: str, state: str = "Stable"):
    return (0, group_id, state, "consumer", "range", [("m", None, "client", "/h", b"meta", b"assigned")])


def test_descriptions_come_back_in_request_order_as_a_describe_groups_response():
    parts = [_Partition(describe=lambda req: pack_described_rows([_row(g) for g in req.group_ids])),
             _Partition(describe=lambda req: pack_described_rows([_row(g, "Dead") for g in req.group_ids]))]
    calls = [(0, ["x"]), (1, ["y"]), (0, ["z"])]  # a partition's ids may come in several pieces
    got = _arrive(asyncio.run(admin_fanout.describe_groups(parts, calls, ["z", "y", "x"], None)))
    assert type(got) is DescribeGroupsResponse
    assert [(d.group_id, d.group_state) for d in got.groups] == [("z", "Stable"), ("y", "Dead"), ("x", "Stable")]
    assert type(got.groups[0]) is DescribedGroup and got.groups[0].members[0].member_assignment == b"assigned"
    assert [c[0] for c in parts[0].describe_groups_packed.calls] == [DescribeGroupsRequest(["x"]),
                                                                    DescribeGroupsRequest(["z"])]


def test_a_partitions_ids_go_in_pieces_no_bigger_than_it_accepts():
    ids = [f"g{i}" for i in range(25)]
    calls = admin_fanout.describe_calls({3: ids, 1: ["a"], 2: []}, limit=10)
    assert calls == [(3, ids[:10]), (3, ids[10:20]), (3, ids[20:]), (1, ["a"])]


def _merged(answers: list[bytes]) -> dict:
    """The partitions' answers built one by one and merged, as AdminClient.describe_groups does as they arrive."""
    found: dict = {}
    for packed in answers:
        found.update(descriptions_in(packed))
    return found


def test_an_admin_client_gets_descriptions_by_group_id_in_request_order_each_once():
    answers = [pack_described_rows([_row("x"), _row("z")]), pack_described_rows([_row("y", "Dead")])]  # two partitions
    got = in_request_order(_merged(answers), ["z", "y", "z", "x", "unasked"])
    assert list(got) == ["z", "y", "x"]  # "unasked" was never answered: no entry, as described_rows_in_order
    rebuilt = describe_response_from_rows([_row("z"), _row("y", "Dead"), _row("x")]).groups
    assert list(got.values()) == rebuilt  # the same objects a DescribeGroupsResponse holds
    assert got["y"].group_state == "Dead" and got["x"].error is Errors.NONE


def test_packed_rows_come_back_as_the_same_descriptions():
    rows = [(0, "grüppe-\udc80", "Stable", "consumer", "range",  # a lone surrogate is carried, not refused
             [("m-1", None, "client", "/h", b"\x00meta", b""), ("m-2", "static-1", "c2", "/h2", b"", b"\xff")]),
            (Errors.GROUP_AUTHORIZATION_FAILED.value, "denied", "Dead", "", "", [])]
    got = in_request_order(descriptions_in(pack_described_rows(rows)), ["denied", "grüppe-\udc80"])
    assert list(got) == ["denied", "grüppe-\udc80"]
    assert list(got.values()) == describe_response_from_rows([rows[1], rows[0]]).groups
    assert got["denied"].error is Errors.GROUP_AUTHORIZATION_FAILED
    assert got["grüppe-\udc80"].members[1].group_instance_id == "static-1"
    assert type(got["grüppe-\udc80"].members) is list
