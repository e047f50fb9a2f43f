"""The asyncio network layer: size-prefixed frames in, responses out, in request order.

Thin on purpose: :mod:`sluice.server.connection` receives the frames (without copying
them), this module decodes header and body through ``sluice.protocol``, calls the API's
handler with the connection's context (who the client is; for the broker, its
``RequestContext``) and writes the encoded response.
Responses go out in request order. Like Kafka it handles one request per connection
at a time, with one exception: Produce requests are pipelined. Each is appended when
it arrives, and while one waits for its acknowledgement (acks=all: the high watermark)
the next is read and appended, up to ``MAX_PIPELINED_PRODUCES`` waiting; their answers
are written in order. A Produce answered at once with no answer ahead of it (acks=1,
or acks=all on a single node) is written straight away, without a task. An answer that
waits (a parked Fetch, an acks=all Produce; :class:`~sluice.server.answer.Answer`) is
written inside whatever sets it, when it is its turn and holds no file region, not a
loop turn later by its task. Any other request first waits until every earlier answer
is written. Oversized or malformed frames, unknown APIs and unsupported versions close
that connection; the broker keeps serving.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, Self, TypeVar

from sluice.protocol import (
    ProtocolError,
    Request,
    UnsupportedApiVersionsError,
    VersionTable,
    decode_request,
    encode_response_segments,
)
from sluice.server.answer import Answer
from sluice.server.congestion import set_on_loopback
from sluice.server.connection import KafkaConnectionProtocol, ResponseWriter
from sluice.server.sendfile import holds_file_region, write_segments

__all__ = ["ClientContext", "ClientIdentity", "Handler", "KafkaServer"]

log = logging.getLogger(__name__)


class ClientContext(Protocol):
    """What a handler is given besides the request: at least who sent it."""

    @property
    def client_id(self) -> str | None: ...

    def for_client(self, client_id: str | None, client_host: str) -> Self:
        """This context for the requests of one client (``client_host``: ``/127.0.0.1``)."""


Ctx = TypeVar("Ctx", bound=ClientContext)

Handler = Callable[[Ctx, Request], Any]
"""Maps a context and a decoded request to a kio response dataclass, an awaitable of one,
or None for no response."""


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """The smallest context: only the client's identity (a server without a broker)."""

    client_id: str | None = None
    client_host: str = ""

    def for_client(self, client_id: str | None, client_host: str) -> ClientIdentity:
        return ClientIdentity(client_id, client_host)


MAX_PIPELINED_PRODUCES = 32
_PRODUCE = 0


class _Connection(Generic[Ctx]):
    __slots__ = ("context", "failed", "flusher", "host", "last_active", "peer", "pending",
                 "writer")  # fmt: skip

    def __init__(self, writer: ResponseWriter, peer: str, host: str) -> None:
        self.writer = writer
        self.peer = peer
        self.host = host  # as Kafka shows a client's address: /127.0.0.1
        self.context: Ctx | None = None  # for the client id of its latest request
        self.last_active = time.monotonic()
        # Produce answers not written yet, oldest first, and the task writing them.
        # (correlation id, answer): not the request, whose frame buffer is then reusable.
        self.pending: collections.deque[tuple[int, asyncio.Future[Any]]] = collections.deque()
        self.flusher: asyncio.Task[None] | None = None
        self.failed = False


