"""Listings and descriptions cross Ray as flat tuples (100,000 groups are one response) and come back equal."""

from __future__ import annotations

import pickle

from groupcoord.protocol import Errors
from groupcoord.protocol.messages import (
    DescribedGroup,
    DescribedMember,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsResponse,
    describe_response_from_rows,
    described_rows,
    list_response_from_rows,
    listed_rows,
)


def test_a_listing_round_trips_through_pickle_as_flat_tuples():
    listing = ListGroupsResponse(Errors.NONE, [ListedGroup(f"g{i}", "consumer", "Stable", "classic")
                                               for i in range(1000)] + [ListedGroup("c", "", "Empty", "consumer")])
    data = pickle.dumps(listing)
    assert b"ListedGroup" not in data  # not a dataclass per group
    back = pickle.loads(data)
    assert back == listing and type(back.groups[0]) is ListedGroup and back.error is Errors.NONE


def test_an_unusual_listing_still_round_trips():
    odd = ListGroupsResponse(Errors.COORDINATOR_LOAD_IN_PROGRESS, ())  # not a list: pickled the plain way
    assert pickle.loads(pickle.dumps(odd)) == odd
    assert listed_rows(()) is None and listed_rows([("g", "", "Empty", "classic")]) is None


def test_rows_rebuild_equal_frozen_listed_groups():
    rows = [("g", "consumer", "Stable", "classic"), ("k", "consumer", "Reconciling", "consumer")]
    rebuilt = list_response_from_rows(Errors.NONE.value, rows, 7)
    assert rebuilt == ListGroupsResponse(Errors.NONE, [ListedGroup(*r) for r in rows], 7)
    assert listed_rows(rebuilt.groups) == rows
    assert hash(rebuilt.groups[0]) == hash(ListedGroup(*rows[0]))  # frozen: hashable like one built normally


def _described(i: int) -> DescribedGroup:
    members = [DescribedMember(f"m{i}-{j}", None if j else f"instance-{i}", "client", "/10.0.0.1", b"meta", b"\x00a")
               for j in range(2)]
    return DescribedGroup(Errors.NONE, f"g{i}", "Stable", "consumer", "range", members)


def test_a_description_round_trips_through_pickle_as_flat_tuples():
    described = DescribeGroupsResponse([_described(i) for i in range(500)] + [
        DescribedGroup(Errors.NONE, "gone", "Dead", "", "", []),
        DescribedGroup(Errors.GROUP_AUTHORIZATION_FAILED, "secret", "", "", "", []),
    ], throttle_time_ms=3)
    data = pickle.dumps(described)
    assert b"DescribedGroup" not in data and b"DescribedMember" not in data
    back = pickle.loads(data)
    assert back == described and back.groups[-1].error is Errors.GROUP_AUTHORIZATION_FAILED
    first = back.groups[0].members[0]
    assert type(first) is DescribedMember and first.group_instance_id == "instance-0"


def test_an_unusual_description_still_round_trips():
    odd = DescribeGroupsResponse(())  # not a list: pickled the plain way
    assert pickle.loads(pickle.dumps(odd)) == odd and described_rows(()) is None
    plain_error = DescribeGroupsResponse([DescribedGroup(-1, "g", "", "", "", [])])  # an int, not an Errors
    assert described_rows(plain_error.groups) is None and pickle.loads(pickle.dumps(plain_error)) == plain_error
    assert describe_response_from_rows(described_rows([_described(1)])) == DescribeGroupsResponse([_described(1)])
