"""``BrokerConnection``: one non-blocking socket to a broker, framed and ordered.

A connection owns the socket, a :class:`~sluice.protocol.FrameDecoder` for what it
receives, a queue of buffers to write (request frames as lists of segments, so
record batches go out of their own buffers without a copy, via ``sendmsg``), and
the requests in flight. Kafka answers requests on one connection in order, so
in-flight requests are a FIFO and each response's correlation id must match the
oldest one. Requests that expect no response (acks=0 Produce) complete once
their last byte has been written.

It does no waiting: the :class:`~.network_client.NetworkClient` selects on the
socket and calls :meth:`finish_connect`, :meth:`handshake`, :meth:`write` and
:meth:`read`.

With an ``ssl_context`` (``security.protocol=SSL``) the connected socket is wrapped in
TLS and the handshake advances, without blocking, each time the socket is ready for
what it waits for; then requests and responses pass through TLS (buffers are joined
for each write, as TLS sockets have no ``sendmsg``).
"""

from __future__ import annotations

import contextlib
import enum
import errno
import itertools
import random
import selectors
import socket
import ssl
from collections import deque
from collections.abc import Sequence

from sluice.client.backoff import ExponentialBackoff
from sluice.client.net.client_request import InFlightRequest
from sluice.client.net.cluster import Node
from sluice.protocol import FrameDecoder
from sluice.protocol._wire import BytesLike

__all__ = ["BrokerConnection", "ClusterConnectionStates", "ConnectionState"]

_FOREVER = 2**63 - 1
_RECV_SIZE = 256 * 1024
_MAX_IOV = 512
_TLS_READ_BURST = 4 * 1024 * 1024


class ConnectionState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    HANDSHAKING = "handshaking"
    CHECKING_API_VERSIONS = "checking_api_versions"
    AUTHENTICATING = "authenticating"
    READY = "ready"