class KafkaServer(Generic[Ctx]):
    """Accepts Kafka clients on one listener and serves them with ``handlers``, each
    called with ``context`` for the connection and client id of the request."""

    def __init__(
        self,
        host: str,
        port: int,
        handlers: dict[int, Handler[Ctx]],
        versions: VersionTable,
        max_request_size: int,
        idle_timeout_ms: int,
        context: Ctx,
        raw_handlers: dict[int, Any] | None = None,
        loopback_congestion: str = "",
    ) -> None:
        self.host = host
        self._context = context
        self._loopback_congestion = loopback_congestion  # sluice.server.congestion
        # API key -> fn(frame) -> framed response bytes, for APIs kio has no schema for
        # (the controller's inter-broker requests); cluster mode only.
        self._raw_handlers = raw_handlers or {}
        self.port = port
        self._handlers = handlers
        self._versions = versions
        self._max_request_size = max_request_size
        self._idle_timeout_s = idle_timeout_ms / 1000 if idle_timeout_ms > 0 else None
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection[Ctx]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._reaper: asyncio.Task[None] | None = None
        # time.monotonic() when a connection was last accepted or a request last read
        self.last_active_at = float("-inf")

    async def start(self) -> None:
        max_frame = self._max_request_size
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: KafkaConnectionProtocol(max_frame, self._accept),
            self.host,
            self.port,
            reuse_address=True,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        if self._idle_timeout_s is not None:
            self._reaper = asyncio.create_task(self._close_idle_connections())

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    async def drain_and_close(self, timeout_s: float) -> None:
        """Wait (bounded) for requests in flight to be answered, then close connections."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            log.warning("closing with %d requests still in flight", self._busy)
        if self._reaper is not None:
            self._reaper.cancel()
        for conn in list(self._connections):
            conn.writer.close()
        if self._tasks:  # closed transports end their read loops; wait for them
            await asyncio.wait(list(self._tasks), timeout=timeout_s)
        if self._server is not None:
            await self._server.wait_closed()

    def abort(self) -> None:
        """Drop everything at once, as a killed process would: no answers in flight."""
        if self._server is not None:
            self._server.close()
        if self._reaper is not None:
            self._reaper.cancel()
        for conn in list(self._connections):
            conn.writer.transport.abort()
            if conn.flusher is not None:
                conn.flusher.cancel()
        for task in list(self._tasks):
            task.cancel()

    async def _close_idle_connections(self) -> None:
        assert self._idle_timeout_s is not None
        period = min(max(self._idle_timeout_s / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(period)
            cutoff = time.monotonic() - self._idle_timeout_s
            for conn in list(self._connections):
                if conn.last_active < cutoff:
                    log.info("closing idle connection from %s", conn.peer)
                    conn.writer.close()

    def _accept(self, protocol: KafkaConnectionProtocol) -> None:
        """A client connected: serve its frames in a task of its own."""
        self.last_active_at = time.monotonic()
        if self._loopback_congestion:
            set_on_loopback(protocol.transport, self._loopback_congestion)
        task = asyncio.ensure_future(self._serve(protocol))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, protocol: KafkaConnectionProtocol) -> None:
        writer = protocol.writer
        assert writer is not None
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        conn: _Connection[Ctx] = _Connection(writer, peer, f"/{peername[0]}" if peername else "")
        self._connections.add(conn)
        try:
            while True:
                frame = await protocol.next_frame()
                if frame is None:
                    return
                conn.last_active = self.last_active_at = time.monotonic()
                if not await self._handle_frame(frame, conn):
                    return
                del frame  # lets the connection reuse the frame's buffer
        except ConnectionError:
            return
        finally:
            self._connections.discard(conn)
            writer.close()

    async def _write_pending(self, conn: _Connection[Ctx]) -> None:
        """Write pipelined Produce answers in request order as they complete."""
        while conn.pending:
            correlation_id, answer = conn.pending[0]
            try:
                await _send(conn, correlation_id, answer, await answer)
            except Exception as exc:
                if not isinstance(exc, ConnectionError):
                    log.exception("error answering a produce request from %s", conn.peer)
                conn.failed = True
                conn.writer.close()
                for _, later in conn.pending:
                    later.cancel()
                self._done(len(conn.pending))
                conn.pending.clear()
                return
            conn.pending.popleft()
            self._done(1)
            conn.last_active = time.monotonic()

    def _done(self, count: int) -> None:
        self._busy -= count
        if self._busy == 0:
            self._idle.set()

    async def _written(self, conn: _Connection[Ctx]) -> bool:
        """Wait until every pipelined answer is written; False if the connection failed."""
        flusher = conn.flusher
        if flusher is not None and not flusher.done():
            await asyncio.shield(flusher)
        return not conn.failed

    def _pipeline(self, conn: _Connection[Ctx], request: Request, answer: Any) -> None:
        self._busy += 1  # until its answer is written
        correlation_id = request.header.correlation_id
        if type(answer) is Answer and not answer.done():
            answer.write_when_set(functools.partial(self._write_head, conn, correlation_id))
        conn.pending.append((correlation_id, asyncio.ensure_future(answer)))
        if conn.flusher is None or conn.flusher.done():
            conn.flusher = asyncio.ensure_future(self._write_pending(conn))

    def _write_head(
        self, conn: _Connection[Ctx], correlation_id: int, answer: Answer, result: Any
    ) -> None:
        """A pipelined Produce answer was set: written now if it is the oldest unwritten
        one (the flusher then only takes it off the queue)."""
        if conn.pending and conn.pending[0][1] is answer:
            self._write_now(conn, correlation_id, answer, result)

    def _write_now(
        self, conn: _Connection[Ctx], correlation_id: int, answer: Answer, result: Any
    ) -> None:
        """Write ``answer`` from inside whatever set it, if it can go without waiting: the
        connection is open and the answer holds no file region (those are sent by the
        task, with ``sendfile``). Its segments are kept for the task otherwise."""
        if result is None or conn.failed or conn.writer.transport.is_closing():
            return
        try:
            segments = encode_response_segments(correlation_id, result)
        except Exception:  # the task encodes it again, and reports and closes
            return
        if holds_file_region(segments):
            answer.encoded = segments
            return
        conn.writer.writelines(segments)
        answer.written = True

    async def _handle_frame(self, frame: memoryview | bytes, conn: _Connection[Ctx]) -> bool:
        """Answer one request; False closes the connection."""
        self._busy += 1
        self._idle.clear()
        try:
            is_produce = len(frame) >= 2 and frame[0] == 0 and frame[1] == _PRODUCE
            if not is_produce and not await self._written(conn):
                return False
            if self._raw_handlers and len(frame) >= 10:
                raw = self._raw_handlers.get(int.from_bytes(frame[0:2], "big", signed=True))
                if raw is not None:
                    try:
                        reply = raw(bytes(frame))
                        if inspect.isawaitable(reply):
                            reply = await reply
                    except Exception:
                        log.exception("error handling an inter-broker request from %s", conn.peer)
                        return False
                    conn.writer.write(reply)
                    await conn.writer.drain()
                    conn.last_active = time.monotonic()
                    return True
            try:
                request = decode_request(frame, self._versions)
            except UnsupportedApiVersionsError as exc:
                conn.writer.write(exc.response)
                return True
            except ProtocolError as exc:
                log.info("closing connection from %s: %s", conn.peer, exc)
                return False
            handler = self._handlers.get(request.api_key)
            if handler is None:  # advertised versions come from the handler table
                log.info("closing connection from %s: no handler for %s", conn.peer, request)
                return False
            context = conn.context
            client_id = request.header.client_id
            if context is None or context.client_id != client_id:
                context = conn.context = self._context.for_client(client_id, conn.host)
            try:
                response = handler(context, request)
                answer = response
                if type(response) is Answer and response.done() and not conn.pending:
                    # Answered already (a Produce at acks=1, or acks=all with nobody to
                    # wait for; a Fetch with data) and nothing ahead of it: written below,
                    # with no task for a Produce and no turn of the loop.
                    response = response.result()
                elif inspect.isawaitable(response):
                    if is_produce:  # appended already; answer in order, read on
                        self._pipeline(conn, request, response)
                        if len(conn.pending) >= MAX_PIPELINED_PRODUCES:
                            return await self._written(conn)
                        return not conn.failed
                    if type(response) is Answer:  # nothing is ahead of it: see _written
                        response.write_when_set(
                            functools.partial(self._write_now, conn, request.header.correlation_id)
                        )
                    response = await response
            except Exception:
                log.exception(
                    "error handling api key %d v%d from %s; closing the connection",
                    request.api_key, request.api_version, conn.peer,
                )  # fmt: skip
                return False
            if not await self._written(conn):  # an immediate produce answer waits its turn
                return False
            await _send(conn, request.header.correlation_id, answer, response)
            conn.last_active = time.monotonic()
            return True
        finally:
            self._done(1)


async def _send(conn: _Connection[Any], correlation_id: int, answer: Any, response: Any) -> None:
    """Write ``response`` (None: no answer) unless its :class:`Answer` was written when
    set; then only wait for the socket to drain. Segments an Answer kept are reused."""
    if type(answer) is Answer:
        if answer.written:
            await conn.writer.drain()
            return
        if answer.encoded is not None:
            await write_segments(conn.writer, answer.encoded)
            return
    if response is not None:
        await write_segments(conn.writer, encode_response_segments(correlation_id, response))
