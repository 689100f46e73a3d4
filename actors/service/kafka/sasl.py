"""SASL/PLAIN on the Kafka listener: one connection's authentication, step by step, as Kafka's broker runs it.

With authorization on, the listener is a SASL_PLAINTEXT listener and each connection starts here
(Kafka's SaslServerAuthenticator): ApiVersions (at most once) and SaslHandshake are served, then
SaslAuthenticate (handshake v1) or one raw token (handshake v0) carries PLAIN's
"authzid NUL username NUL password". Username "billing" is the principal "User:billing", checked
against the service's principals. Anything else before authentication closes the connection;
an unsupported mechanism and a failed authentication are answered, then the connection is closed.
Once authenticated, every later request carries that principal's credentials.
"""

from __future__ import annotations

import enum
import logging
import struct
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from groupcoord.protocol import Errors
from groupcoord.protocol.security.credentials import Credentials

from .codec import MalformedRequest, build, decode_request, encode_response, peek_header, response_class

log = logging.getLogger(__name__)

_API_VERSIONS_KEY = 18  # (apis.py's, which imports this module)
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
HANDSHAKE_VERSIONS = (0, 1)
AUTHENTICATE_VERSIONS = (0, 2)
MECHANISMS = ("PLAIN",)
# Kafka's sasl.server.max.receive.size: the largest frame an unauthenticated connection may send.
MAX_RECEIVE_BYTES = 512 * 1024

# Verifies (principal, password): the Credentials to send on, or None.
Verifier = Callable[[str, str], Awaitable[Credentials | None]]


class SaslAuthenticationFailed(Exception):
    """PLAIN's exchange failed; the message is the one Kafka's PlainSaslServer gives the client."""


class State(enum.Enum):
    """Where a connection is in Kafka's SASL exchange."""

    HANDSHAKE_OR_VERSIONS = "handshake or versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"  # SaslAuthenticate requests (handshake v1)
    AUTHENTICATE_RAW = "authenticate raw"  # one unframed token (handshake v0)
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True)
class Step:
    """What the listener does with one frame: send `frame` (if any), hand the request to the API table
    (`serve`, for ApiVersions), and close the connection after (`close`, with `why` for the log)."""

    frame: bytes | None = None
    serve: bool = False
    close: bool = False
    why: str = ""


def plain_token(token: bytes) -> tuple[str, str, str]:
    """(authzid, username, password) of a PLAIN token (RFC 4616); SaslAuthenticationFailed with Kafka's message."""
    parts = token.decode("utf-8", errors="replace").split("\0", 3)
    if len(parts) != 3:
        raise SaslAuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
    authzid, username, password = parts
    if not username:
        raise SaslAuthenticationFailed("Authentication failed: username not specified")
    if not password:
        raise SaslAuthenticationFailed("Authentication failed: password not specified")
    return authzid, username, password


