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
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

from groupcoord.protocol import Errors

from .apis import API_VERSIONS_KEY, APIS, api_versions_answer, supported
from .bridge import ServiceBridge
from .codec import MalformedRequest, build, decode_request, encode_response, peek_header, response_class
from .context import Endpoint, RequestContext

log = logging.getLogger(__name__)

# Kafka's socket.request.max.bytes.
MAX_FRAME_BYTES = 100 * 1024 * 1024
# How long the rest of a frame may take once its first byte came, and how long a connection may idle
# (Kafka's connections.max.idle.ms is 10 minutes).
FRAME_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 600.0
# Requests of one connection being served at once; past it the connection is not read until one is answered.
MAX_IN_FLIGHT = 256
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
    ) -> None:
        self.bridge = bridge
        self.host = host
        self.port = port
        self.advertised_host = advertised_host or host
        self.max_frame_bytes = max_frame_bytes
        self.frame_timeout_s = frame_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.connections = 0  # open now
        self.requests = 0  # served since start
        self.closed_for_bad_input = 0
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()

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

    def stats(self) -> dict[str, int]:
        """Open connections, requests served, connections closed for bad input."""
        return {"connections": self.connections, "requests": self.requests,
                "closed_for_bad_input": self.closed_for_bad_input}

    # --- one connection -------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        peer = writer.get_extra_info("peername")
        client_host = f"/{peer[0]}" if peer else "/unknown"
        answers: asyncio.Queue[asyncio.Task | None] = asyncio.Queue(MAX_IN_FLIGHT)
        sender = asyncio.create_task(self._send(answers, writer))
        try:
            await self._read(reader, answers, client_host, sender)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except _Close as e:
            self.closed_for_bad_input += 1
            log.info("closing Kafka connection from %s: %s", client_host, e)
        finally:
            await answers.put(None)
            try:
                await sender
            except Exception as e:  # the sender's own failures end only this connection
                log.debug("Kafka connection from %s: %r", client_host, e)
            writer.close()
            self.connections -= 1
            self._tasks.discard(task)

    async def _read(self, reader: asyncio.StreamReader, answers: asyncio.Queue, client_host: str,
                    sender: asyncio.Task) -> None:
        barrier: list[asyncio.Task] = []  # requests not answered yet, which a membership/admin request waits for
        while not sender.done():
            try:
                size_bytes = await asyncio.wait_for(reader.readexactly(4), self.idle_timeout_s)
            except TimeoutError:
                raise _Close(f"idle for {self.idle_timeout_s:.0f} s") from None
            (size,) = _SIZE.unpack(size_bytes)
            if size < 0 or size > self.max_frame_bytes:
                raise _Close(f"frame size {size} outside 0..{self.max_frame_bytes}")
            try:
                frame = await asyncio.wait_for(reader.readexactly(size), self.frame_timeout_s)
            except TimeoutError:
                raise _Close(f"frame of {size} bytes not complete within {self.frame_timeout_s} s") from None
            answer = self._dispatch(frame, client_host, [t for t in barrier if not t.done()])
            barrier = [t for t in barrier if not t.done()] + [answer]
            await answers.put(answer)

    async def _send(self, answers: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
        while True:
            task = await answers.get()
            if task is None:
                return
            data = await task
            if data is None:
                writer.close()  # the request closes the connection; later answers are not sent
                return
            writer.write(data)
            await writer.drain()

    def _dispatch(self, frame: bytes, client_host: str, earlier: list[asyncio.Task]) -> asyncio.Task:
        """Start answering one frame: a task giving the response frame, or None to close the connection."""
        try:
            api_key, version, correlation_id = peek_header(frame)
        except MalformedRequest as e:
            return asyncio.create_task(self._refuse(str(e)))
        if api_key == API_VERSIONS_KEY and not supported(api_key, version):
            # KIP-511: a client newer than the server learns the server's versions from a v0 answer.
            body = build(response_class(API_VERSIONS_KEY, 0), api_versions_answer(Errors.UNSUPPORTED_VERSION))
            return asyncio.create_task(_done(encode_response(correlation_id, body)))
        if not supported(api_key, version):
            return asyncio.create_task(self._refuse(f"api key {api_key} version {version} is not served"))
        wait_for = () if api_key in _CONCURRENT_APIS else tuple(earlier)
        return asyncio.create_task(self._answer(frame, api_key, version, correlation_id, client_host, wait_for))

    async def _refuse(self, why: str) -> None:
        self.closed_for_bad_input += 1
        log.info("closing a Kafka connection: %s", why)
        return None

    async def _answer(self, frame: bytes, api_key: int, version: int, correlation_id: int, client_host: str,
                      wait_for: tuple[asyncio.Task, ...]) -> bytes | None:
        try:
            header, body = decode_request(frame, api_key, version)
        except MalformedRequest as e:
            return await self._refuse(str(e))
        if wait_for:
            await asyncio.wait(wait_for)
        name, _, _, handler = APIS[api_key]
        ctx = RequestContext(api_key, version, header.client_id or "", client_host, self.bridge, self.endpoint)
        try:
            values = await handler(ctx, body)
            data = encode_response(correlation_id, build(response_class(api_key, version), values))
        except Exception:
            log.exception("%s v%d from %s failed; closing the connection", name, version, client_host)
            return None
        self.requests += 1
        return data


async def _done(value: Any) -> Any:
    return value
