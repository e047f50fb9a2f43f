"""The asyncio network shell: sockets and handlers around each connection's state machine.

Everything about a connection that is not I/O — framing, which request may be handled
when, Produce pipelining, answers in request order, back-pressure — is its sans-I/O
:class:`~sluice.protocol.server_connection.ServerConnection`. This module only carries
bytes and decisions between it, the socket and the handlers:

* :class:`KafkaServer` accepts clients on one listener (through an
  :class:`~sluice.server.acceptor.Acceptor`, within the broker's connection limits),
  keeps the handler table and the broker's context, and drains or drops its connections
  at shutdown. Once a second its housekeeping closes connections idle for
  ``connections.max.idle.ms`` and those whose request has been arriving for longer than
  ``socket.request.read.timeout.ms``, and lets connections that received nothing since
  the last round give back their receive buffers (``ServerConnection.trim``).
* :class:`KafkaConnectionProtocol` is one connection, an ``asyncio.BufferedProtocol``:
  the event loop reads straight into the buffers the ServerConnection offers (a large
  frame into one of its own, with the socket's receive low-water mark raised meanwhile,
  :mod:`sluice.server.low_water`), and reading pauses and resumes as it decides — also
  while the broker's memory pool (``queued.max.request.bytes``) is spent: the connection
  then waits in the pool's line, and reading resumes when memory is released. Each
  request it hands out goes to the API's handler with the connection's context (who the
  client is; for the broker, its ``RequestContext``), right in the read callback.

An answer given at once is written at once. An answer that waits (a parked Fetch, an
acks=all Produce) is handed to the ServerConnection when it completes, and whatever that
releases is written there and then: for an :class:`~sluice.server.answer.Answer`, inside
the call that completes it, in another request's call stack (see
:mod:`sluice.server.answer`); for any other awaitable, in its done callback. The next
request is never handled from inside another's call stack: it waits for the event loop.
Answers holding file regions go out with ``sendfile`` (:mod:`sluice.server.sendfile`)
from a task, nothing else meanwhile; while the transport's write buffer is over its
high-water mark no further request is handled. An answer carrying a client quota's
``throttle_time_ms`` (or a request whose handler time goes over ``request_percentage``)
mutes its connection once written, until the broker's timer ends the throttle
(:mod:`sluice.server.throttled_channel`). Oversized or malformed frames, unknown
APIs, unsupported versions, handler errors and responses that cannot be encoded close
that connection; the broker keeps serving. What clients cause is logged through
:data:`client_log` (each event at DEBUG, one line per kind per 10 s with counts), never a
line per request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from logging import DEBUG
from typing import Any, Generic, Protocol, Self, TypeAlias, TypeVar

from sluice.base.rate_limited_log import RateLimitedLog
from sluice.protocol import FrameSizeError, ProtocolError, Request, VersionTable
from sluice.protocol.apis import request_header_version
from sluice.protocol.errors import MalformedRequestError
from sluice.protocol.headers import read_request_header
from sluice.protocol.memory_pool import MemoryPool
from sluice.protocol.server_connection import (
    SASL_TOKEN,
    PendingAnswer,
    RawRequest,
    ServerConnection,
)
from sluice.protocol.throttle import NoResponse, throttle_time_ms, with_throttle_time
from sluice.security import DEFAULT_SESSION, Session
from sluice.security.sasl.authenticator import SaslServerAuthenticator, Step, StepKind
from sluice.server.acceptor import BACKLOG, Acceptor, bind_listener
from sluice.server.answer import Answer
from sluice.server.auth_helper import AclOperation, authorize_cluster
from sluice.server.broker_metrics import RequestMetrics
from sluice.server.congestion import set_on_loopback
from sluice.server.connection_quotas import ConnectionQuotas
from sluice.server.listener_security import PLAINTEXT_SECURITY, ListenerSecurity
from sluice.server.low_water import ReceiveLowWater
from sluice.server.request_context import RequestContext
from sluice.server.request_log import REQUEST_LOGGER, RequestLogEntry
from sluice.server.sasl_authentication import ServerAuthentication
from sluice.server.sendfile import write_segments

__all__ = ["ClientContext", "ClientIdentity", "Handler", "KafkaConnectionProtocol", "KafkaServer"]

log = logging.getLogger(__name__)
client_log = RateLimitedLog(log)
"""What clients cause: each event at DEBUG, per kind one line per 10 s with counts."""

_SASL_HANDSHAKE = 17
AUTH_FAILURE_GRACE_MS = 100
"""The least time a connection whose authentication failed stays open after its answer."""

HOUSEKEEPING_S = 1.0
"""How often idle connections, read timeouts and receive buffers are looked at (more
often when a timeout is shorter than four of these)."""


class ClientContext(Protocol):
    """What a handler is given besides the request: at least who sent it."""

    @property
    def client_id(self) -> str | None: ...

    def for_client(
        self, client_id: str | None, client_host: str, session: Session = DEFAULT_SESSION
    ) -> Self:
        """This context for the requests of one client (``client_host``: ``/127.0.0.1``;
        ``session``: the connection's principal and listener)."""


Ctx = TypeVar("Ctx", bound=ClientContext)

Handler = Callable[[Ctx, Request], Any]
"""Maps a context and a decoded request to a kio response dataclass, an awaitable of one,
or None for no response."""

RawHandler = Callable[[bytes], Any]
"""Maps a whole request frame to a framed response (bytes, or an awaitable of them)."""

_Pending: TypeAlias = "PendingAnswer[asyncio.Future[Any]]"


class Throttling(Protocol):
    """Client quota throttles (:mod:`sluice.server.throttled_channel`): an answer's
    throttle time mutes its connection until the timer calls back."""

    @property
    def active(self) -> bool:
        """Whether any quota is configured (otherwise answers are not looked at)."""

    def throttle(self, ms: int, on_end: Callable[[], None]) -> object:
        """Call ``on_end`` on the event loop ``ms`` from now."""

    def request_throttle_ms(self, request: Request, session: Session, nanos: int) -> int:
        """Record a request's handler time; the request quota's throttle."""


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """The smallest context: only the client's identity (a server without a broker)."""

    client_id: str | None = None
    client_host: str = ""
    session: Session = DEFAULT_SESSION

    def for_client(
        self, client_id: str | None, client_host: str, session: Session = DEFAULT_SESSION
    ) -> ClientIdentity:
        return ClientIdentity(client_id, client_host, session)


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
        raw_handlers: dict[int, RawHandler] | None = None,
        loopback_congestion: str = "",
        *,
        quotas: ConnectionQuotas | None = None,
        pool: MemoryPool | None = None,
        read_timeout_ms: int = 0,
        throttling: Throttling | None = None,
        security: ListenerSecurity = PLAINTEXT_SECURITY,
        authentication: ServerAuthentication | None = None,
        socket_buffers: tuple[int, int] = (-1, -1),
        request_metrics: RequestMetrics | None = None,
    ) -> None:
        """``quotas`` and ``pool``: the broker's, shared by its listeners (None: no
        connection limits, no memory bound); ``read_timeout_ms`` 0 or less: a request
        may take any time to arrive; ``throttling``: the client quotas' (None: none);
        ``security``: the listener's name and security protocol
        (:mod:`sluice.server.listener_security`); ``authentication``: a SASL listener's;
        ``socket_buffers``: SO_SNDBUF and SO_RCVBUF of accepted connections (-1: the
        system's); ``request_metrics``: where each answered request's count and latencies
        go (None: not measured)."""
        self._socket_buffers = socket_buffers
        self.request_metrics = request_metrics
        self.host = host
        self.port = port
        self.security = security
        # SASL listeners: each connection authenticates first (sluice.server.sasl_authentication)
        self.authentication = authentication
        self.listener_name = security.listener_name
        self.security_protocol = security.security_protocol
        self.handlers = handlers  # read per request: may be updated in place
        self.versions = versions
        self.context = context
        # API key -> fn(frame) -> framed response bytes, for APIs kio has no schema for
        # (the controller's inter-broker requests); cluster mode only.
        self.raw_handlers = raw_handlers or {}
        self.raw_api_keys = frozenset(self.raw_handlers)
        self.max_request_size = max_request_size
        self._loopback_congestion = loopback_congestion  # sluice.server.congestion
        self._idle_timeout_s = idle_timeout_ms / 1000 if idle_timeout_ms > 0 else None
        self._read_timeout_s = read_timeout_ms / 1000 if read_timeout_ms > 0 else None
        self.quotas = quotas if quotas is not None else ConnectionQuotas()
        self.pool = pool
        self.throttling = throttling
        self._acceptor: Acceptor | None = None
        self._opening: set[asyncio.Task[Any]] = set()  # accepted sockets becoming transports
        self._connections: set[KafkaConnectionProtocol[Ctx]] = set()
        self._no_connections = asyncio.Event()
        self._no_connections.set()
        self._tasks: set[asyncio.Task[None]] = set()  # answers being sent with sendfile
        self._busy = 0  # connections owing an answer
        self._idle = asyncio.Event()
        self._idle.set()
        self._housekeeper: asyncio.Task[None] | None = None
        # time.monotonic() when a connection was last accepted or a request last read
        self.last_active_at = float("-inf")

    async def start(self) -> None:
        self._acceptor = Acceptor(
            bind_listener(self.host, self.port, BACKLOG, *self._socket_buffers),
            self._connect,
            self.quotas,
            client_log,
        )
        self.port = self._acceptor.port
        self._acceptor.start()
        self._housekeeper = asyncio.create_task(self._housekeeping())

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def stop_accepting(self) -> None:
        if self._acceptor is not None:
            self._acceptor.close()

    async def drain_and_close(self, timeout_s: float) -> None:
        """Wait (bounded) for requests in flight to be answered, then close connections and
        wait (bounded again) until they are gone."""
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            owed = sum(c.conn.in_flight for c in self._connections)
            log.warning("closing with %d requests still in flight", owed)
        if self._housekeeper is not None:
            self._housekeeper.cancel()
        for task in list(self._opening):
            task.cancel()
        for connection in list(self._connections):
            connection.close()
        deadline = loop.time() + timeout_s
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout_s)
        try:  # closed transports report their connections lost
            await asyncio.wait_for(self._no_connections.wait(), max(deadline - loop.time(), 0))
        except TimeoutError:
            log.warning("%d connections still open after closing", len(self._connections))
        if self._acceptor is not None:
            self._acceptor.close()
        client_log.flush()  # the counts not written yet

    def abort(self) -> None:
        """Drop everything at once, as a killed process would: no answers in flight."""
        if self._acceptor is not None:
            self._acceptor.close()
        if self._housekeeper is not None:
            self._housekeeper.cancel()
        for task in list(self._opening):
            task.cancel()
        for connection in list(self._connections):
            connection.abort()
        for task in list(self._tasks):
            task.cancel()

    # -- accepting ----------------------------------------------------------------------
    def _connect(self, sock: socket.socket, quota_key: str) -> None:
        """The acceptor's hand-over: serve ``sock``, counted under ``quota_key``."""
        loop = asyncio.get_running_loop()
        made: list[KafkaConnectionProtocol[Ctx]] = []

        def protocol() -> KafkaConnectionProtocol[Ctx]:
            made.append(KafkaConnectionProtocol(self, quota_key))
            return made[0]

        security = self.security
        if security.ssl_context is None:
            opening = loop.connect_accepted_socket(protocol, sock)
        else:  # the handshake runs on the loop, bounded; the protocol connects after it
            opening = loop.connect_accepted_socket(
                protocol, sock, ssl=security.ssl_context,
                ssl_handshake_timeout=security.handshake_timeout_s,
                ssl_shutdown_timeout=security.shutdown_timeout_s,
            )  # fmt: skip
        task = loop.create_task(opening)
        self._opening.add(task)
        task.add_done_callback(functools.partial(self._opened, sock, quota_key, made))

    def _opened(
        self,
        sock: socket.socket,
        quota_key: str,
        made: list[KafkaConnectionProtocol[Ctx]],
        task: asyncio.Task[Any],
    ) -> None:
        self._opening.discard(task)
        if not task.cancelled() and task.exception() is None:
            return
        if not made or made[0].transport is None:  # never connected: nothing will release it
            self.quotas.remove(quota_key)
            sock.close()
        if not task.cancelled():
            kind = "TLS handshake failed" if self.security.ssl_context else "accepting failed"
            exc = task.exception()
            client_log.event(kind, quota_key, str(exc) or repr(exc))  # some have no text

    # -- housekeeping -------------------------------------------------------------------
    async def _housekeeping(self) -> None:
        period = HOUSEKEEPING_S
        for timeout in (self._idle_timeout_s, self._read_timeout_s):
            if timeout is not None:
                period = min(period, max(timeout / 4, 0.05))
        while True:
            await asyncio.sleep(period)
            self.housekeep(time.monotonic())

    def housekeep(self, now: float) -> None:
        """One round: close connections idle or too slow to send a request; let those
        that received nothing since the last round give back their receive buffers."""
        idle_cutoff = now - self._idle_timeout_s if self._idle_timeout_s is not None else None
        read_timeout = self._read_timeout_s
        for connection in list(self._connections):
            if idle_cutoff is not None and connection.last_active < idle_cutoff:
                idle = f"idle for over {self._idle_timeout_s:g} s"
                client_log.event(
                    "closed an idle connection", connection.peer, idle, level=logging.INFO
                )
                connection.close()
                continue
            conn = connection.conn
            if read_timeout is not None and conn.read_timed_out(now, read_timeout):
                client_log.event(
                    "closed a connection", connection.peer,
                    f"a request has been arriving for over {read_timeout:g} s "
                    "(socket.request.read.timeout.ms)",
                )  # fmt: skip
                connection.close()
                continue
            if connection.received:
                connection.received = False
            else:
                conn.trim()

    # -- called by the connections ----------------------------------------------------
    def _accepted(self, connection: KafkaConnectionProtocol[Ctx]) -> None:
        self.last_active_at = time.monotonic()
        if self._loopback_congestion:
            set_on_loopback(connection.transport, self._loopback_congestion)
        self._connections.add(connection)
        self._no_connections.clear()

    def _lost(self, connection: KafkaConnectionProtocol[Ctx]) -> None:
        self._connections.discard(connection)
        if not self._connections:
            self._no_connections.set()
        key, connection.quota_key = connection.quota_key, None
        if key is not None:
            self.quotas.remove(key)

    def _busy_changed(self, busy: bool) -> None:
        self._busy += 1 if busy else -1
        if self._busy:
            self._idle.clear()
        else:
            self._idle.set()

    def _sending(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class KafkaConnectionProtocol(asyncio.BufferedProtocol, Generic[Ctx]):
    """One client connection: drives its :class:`ServerConnection` from the event loop's
    callbacks, calls the handlers and writes what it hands out. It is also the writer
    :func:`~sluice.server.sendfile.write_segments` sends through (``transport``,
    ``writelines``, ``drain``)."""

    __slots__ = ("_arrivals", "_auth_failed", "_busy", "_closed", "_dispatch_soon",
                 "_drain_waiters", "_reading_paused", "_sent_timing", "_waiting_memory",
                 "_write_paused", "authenticator", "conn",
                 "context", "host", "last_active", "low_water", "peer", "quota_key", "received",
                 "server", "session", "transport")  # fmt: skip

    def __init__(self, server: KafkaServer[Ctx], quota_key: str | None = None) -> None:
        """``quota_key``: what the server's connection quotas counted this connection
        under (released when it is lost)."""
        self.server = server
        self.conn: ServerConnection[asyncio.Future[Any]] = ServerConnection(
            server.versions, server.max_request_size, raw_api_keys=server.raw_api_keys,
            pool=server.pool,
        )  # fmt: skip
        self.quota_key = quota_key
        self.transport: asyncio.Transport | None = None
        self.low_water = ReceiveLowWater()  # bound to the socket once connected
        self.peer = "?"
        self.host = ""  # as Kafka shows a client's address: /127.0.0.1
        self.context: Ctx | None = None  # for the client id of its latest request
        self.session = server.security.initial_session  # who the client is, where from
        self.last_active = time.monotonic()
        self._reading_paused = False  # as applied to the transport
        self._waiting_memory = False  # in the memory pool's line
        self.received = False  # bytes came since the server's last housekeeping round
        self._write_paused = False
        self._closed = False
        self._busy = False  # as last reported to the server
        self._dispatch_soon = False  # a _dispatch is scheduled on the loop
        self._drain_waiters: list[asyncio.Future[None]] = []
        # Request metrics: (frames received by then, perf_counter_ns) per read that
        # completed frames, and the timing of the answer being sent with sendfile.
        self._arrivals: deque[tuple[int, int]] = deque()
        self._sent_timing: _Timing | None = None
        authentication = server.authentication
        # SASL: the connection's authenticator until it is authenticated (and on, for
        # re-authentication and the session's expiry); None on other listeners.
        self.authenticator: SaslServerAuthenticator | None = None
        if authentication is not None:
            self.authenticator = authentication.new_authenticator()
            self.conn.max_frame_size = min(server.max_request_size, authentication.max_receive_size)
        self._auth_failed = False  # failed: nothing more is handled, the close is due

    def set_session(self, session: Session) -> None:
        """The connection's identity changed (a TLS handshake or a SASL exchange ended):
        later requests carry ``session``."""
        self.session = session
        self.context = None

    # -- asyncio callbacks ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.low_water = ReceiveLowWater(transport)
        peername = transport.get_extra_info("peername")
        if peername:
            self.peer = f"{peername[0]}:{peername[1]}"
            self.host = f"/{peername[0]}"
        self.server._accepted(self)
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None and self.server.security_protocol == "SSL":
            # the client certificate names the principal
            try:
                self.set_session(
                    self.server.security.tls_session(ssl_object.getpeercert(binary_form=True))
                )
            except ValueError as exc:  # no ssl.principal.mapping.rules rule applies
                client_log.event("refused a client certificate", self.peer, exc)
                self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._shut()
        self._wake_drain(ConnectionResetError("connection lost"))
        self.server._lost(self)

    def eof_received(self) -> bool:
        return False  # the transport closes; connection_lost follows

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_drain(None)
        if self.conn.has_frames:
            self._dispatch()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.conn.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        conn = self.conn
        self.received = True
        try:
            conn.buffer_updated(nbytes)
        except FrameSizeError as exc:
            client_log.event("rejected frame", self.peer, exc)
            self.close()
            return
        self.low_water.expect(conn.receive_rest)
        if self.server.request_metrics is not None:
            received = conn.frames_received
            arrivals = self._arrivals
            if received and (not arrivals or arrivals[-1][0] != received):
                taken = conn.frames_taken  # frames handed out need their time no more
                while arrivals and arrivals[0][0] <= taken:
                    arrivals.popleft()
                arrivals.append((received, time.perf_counter_ns()))
        if conn.reading_paused:
            self._apply_reading()
        if conn.has_frames:
            self._dispatch()

    # -- reading decisions -----------------------------------------------------------------
    def _apply_reading(self) -> None:
        """Pause or resume reading as the connection decides; queue for memory if that is
        what it waits for."""
        conn = self.conn
        transport = self.transport
        if self._closed or transport is None:
            return
        paused = conn.reading_paused
        if paused is not self._reading_paused:
            self._reading_paused = paused
            if paused:
                transport.pause_reading()
            else:
                transport.resume_reading()
        if paused and not self._waiting_memory and conn.waiting_for_memory:
            pool = self.server.pool
            assert pool is not None
            self._waiting_memory = True
            pool.wait(self._memory_available)

    def _memory_available(self) -> bool:
        """Called by the memory pool once it has memory again: take what was refused and
        read on (unless the connection is paused for another reason). False: refused
        again, still in line."""
        if self._closed or self.conn.memory_available():
            self._waiting_memory = False
            self._apply_reading()
            return True
        return False

    # -- the writer write_segments uses ---------------------------------------------------
    def writelines(self, data: Any) -> None:
        assert self.transport is not None
        self.transport.writelines(data)

    async def drain(self) -> None:
        if self._closed:
            raise ConnectionResetError("connection lost")
        if not self._write_paused:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(waiter)
        await waiter

    # -- closing -------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection once what is written is sent; drop the answers awaited."""
        self._shut()
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection at once."""
        self._shut()
        if self.transport is not None:
            self.transport.abort()

    def _shut(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._waiting_memory:
            self._waiting_memory = False
            pool = self.server.pool
            assert pool is not None
            pool.cancel_wait(self._memory_available)
        for handle in self.conn.close():
            handle.cancel()
        self._note_busy()

    # -- requests ------------------------------------------------------------------------
    def _dispatch(self) -> None:
        """Handle every request the connection hands out now, writing what it releases."""
        self._dispatch_soon = False
        conn = self.conn
        server = self.server
        while not self._write_paused and not self._auth_failed:
            try:
                request = conn.next_request()
            except ProtocolError as exc:  # Kafka closes the connection too
                client_log.event("rejected request", self.peer, exc)
                self.close()
                return
            if request is None:
                break
            self.last_active = server.last_active_at = time.monotonic()
            if isinstance(request, RawRequest):
                if self.authenticator is not None and not self._authenticated_raw(request):
                    continue
                self._handle_raw(request)
            else:
                self._handle(request)
        self._flush()  # an answer the connection gave itself (ApiVersions fallback)
        if self._reading_paused:
            self._apply_reading()
        self._note_busy()

    def _handle(self, request: Request) -> None:
        authenticator = self.authenticator
        if authenticator is not None:
            if not authenticator.complete or (
                request.header.api_key == _SASL_HANDSHAKE and authenticator.begin_reauthentication()
            ):
                step = authenticator.receive(request)
                if step.kind is not StepKind.SERVE:
                    self._authenticate(step)
                    return
            elif authenticator.session_expired():
                client_log.event("closed a connection", self.peer, "its SASL session expired",
                                 level=logging.INFO)  # fmt: skip
                self.close()
                return
        server = self.server
        handler = server.handlers.get(request.header.api_key)
        if handler is None:  # advertised versions come from the handler table
            client_log.event("rejected request", self.peer, f"no handler: {request.header}")
            self.close()
            return
        context = self.context
        client_id = request.header.client_id
        if context is None or context.client_id != client_id:
            context = self.context = server.context.for_client(client_id, self.host, self.session)
        conn = self.conn
        throttling = server.throttling
        quotas = throttling is not None and throttling.active
        metrics = server.request_metrics
        logged = self._request_log_entry(request) if REQUEST_LOGGER.isEnabledFor(DEBUG) else None
        try:
            started = time.perf_counter_ns() if quotas or metrics is not None else 0
            response = handler(context, request)
            timing = None
            if metrics is not None:
                timing = _Timing(request.header.api_key, self._arrived(started), started)
            extra = 0  # the request quota's throttle
            if quotas:
                assert throttling is not None
                elapsed = time.perf_counter_ns() - started
                extra = throttling.request_throttle_ms(request, self.session, elapsed)
            if type(response) is Answer:
                if response.done():  # answered already: a Produce at acks=1, a Fetch with data
                    result = response.result()
                    conn.respond(result := self._throttled(result, extra) if quotas else result)
                    if logged is not None:
                        logged.answered(result)
                else:
                    pending = conn.defer(response)
                    response.when_done(functools.partial(self._answer_done, pending, extra,
                                                         timing, logged))  # fmt: skip
                    timing = None
            elif response is None or not inspect.isawaitable(response):
                conn.respond(response := self._throttled(response, extra) if quotas else response)
                if logged is not None:
                    logged.answered(response)
            else:
                future = asyncio.ensure_future(response)
                pending = conn.defer(future)
                future.add_done_callback(
                    functools.partial(self._future_done, pending, False, extra=extra,
                                      timing=timing, logged=logged)
                )  # fmt: skip
                timing = None
        except (Exception, asyncio.CancelledError) as exc:  # or a response that cannot be encoded
            what = f"api key {request.api_key} v{request.api_version}: {exc!r}"
            client_log.event("error handling a request", self.peer, what, exc_info=exc,
                             level=logging.ERROR)  # fmt: skip
            self.close()
            return
        if timing is None:
            self._flush()
        else:
            timing.answered = time.perf_counter_ns()
            self._flush()
            self._sent(timing)

    # -- SASL ----------------------------------------------------------------------------
    def _authenticated_raw(self, request: RawRequest) -> bool:
        """A raw frame on a SASL listener: a SASL token goes to the authenticator; an
        inter-broker request is served only once authenticated. False: handled here."""
        authenticator = self.authenticator
        assert authenticator is not None
        if request.api_key == SASL_TOKEN:
            self._authenticate(authenticator.receive_token(request.frame))
            return False
        if not authenticator.complete:
            self._authenticate(authenticator.fail_unexpected(request.api_key))
            return False
        if authenticator.session_expired():
            self.close()
            return False
        return True

    def _authenticate(self, step: Step) -> None:
        """Apply a step of the authentication to the request in hand."""
        conn = self.conn
        authenticator = self.authenticator
        assert authenticator is not None
        kind = step.kind
        if kind is StepKind.FAILED:
            self._fail_authentication(step)
            return
        if step.raw is not None:
            conn.respond_framed(len(step.raw).to_bytes(4, "big") + step.raw)
        else:
            conn.respond(step.response)
        conn.sasl_tokens = authenticator.raw_tokens
        if kind is StepKind.AUTHENTICATED:
            conn.max_frame_size = self.server.max_request_size
            assert step.principal is not None
            self.set_session(dataclasses.replace(self.session, principal=step.principal))
        self._flush()

    def _fail_authentication(self, step: Step) -> None:
        """Kafka's delayed close: nothing more is handled; after
        ``connection.failed.authentication.delay.ms`` the answer (if any) is written, and
        the connection is closed once the client has closed it, or at the latest the same
        delay (at least :data:`AUTH_FAILURE_GRACE_MS`) later. The grace lets a client
        read the answer before the close: kafka-python, reading both at once, reports a
        lost connection instead of the error."""
        self._auth_failed = True
        conn = self.conn
        conn.sasl_tokens = False
        authentication = self.server.authentication
        assert authentication is not None
        client_log.event("failed authentication", self.peer, step.message, level=logging.INFO)
        pending = conn.defer(asyncio.get_running_loop().create_future())
        if self.transport is not None and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

        delay_ms = authentication.failed_authentication_delay_ms

        def expire() -> None:
            if self._closed:
                return
            if step.response is None:
                self.close()
                return
            conn.answer(pending, step.response)
            self._flush()
            if self.transport is not None:  # to see the client's close
                self._reading_paused = False
                self.transport.resume_reading()
            authentication.schedule(max(delay_ms, AUTH_FAILURE_GRACE_MS), self.close)

        authentication.schedule(delay_ms, expire)

    def _handle_raw(self, request: RawRequest) -> None:
        conn = self.conn
        if not self._cluster_action_allowed():
            what = f"api key {request.api_key} from {self.session.principal}"
            client_log.event("inter-broker request without CLUSTER_ACTION", self.peer, what)
            self.close()  # kio has no schema to answer CLUSTER_AUTHORIZATION_FAILED in
            return
        logged = self._request_log_entry(request) if REQUEST_LOGGER.isEnabledFor(DEBUG) else None
        try:
            reply = self.server.raw_handlers[request.api_key](request.frame)
            if inspect.isawaitable(reply):
                future = asyncio.ensure_future(reply)
                pending = conn.defer(future)
                future.add_done_callback(
                    functools.partial(self._future_done, pending, True, logged=logged)
                )
            else:
                conn.respond_framed(reply)
                if logged is not None:
                    logged.answered_framed(reply)
        except Exception as exc:
            client_log.event("error handling an inter-broker request", self.peer, repr(exc),
                             exc_info=exc, level=logging.ERROR)  # fmt: skip
            self.close()
            return
        self._flush()

    def _cluster_action_allowed(self) -> bool:
        """As Kafka: the controller's requests need CLUSTER_ACTION on the cluster."""
        context = self.server.context.for_client(None, self.host, self.session)
        if not isinstance(context, RequestContext):  # a test's context: no authorizer
            return True
        return authorize_cluster(context, AclOperation.CLUSTER_ACTION)

    def _request_log_entry(self, request: Request | RawRequest) -> RequestLogEntry | None:
        """The request log's record of the request in hand (only while it is at DEBUG)."""
        if isinstance(request, RawRequest):  # an inter-broker request: header v1 (or v0)
            frame = request.frame
            try:
                key, version = int.from_bytes(frame[0:2], "big"), int.from_bytes(frame[2:4], "big")
                header = read_request_header(frame, request_header_version(key, version))[0]
            except MalformedRequestError:  # its handler answers it as it can
                return None
        else:
            header = request.header
        server = self.server
        return RequestLogEntry(
            header.api_key, header.api_version, header.correlation_id, header.client_id,
            self.conn.request_size, f"{server.host}:{server.port}-{self.peer}", self.host,
            self.session,
        )  # fmt: skip

    # -- answers -------------------------------------------------------------------------
    def _answer_done(
        self, pending: _Pending, extra: int, timing: _Timing | None,
        logged: RequestLogEntry | None, answer: Answer,
    ) -> None:  # fmt: skip
        """An :class:`Answer` was set, inside whatever set it: write what it releases; the
        next request waits for the loop."""
        self._settle(pending, answer, False, extra, timing, logged)
        if not self._dispatch_soon and self.conn.has_frames:
            self._dispatch_soon = True
            answer.get_loop().call_soon(self._dispatch)

    def _future_done(
        self, pending: _Pending, framed: bool, future: asyncio.Future[Any], extra: int = 0,
        timing: _Timing | None = None, logged: RequestLogEntry | None = None,
    ) -> None:  # fmt: skip
        self._settle(pending, future, framed, extra, timing, logged)
        if self.conn.has_frames:
            self._dispatch()

    def _settle(
        self, pending: _Pending, future: asyncio.Future[Any], framed: bool, extra: int = 0,
        timing: _Timing | None = None, logged: RequestLogEntry | None = None,
    ) -> None:  # fmt: skip
        conn = self.conn
        if conn.closed:
            return
        if timing is not None:
            timing.answered = time.perf_counter_ns()
        try:
            if framed:
                conn.answer_framed(pending, result := future.result())
                if logged is not None:
                    logged.answered_framed(result)
            elif extra or (self.server.throttling is not None and self.server.throttling.active):
                conn.answer(pending, result := self._throttled(future.result(), extra))
                if logged is not None:
                    logged.answered(result)
            else:
                conn.answer(pending, result := future.result())
                if logged is not None:
                    logged.answered(result)
            self._flush()
            if timing is not None:
                self._sent(timing)
        except asyncio.CancelledError:
            client_log.event("answer cancelled", self.peer, "closing the connection",
                             level=logging.INFO)  # fmt: skip
            self.close()
        except Exception as exc:  # a response that cannot be encoded, say
            client_log.event("error answering a request", self.peer, repr(exc), exc_info=exc,
                             level=logging.ERROR)  # fmt: skip
            self.close()
        self.last_active = time.monotonic()
        if self._reading_paused:  # its memory released: it may read again
            self._apply_reading()
        self._note_busy()

    # -- quota throttles ------------------------------------------------------------------
    def _throttled(self, response: Any, extra: int) -> Any:
        """``response`` with the request quota's throttle ``extra`` if longer than its own;
        a throttled answer mutes the connection once written (KIP-219)."""
        ms = throttle_time_ms(response)
        if extra > ms:
            response, ms = with_throttle_time(response, extra), extra
        if ms > 0:
            self._throttle(ms)
        return None if type(response) is NoResponse else response

    def _throttle(self, ms: int) -> None:
        throttling = self.server.throttling
        if throttling is None or self._closed:
            return
        self.conn.start_throttling()
        self._apply_reading()
        throttling.throttle(ms, self._throttle_ended)

    def _throttle_ended(self) -> None:
        conn = self.conn
        conn.end_throttling()
        if self._closed:
            return
        self._apply_reading()
        if conn.has_frames and not conn.throttled:
            self._dispatch()

    def _flush(self) -> None:
        """Write what the connection hands out: at once, or with sendfile from a task."""
        conn = self.conn
        out = conn.data_to_send()
        if out is None:
            return
        if conn.sending:
            self.server._sending(asyncio.ensure_future(self._send_file(out)))
        else:
            assert self.transport is not None
            self.transport.writelines(out)

    async def _send_file(self, segments: list[Any]) -> None:
        try:
            await write_segments(self, segments)
        except Exception as exc:
            if not isinstance(exc, ConnectionError):
                client_log.event("error sending an answer", self.peer, repr(exc), exc_info=exc,
                                 level=logging.ERROR)  # fmt: skip
            self.close()
            return
        self.conn.send_complete()
        timing, self._sent_timing = self._sent_timing, None
        if timing is not None:
            self._record(timing, time.perf_counter_ns())
        self._flush()
        self._dispatch()

    # -- request metrics -------------------------------------------------------------------
    def _arrived(self, now: int) -> int:
        """When the frame of the request handed out last was complete (perf_counter_ns):
        the time of the read that completed it."""
        taken = self.conn.frames_taken
        arrivals = self._arrivals
        while arrivals and arrivals[0][0] < taken:
            arrivals.popleft()
        return arrivals[0][1] if arrivals else now

    def _sent(self, timing: _Timing) -> None:
        """The answer of ``timing``'s request was given and flushed: recorded now, or
        once its sendfile ends."""
        if self.conn.sending and self._sent_timing is None:
            self._sent_timing = timing
        else:
            self._record(timing, time.perf_counter_ns())

    def _record(self, timing: _Timing, sent: int) -> None:
        metrics = self.server.request_metrics
        if metrics is not None:
            metrics.record(timing.api_key, timing.started - timing.arrived,
                           timing.handled - timing.started, timing.answered - timing.handled,
                           sent - timing.answered)  # fmt: skip

    def _note_busy(self) -> None:
        busy = not self.conn.idle
        if busy is not self._busy:
            self._busy = busy
            self.server._busy_changed(busy)

    def _wake_drain(self, error: BaseException | None) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if waiter.done():
                continue
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)


class _Timing:
    """One request's times (perf_counter_ns) for :class:`RequestMetrics`: its frame
    complete, its handler called and returned, its answer given."""

    __slots__ = ("answered", "api_key", "arrived", "handled", "started")

    def __init__(self, api_key: int, arrived: int, started: int) -> None:
        self.api_key = api_key
        self.arrived = arrived
        self.started = started
        self.handled = self.answered = time.perf_counter_ns()
