"""ListGroups answers cross Ray as flat tuples (a listing of 100,000 groups is one of them) and come back equal."""

from __future__ import annotations

import pickle

from groupcoord.protocol import Errors
from groupcoord.protocol.messages import ListedGroup, ListGroupsResponse


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