class SaslSession:
    """One connection's SASL state: `step(frame)` for each frame until `credentials` is set (or it fails)."""

    def __init__(self, verify: Verifier) -> None:
        self.verify = verify
        self.state = State.HANDSHAKE_OR_VERSIONS
        self.credentials: Credentials | None = None

    @property
    def complete(self) -> bool:
        """Whether the connection has authenticated."""
        return self.state is State.COMPLETE

    async def step(self, frame: bytes) -> Step:
        """The answer to one frame received before authentication completed."""
        if self.state is State.AUTHENTICATE_RAW:
            return await self._raw_token(frame)
        try:
            api_key, version, correlation_id = peek_header(frame)
        except MalformedRequest as e:
            return self._fail(str(e))
        if self.state is State.AUTHENTICATE:
            if api_key != SASL_AUTHENTICATE_KEY:
                return self._fail(f"unexpected Kafka request of api key {api_key} during SASL authentication")
            return await self._authenticate(frame, version, correlation_id)
        if api_key == _API_VERSIONS_KEY:
            if self.state is not State.HANDSHAKE_OR_VERSIONS:
                return self._fail("a second ApiVersions request during the SASL handshake")
            return Step(serve=True)
        if api_key != SASL_HANDSHAKE_KEY:
            return self._fail(f"unexpected Kafka request of api key {api_key} during SASL handshake")
        return self._handshake(frame, version, correlation_id)

    def api_versions_answered(self, ok: bool) -> None:
        """ApiVersions was answered: a good answer moves on to the handshake (an UNSUPPORTED_VERSION one
        lets the client ask again at v0, as KIP-511 has it)."""
        if ok and self.state is State.HANDSHAKE_OR_VERSIONS:
            self.state = State.HANDSHAKE

    def _fail(self, why: str, frame: bytes | None = None) -> Step:
        self.state = State.FAILED
        return Step(frame=frame, close=True, why=why)

    def _handshake(self, frame: bytes, version: int, correlation_id: int) -> Step:
        if not HANDSHAKE_VERSIONS[0] <= version <= HANDSHAKE_VERSIONS[1]:
            return self._fail(f"SaslHandshake v{version} is not served")
        try:
            _, body = decode_request(frame, SASL_HANDSHAKE_KEY, version)
        except MalformedRequest as e:
            return self._fail(str(e))
        if body.mechanism not in MECHANISMS:
            answer = _response(SASL_HANDSHAKE_KEY, version, correlation_id,
                               {"error_code": Errors.UNSUPPORTED_SASL_MECHANISM, "mechanisms": list(MECHANISMS)})
            return self._fail(f"unsupported SASL mechanism {body.mechanism[:100]!r}", answer)
        self.state = State.AUTHENTICATE if version >= 1 else State.AUTHENTICATE_RAW
        return Step(frame=_response(SASL_HANDSHAKE_KEY, version, correlation_id,
                                    {"error_code": Errors.NONE, "mechanisms": list(MECHANISMS)}))

    async def _authenticate(self, frame: bytes, version: int, correlation_id: int) -> Step:
        if not AUTHENTICATE_VERSIONS[0] <= version <= AUTHENTICATE_VERSIONS[1]:
            return self._fail(f"SaslAuthenticate v{version} is not served")
        try:
            _, body = decode_request(frame, SASL_AUTHENTICATE_KEY, version)
        except MalformedRequest as e:
            return self._fail(str(e))
        try:
            await self._check(body.auth_bytes)
        except SaslAuthenticationFailed as e:
            answer = _response(SASL_AUTHENTICATE_KEY, version, correlation_id, {
                "error_code": Errors.SASL_AUTHENTICATION_FAILED, "error_message": str(e), "auth_bytes": b"",
                "session_lifetime": 0})
            return self._fail(str(e), answer)
        return Step(frame=_response(SASL_AUTHENTICATE_KEY, version, correlation_id, {
            "error_code": Errors.NONE, "error_message": None, "auth_bytes": b"", "session_lifetime": 0}))

    async def _raw_token(self, token: bytes) -> Step:
        try:
            await self._check(token)
        except SaslAuthenticationFailed as e:
            return self._fail(str(e))  # handshake v0 has no frame to carry an error: Kafka just closes
        return Step(frame=struct.pack(">i", 0))  # PLAIN's empty server token, size-prefixed

    async def _check(self, token: bytes) -> None:
        authzid, username, password = plain_token(token)
        credentials = None if ":" in username else await self.verify(f"User:{username}", password)
        if credentials is None:
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.credentials = credentials
        self.state = State.COMPLETE


def _response(api_key: int, version: int, correlation_id: int, values: dict[str, Any]) -> bytes:
    return encode_response(correlation_id, build(response_class(api_key, version), values))


async def illegal_handshake(ctx: Any, req: Any) -> dict:
    """SaslHandshake once authenticated, or on a listener without SASL: ILLEGAL_SASL_STATE (Kafka's KafkaApis)."""
    return {"error_code": Errors.ILLEGAL_SASL_STATE, "mechanisms": []}


async def illegal_authenticate(ctx: Any, req: Any) -> dict:
    """SaslAuthenticate once authenticated, or on a listener without SASL: ILLEGAL_SASL_STATE (Kafka's KafkaApis)."""
    return {"error_code": Errors.ILLEGAL_SASL_STATE, "auth_bytes": b"", "session_lifetime": 0,
            "error_message": "SaslAuthenticate request received after successful authentication"
            if ctx.bridge.credentials is not None else "SaslAuthenticate request received on a listener without SASL "
            "(authorization is off: connect with security.protocol=PLAINTEXT)"}