class BrokerConnection:
    """The socket, buffers and in-flight requests of one connection to ``node``."""

    def __init__(
        self,
        node: Node,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
        ssl_context: ssl.SSLContext | None = None,
    ):
        self.node = node
        self.state = ConnectionState.DISCONNECTED
        self.sock: socket.socket | None = None
        self.ssl_context = ssl_context
        self.decoder = FrameDecoder()
        self._send_queue: deque[BytesLike] = deque()
        self._queued_bytes = 0
        self._sent_bytes = 0
        self.in_flight: deque[InFlightRequest] = deque()
        self._no_response: deque[InFlightRequest] = deque()
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.reauthenticate_at_ms = _FOREVER  # KIP-368: when to authenticate again
        self.connect_started_ms = 0
        self._send_buffer_bytes = send_buffer_bytes
        self._receive_buffer_bytes = receive_buffer_bytes

    # -- connecting ----------------------------------------------------------------

    def connect(self, now_ms: int) -> None:
        """Start a non-blocking connect.

        :raises OSError: the connect failed at once (bad address, refused).
        """
        family, kind, proto, _, address = socket.getaddrinfo(
            self.node.host, self.node.port, type=socket.SOCK_STREAM
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
            if self._receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer_bytes)
            code = sock.connect_ex(address)
            if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
                raise OSError(code, f"connect to {self.node.host}:{self.node.port} failed")
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self.state = ConnectionState.CONNECTING
        self.connect_started_ms = now_ms

    def finish_connect(self) -> bool:
        """The socket became writable while connecting: check the outcome. True: a TLS
        handshake follows (the socket is now a TLS socket, :meth:`handshake`).

        :raises OSError: the connection was refused or failed.
        """
        assert self.sock is not None
        code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code != 0:
            raise OSError(code, f"connect to {self.node.host}:{self.node.port}: "
                                f"{errno.errorcode.get(code, code)}")  # fmt: skip
        if self.ssl_context is not None:  # the same descriptor, now a TLS socket
            self.sock = self.ssl_context.wrap_socket(
                self.sock, server_hostname=self.node.host, do_handshake_on_connect=False
            )
            self.state = ConnectionState.HANDSHAKING
            return True
        self.state = ConnectionState.CHECKING_API_VERSIONS
        return False

    def handshake(self) -> int:
        """Advance the TLS handshake: 0 once it is done, else the selector events it waits
        for.

        :raises ssl.SSLError: the handshake failed (an untrusted certificate, say).
        """
        sock = self.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            return selectors.EVENT_READ
        except ssl.SSLWantWriteError:
            return selectors.EVENT_WRITE
        self.state = ConnectionState.CHECKING_API_VERSIONS
        return 0

    # -- writing -------------------------------------------------------------------

    def enqueue(self, segments: Sequence[BytesLike], request: InFlightRequest) -> None:
        """Queue a framed request's buffers and track the request."""
        for segment in segments:
            if len(segment):
                self._send_queue.append(segment)
                self._queued_bytes += len(segment)
        request.end_position = self._queued_bytes
        if request.expect_response:
            self.in_flight.append(request)
        else:
            self._no_response.append(request)

    def has_pending_writes(self) -> bool:
        return bool(self._send_queue)

    def write(self) -> list[InFlightRequest]:
        """Write what the socket takes; return no-response requests now fully sent.

        :raises OSError: the connection broke.
        """
        sock = self.sock
        assert sock is not None
        tls = isinstance(sock, ssl.SSLSocket)
        queue = self._send_queue
        while queue:
            batch = list(itertools.islice(queue, _MAX_IOV))
            try:
                sent = sock.send(b"".join(batch)) if tls else sock.sendmsg(batch)
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                break
            self._sent_bytes += sent
            complete = True
            for _ in range(len(batch)):
                size = len(queue[0])
                if sent >= size:
                    queue.popleft()
                    sent -= size
                else:
                    queue[0] = memoryview(queue[0])[sent:]
                    complete = False
                    break
            if not complete:
                break  # the socket buffer is full; wait until writable
        done: list[InFlightRequest] = []
        while self._no_response and self._no_response[0].end_position <= self._sent_bytes:
            done.append(self._no_response.popleft())
        return done

    # -- reading -------------------------------------------------------------------

    def read(self) -> list[tuple[InFlightRequest, memoryview]]:
        """Read what is available; return (request, response frame) pairs in order.

        :raises ConnectionError: the broker closed the connection.
        :raises OSError: the connection broke.
        :raises sluice.protocol.ProtocolError: a bad frame or an unexpected correlation id.
        """
        sock = self.sock
        assert sock is not None
        # TLS hands out a record at a time and may hold decrypted bytes the selector
        # cannot see: read on until it has nothing (or a burst's worth was read).
        tls = isinstance(sock, ssl.SSLSocket)
        out: list[tuple[InFlightRequest, memoryview]] = []
        read = 0
        while True:
            try:
                chunk = sock.recv(_RECV_SIZE)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return out
            if not chunk:
                raise ConnectionError(f"connection to node {self.node.id} closed by the broker")
            for frame in self.decoder.feed(chunk):
                out.append((self._match(frame), frame))
            read += len(chunk)
            if tls:
                if read >= _TLS_READ_BURST and not sock.pending():  # type: ignore[attr-defined]
                    return out
            elif len(chunk) < _RECV_SIZE:
                return out

    def _match(self, frame: memoryview) -> InFlightRequest:
        from sluice.protocol.errors import MalformedRequestError
        from sluice.protocol.responses import response_correlation_id

        correlation_id = response_correlation_id(frame)
        if not self.in_flight:
            raise MalformedRequestError(
                f"response with correlation id {correlation_id} from node {self.node.id}, "
                "but no request is in flight"
            )
        request = self.in_flight.popleft()
        if request.correlation_id != correlation_id:
            raise MalformedRequestError(
                f"correlation id {correlation_id} from node {self.node.id} does not match "
                f"the request's {request.correlation_id}"
            )
        return request

    # -- closing -------------------------------------------------------------------

    def close(self) -> list[InFlightRequest]:
        """Close the socket; return the requests that will get no response now."""
        if self.sock is not None:
            with contextlib.suppress(OSError):  # closing a broken socket
                self.sock.close()
        self.sock = None
        self.state = ConnectionState.DISCONNECTED
        self._send_queue.clear()
        self._queued_bytes = self._sent_bytes = 0
        self.decoder = FrameDecoder()
        pending = list(self.in_flight) + list(self._no_response)
        self.in_flight.clear()
        self._no_response.clear()
        self.api_versions = {}
        return pending

    def in_flight_count(self) -> int:
        return len(self.in_flight) + len(self._no_response)

    def next_deadline_ms(self) -> int:
        """The earliest deadline of the requests awaiting a response ("forever": none)."""
        return min((request.deadline_ms for request in self.in_flight), default=_FOREVER)


