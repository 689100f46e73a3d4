"""The Kafka-protocol TCP server: framing, per-connection pipelining in order, dispatch to the API handlers.

A frame is a 4-byte size and that many bytes of request (header, then body). Requests of one
connection are answered in the order they came, as Kafka does; membership and admin requests
start only once every earlier request of the connection is done, while heartbeats, commits,
offset fetches and fetches start at once (they keep their order in the coalescer's FIFO
batches), so a client that pipelines commits is not held to one actor call at a time.
Bad input gets Kafka's answer: ApiVersions at a version it does not know gets the v0 answer
with UNSUPPORTED_VERSION and the table; any other API or version not served, a frame that does
not parse, a size below 0 or above the limit, or a frame that stalls half-sent closes the
connection (Kafka's broker closes it too); no connection can stop the others.
With a verifier (the service authorizes) the listener is SASL_PLAINTEXT: each connection first
authenticates with SASL/PLAIN (sasl.py), one frame at a time, and every later request carries
its principal's credentials to the partition actors.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

from groupcoord.protocol import Errors
from groupcoord.protocol.security.credentials import Credentials

from .apis import API_VERSIONS_KEY, APIS, api_versions_answer, supported
from .bridge import ServiceBridge
from .codec import MalformedRequest, build, decode_request, encode_response, peek_header, response_class
from .context import Endpoint, RequestContext
from .sasl import MAX_RECEIVE_BYTES, SaslSession, State
from .sasl_verifier import PlainVerifier

log = logging.getLogger(__name__)

# Kafka's socket.request.max.bytes.
MAX_FRAME_BYTES = 100 * 1024 * 1024
# How long the rest of a frame may take once its first byte came, and how long a connection may idle
# (Kafka's connections.max.idle.ms is 10 minutes).
FRAME_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 600.0
# Requests of one connection being served at once; past it the connection is not read until one is answered.
MAX_IN_FLIGHT = 256
# After answering a failed SASL login, how long the client has to hang up before the listener closes. A close right
# behind the answer can lose it: kafka-python 3.0 drops bytes that arrive together with the end of the stream.
SASL_FAILURE_LINGER_S = 5.0
# APIs that start at once instead of after every earlier request of their connection.
_CONCURRENT_APIS = frozenset({1, 2, 3, 8, 9, 10, 12, 18, 68})
_SIZE = struct.Struct(">i")


class _Close(Exception):
    """End this connection (after the answers already due)."""


class KafkaListener:
    """Serves Kafka's protocol for one service on (host, port); `start()` binds, `close()` stops."""

    def __init__(
        self,
        bridge: ServiceBridge,
        host: str,
        port: int,
        advertised_host: str | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        frame_timeout_s: float = FRAME_TIMEOUT_S,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        verifier: PlainVerifier | None = None,
    ) -> None:
        self.bridge = bridge
        self.verifier = verifier  # None: a PLAINTEXT listener (the service does not authorize)
        self._authorize = None if verifier is None else verifier.authorize
        self.host = host
        self.port = port
        self.advertised_host = advertised_host or host
        self.max_frame_bytes = max_frame_bytes
        self.frame_timeout_s = frame_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.connections = 0  # open now
        self.requests = 0  # served since start
        self.closed_for_bad_input = 0
        self.handler_failures = 0  # requests that parsed but whose handler raised: bugs, logged with their trace
        self.sasl_closed = 0  # connections closed during SASL authentication (failed, or out of order)
        self.served: dict[str, int] = {}  # "JoinGroup v9" -> requests answered at that version
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()  # connections
        self._requests: set[asyncio.Task] = set()

    @property
    def endpoint(self) -> Endpoint:
        """The address clients are told to use."""
        return Endpoint(self.advertised_host, self.port)

    async def start(self) -> None:
        """Bind and start accepting connections (port 0: a free port, then `self.port` says which)."""
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("Kafka listener on %s:%d (advertised %s)", self.host, self.port, self.advertised_host)

    async def close(self) -> None:
        """Stop accepting, and end every connection."""
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def stats(self) -> dict[str, Any]:
        """Open connections, requests served (in all and by API version), connections closed for bad input,
        handler failures, the security protocol, and (SASL_PLAINTEXT) logins passed, failed and closed."""
        out = {"connections": self.connections, "requests": self.requests,
               "closed_for_bad_input": self.closed_for_bad_input, "handler_failures": self.handler_failures,
               "served": dict(self.served), "security_protocol": "PLAINTEXT" if self.verifier is None else (
                   "SASL_PLAINTEXT")}
        if self.verifier is not None:
            out["sasl"] = {"closed": self.sasl_closed, **self.verifier.stats()}
        return out

    # --- one connection -------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        peer = writer.get_extra_info("peername")
        client_host = f"/{peer[0]}" if peer else "/unknown"
        answers: asyncio.Queue[asyncio.Task] = asyncio.Queue(MAX_IN_FLIGHT)
        sender = asyncio.create_task(self._send(answers, writer))
        try:
            await self._read(reader, answers, client_host, sender)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away (or the sender closed): requests already read still run to their end
        except _Close as e:
            self.closed_for_bad_input += 1
            log.info("closing Kafka connection from %s: %s", client_host, e)
        finally:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
            writer.close()
            self.connections -= 1
            self._tasks.discard(task)

    async def _read(self, reader: asyncio.StreamReader, answers: asyncio.Queue, client_host: str,
                    sender: asyncio.Task) -> None:
        barrier: list[asyncio.Task] = []  # requests not answered yet, which a membership/admin request waits for
        sasl = None if self.verifier is None else SaslSession(self.verifier)
        while True:
            try:
                size_bytes = await asyncio.wait_for(reader.readexactly(4), self.idle_timeout_s)
            except TimeoutError:
                raise _Close(f"idle for {self.idle_timeout_s:.0f} s") from None
            (size,) = _SIZE.unpack(size_bytes)
            limit = self.max_frame_bytes if sasl is None or sasl.complete else min(MAX_RECEIVE_BYTES,
                                                                                  self.max_frame_bytes)
            if size < 0 or size > limit:
                raise _Close(f"frame size {size} outside 0..{limit}")
            try:
                frame = await asyncio.wait_for(reader.readexactly(size), self.frame_timeout_s)
            except TimeoutError:
                raise _Close(f"frame of {size} bytes not complete within {self.frame_timeout_s} s") from None
            if sasl is not None and not sasl.complete:
                if not await self._authenticate(sasl, frame, answers, client_host, sender, reader):
                    return
                continue
            credentials = None if sasl is None else sasl.credentials
            barrier = [t for t in barrier if not t.done()]
            answer = self._dispatch(frame, client_host, barrier, credentials)
            barrier.append(answer)
            # Past MAX_IN_FLIGHT unanswered requests the connection is not read until one is answered.
            queued = asyncio.ensure_future(answers.put(answer))
            await asyncio.wait({queued, sender}, return_when=asyncio.FIRST_COMPLETED)
            if sender.done():
                queued.cancel()
                return

    async def _authenticate(self, sasl: SaslSession, frame: bytes, answers: asyncio.Queue, client_host: str,
                            sender: asyncio.Task, reader: asyncio.StreamReader) -> bool:
        """One frame of a connection that has not authenticated: answered before the next is read (Kafka's
        authenticator takes one at a time); False once the connection is to be closed."""
        framed = sasl.state is not State.AUTHENTICATE_RAW  # a handshake-v0 token has no Kafka header
        step = await sasl.step(frame)
        if framed and step.frame is not None:
            api_key, version, _ = peek_header(frame)
            self._count(APIS[api_key][0], version)
        if step.serve:  # ApiVersions, from the API table
            answer = self._dispatch(frame, client_host, [], None)
            await answers.put(answer)
            data = await asyncio.shield(answer)
            sasl.api_versions_answered(data is not None and supported(API_VERSIONS_KEY, peek_header(frame)[1]))
            return data is not None
        if step.frame is not None:
            await answers.put(self._spawn(_done(step.frame)))
        if not step.close:
            if sasl.complete:
                log.debug("Kafka connection from %s authenticated as %s", client_host,
                          sasl.credentials.principal if sasl.credentials else None)
            return True
        self.sasl_closed += 1
        log.info("closing Kafka connection from %s during SASL authentication: %s", client_host, step.why)
        # The sender writes what is due, then closes: once the client hangs up, if an answer says why.
        linger = SASL_FAILURE_LINGER_S if step.frame is not None else 0.0
        await answers.put(self._spawn(_hung_up(reader, linger)))
        await asyncio.wait({sender}, timeout=self.frame_timeout_s + linger)
        return False

    async def _send(self, answers: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
        while True:
            task = await answers.get()
            data = await asyncio.shield(task)  # a connection that ends does not cancel its requests
            if data is None:
                writer.close()  # the request closes the connection; later answers are not sent
                return
            writer.write(data)
            await writer.drain()

    def _spawn(self, coro: Any) -> asyncio.Task:
        """A request's task, referenced until it ends (it outlives its connection if the client goes away)."""
        task = asyncio.create_task(coro)
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)
        return task

    def _dispatch(self, frame: bytes, client_host: str, earlier: list[asyncio.Task],
                  credentials: Credentials | None) -> asyncio.Task:
        """Start answering one frame: a task giving the response frame, or None to close the connection."""
        try:
            api_key, version, correlation_id = peek_header(frame)
        except MalformedRequest as e:
            return self._spawn(self._refuse(str(e)))
        if api_key == API_VERSIONS_KEY and not supported(api_key, version):
            # KIP-511: a client newer than the server learns the server's versions from a v0 answer.
            body = build(response_class(API_VERSIONS_KEY, 0), api_versions_answer(Errors.UNSUPPORTED_VERSION))
            return self._spawn(_done(encode_response(correlation_id, body)))
        if not supported(api_key, version):
            return self._spawn(self._refuse(f"api key {api_key} version {version} is not served"))
        wait_for = () if api_key in _CONCURRENT_APIS else tuple(earlier)
        return self._spawn(self._answer(frame, api_key, version, correlation_id, client_host, wait_for, credentials))

    async def _refuse(self, why: str) -> None:
        self.closed_for_bad_input += 1
        log.info("closing a Kafka connection: %s", why)
        return None

    async def _answer(self, frame: bytes, api_key: int, version: int, correlation_id: int, client_host: str,
                      wait_for: tuple[asyncio.Task, ...], credentials: Credentials | None) -> bytes | None:
        try:
            header, body = decode_request(frame, api_key, version)
        except MalformedRequest as e:
            return await self._refuse(str(e))
        if wait_for:
            await asyncio.wait(wait_for)
        name, _, _, handler = APIS[api_key]
        session = self.bridge.session(credentials, self._authorize)
        ctx = RequestContext(api_key, version, header.client_id or "", client_host, session, self.endpoint)
        try:
            values = await handler(ctx, body)
            # A principal's throttle time (its request quota, or a partition actor past capacity) reaches its Kafka
            # client as it reaches GroupMember. Without SASL the listener reports 0, as before: passing on the
            # overload throttle to every Kafka client is issue 30's decision to take.
            if credentials is not None and session.throttle_ms > values.get("throttle_time", session.throttle_ms):
                values["throttle_time"] = session.throttle_ms
            data = encode_response(correlation_id, build(response_class(api_key, version), values))
        except Exception:
            self.handler_failures += 1
            log.exception("%s v%d from %s failed; closing the connection", name, version, client_host)
            return None
        self._count(name, version)
        return data

    def _count(self, name: str, version: int) -> None:
        self.requests += 1
        key = f"{name} v{version}"
        self.served[key] = self.served.get(key, 0) + 1


async def _done(value: Any) -> Any:
    return value


async def _hung_up(reader: asyncio.StreamReader, seconds: float) -> None:
    """None once the client has closed its end (what it sends meanwhile is dropped) or `seconds` have passed."""
    try:
        async with asyncio.timeout(seconds):
            while await reader.read(65536):
                pass
    except (TimeoutError, ConnectionError):
        pass
