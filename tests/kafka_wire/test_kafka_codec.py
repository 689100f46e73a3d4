"""The listener's table and codec glue, without a service: what ApiVersions advertises kio can decode and
encode, frames round-trip, and bad addresses or frames are refused with a clear error."""

from __future__ import annotations

import datetime

import pytest
from kafka_wire_frames import request_frame
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol

from groupcoord.actors import ServiceError, start
from groupcoord.actors.service.kafka import APIS, parse_listener
from groupcoord.actors.service.kafka.apis import api_versions_answer
from groupcoord.actors.service.kafka.codec import (
    MalformedRequest,
    build,
    decode_request,
    encode_response,
    millis,
    peek_header,
    request_class,
    response_class,
)
from groupcoord.protocol import Errors

SERVED = [(k, v) for k, (_, lo, hi, _) in APIS.items() for v in range(lo, hi + 1)]


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=[f"{APIS[k][0]}-v{v}" for k, v in SERVED])
def test_every_advertised_version_has_kio_messages(api_key, version):
    assert request_class(api_key, version).__version__ == version
    assert response_class(api_key, version).__api_key__ == api_key


@pytest.mark.parametrize("version", range(5))
def test_the_api_versions_answer_encodes_at_every_version(version):
    answer = build(response_class(18, version), api_versions_answer(Errors.NONE))
    frame = encode_response(42, answer)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert int.from_bytes(frame[4:8], "big") == 42  # ApiVersions answers always carry header v0
    assert {k.api_key for k in answer.api_keys} == set(APIS)


def test_a_request_frame_decodes_to_its_header_and_body():
    request = JoinGroupRequest(
        group_id="g", session_timeout=datetime.timedelta(milliseconds=10_000), member_id="",
        protocol_type="consumer", protocols=(JoinGroupRequestProtocol(name="range", metadata=b"m"),),
    )
    frame = request_frame(request, correlation_id=9, client_id="me")[4:]
    assert peek_header(frame) == (11, 9, 9)
    header, body = decode_request(frame, 11, 9)
    assert header.client_id == "me" and body.group_id == "g" and millis(body.session_timeout) == 10_000
    assert millis(body.rebalance_timeout) == -1
    with pytest.raises(MalformedRequest, match="bytes left"):
        decode_request(frame + b"\x00", 11, 9)
    with pytest.raises(MalformedRequest):
        decode_request(frame[:-3], 11, 9)
    with pytest.raises(MalformedRequest, match="no header"):
        peek_header(frame[:5])


@pytest.mark.parametrize("address", ["9092", "localhost", "host:", "host:99999", ":9092", "host:-1"])
def test_a_bad_listener_address_is_refused_before_anything_starts(address):
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listener(address)
    with pytest.raises(ServiceError, match="HOST:PORT"):
        start(kafka_listener=address)


def test_listener_addresses_parse():
    assert parse_listener("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listener("[::1]:9092") == ("::1", 9092)