class ClusterConnectionStates:
    """Each node's connection, and its reconnect backoff (Kafka's ClusterConnectionStates).

    A failed attempt or a lost connection counts as a failure; the next attempt
    waits ``reconnect.backoff.ms`` doubling up to ``reconnect.backoff.max.ms``
    (with jitter); a connection that reaches READY resets the count.
    """

    def __init__(
        self,
        max_in_flight: int,
        reconnect_backoff_ms: int,
        reconnect_backoff_max_ms: int,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``ssl_context``: connections are TLS (``security.protocol=SSL``)."""
        self.conns: dict[int, BrokerConnection] = {}
        self._ssl_context = ssl_context
        self._failures: dict[int, tuple[int, int]] = {}  # node -> (failures, last attempt)
        self._max_in_flight = max_in_flight
        self._backoff = ExponentialBackoff(reconnect_backoff_ms, 2, reconnect_backoff_max_ms, 0.2)
        self._buffers = (send_buffer_bytes, receive_buffer_bytes)

    def can_send_request(self, node_id: int) -> bool:
        conn = self.conns.get(node_id)
        return (
            conn is not None
            and conn.state is ConnectionState.READY
            and not conn.has_pending_writes()
            and conn.in_flight_count() < self._max_in_flight
        )

    def is_connected(self, node_id: int) -> bool:
        conn = self.conns.get(node_id)
        return conn is not None and conn.state is ConnectionState.READY

    def is_connecting(self, node_id: int) -> bool:
        conn = self.conns.get(node_id)
        return conn is not None and conn.state in _CONNECTING

    def connection_delay(self, node: Node, now_ms: int) -> int:
        """Milliseconds until ``node`` may be connected to; "forever" when connected
        or connecting."""
        conn = self.conns.get(node.id)
        if conn is not None and conn.state is not ConnectionState.DISCONNECTED:
            return _FOREVER
        failures, last = self._failures.get(node.id, (0, 0))
        if failures == 0:
            return 0
        return max(last + self._backoff.backoff(failures - 1) - now_ms, 0)

    def can_connect(self, node: Node, now_ms: int) -> bool:
        return self.connection_delay(node, now_ms) == 0

    def connecting(self, node: Node, now_ms: int) -> BrokerConnection:
        """The (new) connection object for an attempt starting now."""
        conn = self.conns.get(node.id)
        if conn is None or conn.node != node:
            conn = self.conns[node.id] = BrokerConnection(
                node, *self._buffers, ssl_context=self._ssl_context
            )
        failures, _ = self._failures.get(node.id, (0, 0))
        self._failures[node.id] = (failures, now_ms)
        return conn

    def failed(self, node_id: int, now_ms: int) -> None:
        failures, last = self._failures.get(node_id, (0, now_ms))
        self._failures[node_id] = (failures + 1, last)

    def ready(self, node_id: int, now_ms: int) -> None:
        self._failures[node_id] = (0, now_ms)

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        if node_id is not None:
            conn = self.conns.get(node_id)
            return 0 if conn is None else conn.in_flight_count()
        return sum(conn.in_flight_count() for conn in self.conns.values())

    def least_loaded_node(self, nodes: list[Node], now_ms: int) -> Node | None:
        """Connected with the fewest in-flight requests (none: at once), else a node
        being connected to, else one that may be connected to; from a random start."""
        if not nodes:
            return None
        offset = random.randrange(len(nodes))
        best: Node | None = None
        best_in_flight = _FOREVER
        connecting: Node | None = None
        can_connect: Node | None = None
        for i in range(len(nodes)):
            node = nodes[(offset + i) % len(nodes)]
            conn = self.conns.get(node.id)
            if conn is not None and conn.state is ConnectionState.READY:
                count = conn.in_flight_count()
                if count == 0 and not conn.has_pending_writes():
                    return node
                if count < best_in_flight and count < self._max_in_flight:
                    best, best_in_flight = node, count
            elif conn is not None and conn.state is not ConnectionState.DISCONNECTED:
                connecting = connecting or node
            elif can_connect is None and self.connection_delay(node, now_ms) == 0:
                can_connect = node
        return best or connecting or can_connect


_CONNECTING = (
    ConnectionState.CONNECTING,
    ConnectionState.HANDSHAKING,
    ConnectionState.CHECKING_API_VERSIONS,
    ConnectionState.AUTHENTICATING,
)
