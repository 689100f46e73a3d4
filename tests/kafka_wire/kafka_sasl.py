"""A service that authorizes, with a SASL_PLAINTEXT Kafka listener, and SASL/PLAIN spoken byte by byte."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafka_wire_frames import connect, decode_response, read_frame, request_frame
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from groupcoord.actors import Credentials

SASL_NAMESPACE = "gc-test-kafka-sasl"
ADMIN = Credentials("User:admin", "operator-secret-" + "k" * 20)


def exchange(sock: socket.socket, request: Any, correlation_id: int = 1) -> Any:
    """Send one request on an open connection; its decoded response (AssertionError if the connection closed)."""
    sock.sendall(request_frame(request, correlation_id))
    frame = read_frame(sock)
    assert frame is not None, f"the listener closed the connection instead of answering {type(request).__name__}"
    got, body = decode_response(frame, request.__api_key__, request.__version__)
    assert got == correlation_id
    return body


def api_versions(sock: socket.socket) -> dict[int, tuple[int, int]]:
    """ApiVersions on this connection: api key -> (min, max)."""
    answer = exchange(sock, ApiVersionsRequest(client_software_name="wire-test", client_software_version="1"))
    assert answer.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


def plain(username: str, password: str, authzid: str = "") -> bytes:
    """PLAIN's token (RFC 4616): authzid NUL username NUL password."""
    return f"{authzid}\0{username}\0{password}".encode()


def handshake(sock: socket.socket, mechanism: str = "PLAIN", version: int = 1) -> Any:
    """SaslHandshake on this connection (v1: SaslAuthenticate follows; v0: a raw token)."""
    cls = SaslHandshakeRequest if version == 1 else SaslHandshakeRequestV0
    return exchange(sock, cls(mechanism=mechanism), correlation_id=2)


def authenticate(sock: socket.socket, token: bytes) -> Any:
    """SaslAuthenticate v2 with this token; its response."""
    return exchange(sock, SaslAuthenticateRequest(auth_bytes=token), correlation_id=3)


def login(bootstrap: str, credentials: Credentials) -> socket.socket:
    """A connection authenticated as `credentials` (ApiVersions, SaslHandshake v1, SaslAuthenticate v2)."""
    sock = connect(bootstrap)
    api_versions(sock)
    assert handshake(sock).error_code == 0
    answer = authenticate(sock, plain(credentials.principal.removeprefix("User:"), credentials.secret))
    assert answer.error_code == 0, answer.error_message
    return sock


def raw_token(sock: socket.socket, token: bytes) -> bytes | None:
    """A handshake-v0 token, unframed by any Kafka header; the server's size-prefixed answer, or None if closed."""
    sock.sendall(struct.pack(">i", len(token)) + token)
    return read_frame(sock)
