"""How a batch crosses Ray (actors/client/wire.py): our requests and responses as the C pickler's bytes, anything
else the cloudpickle way, and a plain list on arrival either way."""

from __future__ import annotations

import dataclasses
import pickle
import sys

import pytest
import ray.cloudpickle as cloudpickle

from groupcoord.actors.client.wire import OnePickle
from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.messages import HeartbeatRequest, HeartbeatResponse, OffsetCommitRequest


def test_a_batch_of_our_requests_and_responses_travels_as_the_c_picklers_bytes():
    calls = [
        ("heartbeat", HeartbeatRequest("wire-group", 3, "member-1")),
        ("heartbeat", HeartbeatRequest("wire-group", 3, "member-2", "static-2")),
        ("commit_offsets", OffsetCommitRequest("wire-group", {TopicPartition("t", 0): OffsetAndMetadata(5)})),
    ]
    for batch in (calls, [HeartbeatResponse(Errors.NONE)] * 3 + [HeartbeatResponse(Errors.UNKNOWN_MEMBER_ID)]):
        sent = OnePickle(batch)
        rebuild, (data,) = sent.__reduce__()
        assert rebuild is pickle.loads and type(data) is bytes  # one C pickle, no cloudpickle call per element
        arrived = cloudpickle.loads(cloudpickle.dumps(sent))  # as Ray sends it
        assert type(arrived) is list and arrived == batch


@dataclasses.dataclass(frozen=True)
class _Script:
    x: int


def test_a_batch_holding_a_type_of_the_callers_own_goes_the_cloudpickle_way(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class Local:  # defined in a function: the C pickler refuses it, cloudpickle sends it by value
        x: int

    # A class of the caller's script: the C pickler would name it __main__._Script, which the actor cannot import.
    monkeypatch.setattr(_Script, "__module__", "__main__")
    monkeypatch.setattr(sys.modules["__main__"], "_Script", _Script, raising=False)
    for own in (Local(1), _Script(1)):
        batch = [("heartbeat", HeartbeatRequest("wire-group", 1, "member-1")), ("heartbeat", own)]
        sent = OnePickle(batch)
        assert sent.__reduce__()[0] is list
        arrived = cloudpickle.loads(cloudpickle.dumps(sent))
        assert type(arrived) is list and arrived[0] == batch[0] and arrived[1][1].x == 1


def test_a_heartbeat_request_unpickles_equal_hashable_and_frozen():
    for req in (HeartbeatRequest("wire-group", 7, "member-1"), HeartbeatRequest("wire-group", -1, "", "static-1")):
        back = pickle.loads(pickle.dumps(req))
        assert type(back) is HeartbeatRequest and back == req and hash(back) == hash(req)
        with pytest.raises(dataclasses.FrozenInstanceError):
            back.generation_id = 8  # type: ignore[misc]
