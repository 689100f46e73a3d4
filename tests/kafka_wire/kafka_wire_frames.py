"""Raw Kafka frames over a socket, for the tests that speak the protocol byte by byte (kio builds the messages)."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer


def connect(bootstrap: str, timeout_s: float = 10.0) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout_s)


def request_frame(request: Any, correlation_id: int = 1, client_id: str = "wire-test") -> bytes:
    """A whole frame (size, header, body) for a kio request dataclass."""
    header_cls = request.__header_schema__
    header = header_cls(request_api_key=request.__api_key__, request_api_version=request.__version__,
                        correlation_id=correlation_id, client_id=client_id)
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, header)
    entity_writer(type(request))(buffer, request)
    body = buffer.getvalue()
    return struct.pack(">i", len(body)) + body


def raw_frame(api_key: int, version: int, correlation_id: int, rest: bytes) -> bytes:
    """A frame whose header starts with the given key, version and id, followed by arbitrary bytes."""
    body = struct.pack(">hhi", api_key, version, correlation_id) + rest
    return struct.pack(">i", len(body)) + body


def read_frame(sock: socket.socket) -> bytes | None:
    """The next response frame's bytes, or None if the server closed the connection."""
    size = _read_exactly(sock, 4)
    if size is None:
        return None
    return _read_exactly(sock, struct.unpack(">i", size)[0])


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def decode_response(frame: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """(correlation id, kio response) of a response frame."""
    cls = load_response_schema(api_key, version)
    header, used = entity_reader(cls.__header_schema__)(frame, 0)
    body, _ = entity_reader(cls)(frame, used)
    return header.correlation_id, body


def call(bootstrap: str, request: Any, correlation_id: int = 1) -> Any:
    """Send one request on a new connection and return its decoded response."""
    with connect(bootstrap) as sock:
        sock.sendall(request_frame(request, correlation_id))
        frame = read_frame(sock)
    assert frame is not None, "the listener closed the connection"
    got, body = decode_response(frame, request.__api_key__, request.__version__)
    assert got == correlation_id
    return body


def request_class(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)
