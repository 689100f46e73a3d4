"""A small Kafka wire client for the harness: kio's message dataclasses, our own framing.

`KafkaConnection` sends any request dataclass of `kio.schema` (any API, any version kio knows) to
one broker over a blocking socket and decodes the answer with kio. Requests may be pipelined
(`send` several, then `receive` each); a broker answers one connection's requests in order.
`request_class("join_group", 9)` finds the dataclass of an API version by Kafka's snake_case name.
"""

from __future__ import annotations

import io
import logging
import select
import socket
import struct
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from kio.index import load_entity_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32

logger = logging.getLogger(__name__)

API_VERSIONS_KEY = 18  # its response header is always v0, whatever the version (KIP-511)
_SIZE = struct.Struct(">i")
_CID = struct.Struct(">i")  # a request's correlation id: bytes 8-12 of its frame


class WireError(RuntimeError):
    """The connection broke, timed out, or carried a frame that does not decode."""


def request_class(api: str, version: int) -> type:
    """The kio request dataclass of `api` (Kafka's name in snake_case, e.g. "join_group") at `version`."""
    return load_entity_schema(api, version, EntityType.request)


def nested_class(cls: type, name: str) -> type:
    """A structure kio defines beside the message `cls` (e.g. a request's "MetadataRequestTopic")."""
    return getattr(sys.modules[cls.__module__], name)


def response_class(api: str, version: int) -> type:
    """The kio response dataclass of `api` at `version`."""
    return load_entity_schema(api, version, EntityType.response)


def response_type_of(request: Any) -> type:
    """The kio response dataclass answering `request`."""
    from kio.index import load_response_from_request

    return load_response_from_request(type(request))


def encode_request(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    """One framed request: size, header (v2 for flexible versions, else v1) and body."""
    buf = io.BytesIO()
    header_kwargs = dict(request_api_key=i16(request.__api_key__), request_api_version=i16(request.__version__),
                         correlation_id=i32(correlation_id), client_id=client_id)
    if request.__flexible__:
        entity_writer(RequestHeaderV2)(buf, RequestHeaderV2(**header_kwargs))
    else:
        entity_writer(RequestHeaderV1)(buf, RequestHeaderV1(**header_kwargs))
    entity_writer(type(request))(buf, request)
    body = buf.getvalue()
    return _SIZE.pack(len(body)) + body


def decode_response(response_type: type, frame: bytes) -> tuple[int, Any]:
    """Decode one response frame (without its size): the correlation id and the response dataclass."""
    flexible_header = response_type.__flexible__ and response_type.__api_key__ != API_VERSIONS_KEY
    header_type = ResponseHeaderV1 if flexible_header else ResponseHeaderV0
    view = memoryview(frame)
    header, used = entity_reader(header_type)(view, 0)
    body, used_body = entity_reader(response_type)(view, used)
    if used + used_body != len(frame):
        raise WireError(f"{response_type.__name__}: {len(frame) - used - used_body} bytes left after decoding")
    return header.correlation_id, body


@dataclass
class _Pending:
    correlation_id: int
    response_type: type
    sent_at: float


class KafkaConnection:
    """One blocking TCP connection to a broker; requests pipelined, answers decoded in order."""

    def __init__(self, address: str, client_id: str | None = "groupcoord-harness", timeout: float = 30.0) -> None:
        host, _, port = address.rpartition(":")
        self.address = address
        self.client_id = client_id
        self.timeout = timeout
        self._sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._poller = select.poll()
        self._poller.register(self._sock, select.POLLIN)
        self._buffer = bytearray()
        self._pending: deque[_Pending] = deque()
        self._next_id = 1

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the socket; answers still in flight are dropped."""
        try:
            self._sock.close()
        finally:
            self._pending.clear()

    @property
    def in_flight(self) -> int:
        """How many sent requests have no answer yet."""
        return len(self._pending)

    def send(self, request: Any) -> int:
        """Send one request without waiting; returns its correlation id."""
        cid = self._next_id
        self._next_id += 1
        frame = encode_request(request, cid, self.client_id)
        try:
            self._sock.sendall(frame)
        except OSError as e:
            raise WireError(f"send to {self.address} failed: {e}") from e
        self._pending.append(_Pending(cid, response_type_of(request), time.monotonic()))
        return cid

    def send_encoded(self, frame: bytes, response_type: type) -> int:
        """Send a frame of `encode_request` again under a new correlation id (no re-encoding: for load)."""
        cid = self._next_id
        self._next_id += 1
        try:
            self._sock.sendall(frame[:8] + _CID.pack(cid) + frame[12:])
        except OSError as e:
            raise WireError(f"send to {self.address} failed: {e}") from e
        self._pending.append(_Pending(cid, response_type, time.monotonic()))
        return cid

    def poll(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the oldest answer to be complete; True if it is."""
        deadline = time.monotonic() + timeout
        while not self._frame_ready():
            remaining = max(0.0, deadline - time.monotonic())
            # poll, not select: a process holding a thousand connections (and Ray's) has descriptors past 1024
            if self._poller.poll(remaining * 1000):
                self._read_some()
            elif remaining <= 0:
                return False
        return True

    def receive(self, timeout: float | None = None) -> Any:
        """The answer to the oldest request in flight (waits up to `timeout`, else the connection's)."""
        if not self._pending:
            raise WireError("nothing in flight")
        if not self.poll(self.timeout if timeout is None else timeout):
            raise WireError(f"no answer from {self.address} within {timeout or self.timeout} s")
        size = _SIZE.unpack_from(self._buffer)[0]
        frame = bytes(self._buffer[4:4 + size])
        del self._buffer[:4 + size]
        pending = self._pending.popleft()
        try:
            cid, response = decode_response(pending.response_type, frame)
        except Exception as e:  # kio raises several types for a bad frame; all mean the same here
            raise WireError(f"{pending.response_type.__name__} does not decode: {e}") from e
        if cid != pending.correlation_id:
            raise WireError(f"correlation id {cid}, expected {pending.correlation_id}")
        return response

    def request(self, request: Any, timeout: float | None = None) -> Any:
        """Send one request and wait for its answer."""
        self.send(request)
        while len(self._pending) > 1:  # answers to earlier pipelined requests are dropped
            self.receive(timeout)
        return self.receive(timeout)

    def _frame_ready(self) -> bool:
        return len(self._buffer) >= 4 and len(self._buffer) >= 4 + _SIZE.unpack_from(self._buffer)[0]

    def _read_some(self) -> None:
        try:
            chunk = self._sock.recv(1 << 20)
        except OSError as e:
            raise WireError(f"receive from {self.address} failed: {e}") from e
        if not chunk:
            raise WireError(f"{self.address} closed the connection")
        self._buffer += chunk


def api_versions(conn: KafkaConnection) -> dict[int, tuple[int, int]]:
    """The broker's supported versions: api key -> (min, max)."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    response = conn.request(ApiVersionsRequest(client_software_name="groupcoord-harness",
                                               client_software_version="1"))
    if response.error_code.value != 0:
        raise WireError(f"ApiVersions failed: {response.error_code}")
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
