"""``NetworkClient``: requests to brokers over one connection each, from one thread.

Kafka's ``NetworkClient`` in Python: a selector over non-blocking sockets, one
:class:`~.connection.BrokerConnection` per node, correlation ids, in-flight
tracking with ``max.in.flight.requests.per.connection``, ApiVersions on connect
(so each request goes at the highest version both sides know), request timeouts
(``request.timeout.ms``: the connection is closed and its requests fail),
reconnect backoff, and the metadata updater that refreshes :class:`~.metadata.Metadata`
from the least loaded node. Everything happens inside :meth:`poll`, on the thread
that owns the client; :meth:`wakeup` is the one method other threads may call.

It is general: the producer's Sender drives it directly; the consumer, the admin
client and the transaction client drive it through a
:class:`~.consumer_network_client.ConsumerNetworkClient`, which polls until a
request completes. Each request may carry its own timeout (a long-polling Fetch
waits longer than ``request.timeout.ms``). Who refreshes metadata is a
:class:`MetadataUpdater`: by default the client itself when
:class:`~.metadata.Metadata` says one is due; with :class:`ManualMetadataUpdater`
only its owner, explicitly.
"""

from __future__ import annotations

import contextlib
import logging
import random
import selectors
import socket
import ssl
from collections.abc import Callable
from typing import Any, Protocol

from sluice.base.clock import Clock
from sluice.client.errors import (
    SaslAuthenticationException,
    UnsupportedSaslMechanismException,
    UnsupportedVersionException,
)
from sluice.client.net.client_request import ClientRequest, ClientResponse, InFlightRequest
from sluice.client.net.cluster import Node
from sluice.client.net.connection import BrokerConnection, ClusterConnectionStates, ConnectionState
from sluice.client.net.metadata import Metadata
from sluice.client.net.requests import CLIENT_VERSIONS, api_versions_request, metadata_request
from sluice.protocol import (
    ApiKey,
    ErrorCode,
    ProtocolError,
    encode_request,
    encode_request_header,
    frame_segments,
    request_type,
)
from sluice.protocol.build import build
from sluice.protocol.responses import decode_response
from sluice.security.sasl.client import (
    SaslAuthenticationError,
    SaslClient,
    SaslClientExchange,
    UnsupportedSaslMechanismError,
)

__all__ = [
    "ClientRequest",
    "ClientResponse",
    "DefaultMetadataUpdater",
    "ManualMetadataUpdater",
    "MetadataUpdater",
    "NetworkClient",
]

log = logging.getLogger(__name__)

_FOREVER = 2**63 - 1


class NetworkClient:
    """Connections, in-flight requests and metadata refresh for one client thread."""

    def __init__(
        self,
        metadata: Metadata,
        clock: Clock,
        client_id: str | None = None,
        max_in_flight_requests_per_connection: int = 5,
        request_timeout_ms: int = 30_000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        connection_setup_timeout_ms: int = 10_000,
        send_buffer_bytes: int = 131_072,
        receive_buffer_bytes: int = 32_768,
        metadata_updater: MetadataUpdater | None = None,
        ssl_context: ssl.SSLContext | None = None,
        sasl: Callable[[], SaslClient] | None = None,
    ) -> None:
        """``ssl_context``: connect with TLS (``security.protocol=SSL``); ``sasl``: each
        connection authenticates with this mechanism's client after ApiVersions."""
        self._sasl = sasl
        self.metadata = metadata
        self._clock = clock
        self.client_id = client_id
        self._max_in_flight = max_in_flight_requests_per_connection
        self.request_timeout_ms = request_timeout_ms
        self._setup_timeout_ms = connection_setup_timeout_ms
        self._states = ClusterConnectionStates(
            max_in_flight_requests_per_connection,
            reconnect_backoff_ms,
            reconnect_backoff_max_ms,
            send_buffer_bytes,
            receive_buffer_bytes,
            ssl_context,
        )
        self._conns = self._states.conns
        self._correlation_id = 0
        self._selector = selectors.DefaultSelector()
        self._wakeup_r, self._wakeup_w = socket.socketpair()
        self._wakeup_r.setblocking(False)
        self._wakeup_w.setblocking(False)
        self._selector.register(self._wakeup_r, selectors.EVENT_READ, None)
        self._wakeup_pending = False
        self._completed: list[ClientResponse] = []
        self.metadata_updater: MetadataUpdater = metadata_updater or DefaultMetadataUpdater(
            self, metadata
        )

    # -- connection state -------------------------------------------------------------

    def ready(self, node: Node, now_ms: int) -> bool:
        """Whether a request can go to ``node`` now; starts connecting if it may."""
        if self.is_ready(node, now_ms):
            return True
        self.maybe_connect(node, now_ms)
        return False

    def is_ready(self, node: Node, now_ms: int) -> bool:
        """Connected, ApiVersions known, and room for another in-flight request.

        While a metadata refresh is due, only the updater may send (it comes first).
        """
        if self.metadata_updater.is_update_due(now_ms):
            return False
        return self._states.can_send_request(node.id)

    def can_send_request(self, node_id: int) -> bool:
        return self._states.can_send_request(node_id)

    def is_connected(self, node_id: int) -> bool:
        return self._states.is_connected(node_id)

    def is_connecting(self, node_id: int) -> bool:
        return self._states.is_connecting(node_id)

    def connection_delay(self, node: Node, now_ms: int) -> int:
        """Milliseconds before a connection to ``node`` may be attempted (0: now);
        "forever" when connecting or connected (an event will wake the poll)."""
        return self._states.connection_delay(node, now_ms)

    poll_delay_ms = connection_delay

    def maybe_connect(self, node: Node, now_ms: int) -> bool:
        """Start connecting to ``node`` unless connected, connecting or backing off;
        returns whether an attempt was started."""
        if not self._states.can_connect(node, now_ms):
            return False
        conn = self._states.connecting(node, now_ms)
        try:
            conn.connect(now_ms)
        except OSError as exc:
            log.warning("Connection to node %d (%s:%d) could not be established: %s",
                        node.id, node.host, node.port, exc)  # fmt: skip
            self._states.failed(node.id, now_ms)
            self.metadata.request_update()
            return True
        assert conn.sock is not None
        self._selector.register(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
        log.debug("Initiating connection to node %s", node)
        return True

    def least_loaded_node(self, now_ms: int) -> Node | None:
        """A node to send a metadata-like request to: connected with the fewest
        in-flight requests, else one connecting, else one we may connect to."""
        return self._states.least_loaded_node(list(self.metadata.cluster.nodes.values()), now_ms)

    def api_versions(self, node_id: int) -> dict[int, tuple[int, int]] | None:
        """The API versions ``node_id`` advertised, once connected."""
        conn = self._conns.get(node_id)
        return conn.api_versions if conn is not None and conn.api_versions else None

    def latest_usable_version(self, node_id: int, api_key: int) -> int:
        """The highest version of ``api_key`` both this client and the node support.

        :raises UnsupportedVersionException: there is none.
        """
        ours = CLIENT_VERSIONS.get(api_key)
        theirs = (self.api_versions(node_id) or {}).get(api_key)
        if ours is None or theirs is None or max(ours[0], theirs[0]) > min(ours[1], theirs[1]):
            name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else api_key
            raise UnsupportedVersionException(
                f"The broker (node {node_id}) does not support {name} in a version this "
                f"client implements (client: {ours}, broker: {theirs})"
            )
        return min(ours[1], theirs[1])

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        return self._states.in_flight_request_count(node_id)

    def has_in_flight_requests(self, node_id: int | None = None) -> bool:
        return self.in_flight_request_count(node_id) > 0

    # -- sending ------------------------------------------------------------------------

    def send(self, request: ClientRequest, now_ms: int) -> None:
        """Send ``request`` to its node, which must be ready (see :meth:`ready`).

        :raises UnsupportedVersionException: no common version of the API.
        """
        conn = self._conns.get(request.destination)
        if conn is None or conn.state is ConnectionState.DISCONNECTED:
            raise RuntimeError(f"node {request.destination} is not connected")
        version = request.version
        if version is None:
            version = self.latest_usable_version(request.destination, request.api_key)
        self._do_send(conn, request, version, now_ms)

    def _do_send(
        self, conn: BrokerConnection, request: ClientRequest, version: int, now_ms: int
    ) -> None:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._correlation_id
        body = request.build(version)
        if isinstance(body, list):  # a pre-encoded body: frame it with its header
            header = encode_request_header(request.api_key, version, correlation_id, self.client_id)
            segments = frame_segments([header, *body])
        else:
            segments = [encode_request(correlation_id, body, self.client_id)]
        timeout_ms = self.request_timeout_ms if request.timeout_ms is None else request.timeout_ms
        in_flight = InFlightRequest(
            conn.node.id, correlation_id, request.api_key, version, request.expect_response,
            now_ms, request.callback, request.decode, now_ms + timeout_ms,
        )  # fmt: skip
        conn.enqueue(segments, in_flight)
        self._write(conn, now_ms)

    def _write(self, conn: BrokerConnection, now_ms: int) -> None:
        try:
            for done in conn.write():
                self._completed.append(ClientResponse(done, now_ms, None))
        except OSError as exc:
            self._close(conn, now_ms, f"write failed: {exc}")
            return
        if conn.sock is not None:
            events = selectors.EVENT_READ
            if conn.has_pending_writes():
                events |= selectors.EVENT_WRITE
            self._selector.modify(conn.sock, events, conn)

    # -- polling ------------------------------------------------------------------------

    def wakeup(self) -> None:
        """Interrupt a blocking :meth:`poll` (any thread).

        A byte is written only when none is pending. The poll drains the pipe
        *before* clearing the flag, so the flag can never stay set over an empty
        pipe (which would lose every later wakeup); at worst a stale byte causes
        one spurious wakeup.
        """
        if not self._wakeup_pending:
            self._wakeup_pending = True
            with contextlib.suppress(OSError):  # a full pipe: a wakeup is pending anyway
                self._wakeup_w.send(b"\x00")

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        """Do the network I/O due, waiting up to ``timeout_ms``; complete responses
        (their callbacks run here) and return them."""
        metadata_timeout = self.metadata_updater.maybe_update(now_ms)
        timeout = min(timeout_ms, metadata_timeout, self._next_timeout_ms(now_ms))
        if self._completed:
            timeout = 0
        events = self._selector.select(max(timeout, 0) / 1000)
        now_ms = self._clock.hi_res_clock_ms()
        for key, mask in events:
            conn = key.data
            if conn is None:
                self._drain_wakeup()
                continue
            self._handle_events(conn, mask, now_ms)
        self._handle_timeouts(now_ms)
        if self._sasl is not None:
            self._maybe_reauthenticate(now_ms)
        completed, self._completed = self._completed, []
        for response in completed:
            response.on_complete()
        return completed

    def _handle_events(self, conn: BrokerConnection, mask: int, now_ms: int) -> None:
        try:
            if conn.state is ConnectionState.CONNECTING:
                if not mask & selectors.EVENT_WRITE:
                    return
                raw = conn.sock
                assert raw is not None
                handshaking = conn.finish_connect()
                log.debug("Connected to node %s", conn.node)
                if not handshaking:
                    self._send_api_versions(conn, CLIENT_VERSIONS[ApiKey.API_VERSIONS][1], now_ms)
                    return
                assert conn.sock is not None  # wrapped in TLS: a new object, same descriptor
                self._selector.unregister(raw)
                self._selector.register(conn.sock, selectors.EVENT_READ, conn)
            if conn.state is ConnectionState.HANDSHAKING:
                self._handshake(conn, now_ms)
                return
            if mask & selectors.EVENT_READ:
                for request, frame in conn.read():
                    self._completed.append(self._decode(request, frame, now_ms))
            if mask & selectors.EVENT_WRITE and conn.sock is not None:
                self._write(conn, now_ms)
        except ssl.SSLError as exc:  # a handshake refused: worth saying, it will not heal
            log.warning("TLS with node %d (%s:%d) failed: %s",
                        conn.node.id, conn.node.host, conn.node.port, exc)  # fmt: skip
            self._close(conn, now_ms, f"TLS failed: {exc}")
        except (OSError, ProtocolError) as exc:
            self._close(conn, now_ms, str(exc))

    def _handshake(self, conn: BrokerConnection, now_ms: int) -> None:
        """Advance a TLS handshake; once done, ApiVersions goes out."""
        waiting = conn.handshake()
        assert conn.sock is not None
        if waiting:
            self._selector.modify(conn.sock, waiting, conn)
            return
        log.debug("TLS handshake with node %s done", conn.node)
        self._selector.modify(conn.sock, selectors.EVENT_READ, conn)
        self._send_api_versions(conn, CLIENT_VERSIONS[ApiKey.API_VERSIONS][1], now_ms)

    def _decode(self, request: InFlightRequest, frame: memoryview, now_ms: int) -> ClientResponse:
        if request.decode is not None:
            body = request.decode(frame, request.api_version)
        else:
            body = decode_response(frame, request.api_key, request.api_version).body
        return ClientResponse(request, now_ms, body)

    def _next_timeout_ms(self, now_ms: int) -> int:
        timeout = _FOREVER
        for conn in self._conns.values():
            if conn.state in (ConnectionState.CONNECTING, ConnectionState.HANDSHAKING):
                timeout = min(timeout, conn.connect_started_ms + self._setup_timeout_ms - now_ms)
            if conn.in_flight:
                timeout = min(timeout, conn.next_deadline_ms() - now_ms)
            elif conn.state is ConnectionState.READY:
                timeout = min(timeout, conn.reauthenticate_at_ms - now_ms)
        return max(timeout, 0)

    def _handle_timeouts(self, now_ms: int) -> None:
        for conn in list(self._conns.values()):
            if conn.state is ConnectionState.DISCONNECTED:
                continue
            if (
                conn.state is not ConnectionState.READY
                and now_ms - conn.connect_started_ms >= self._setup_timeout_ms
            ):
                self._close(conn, now_ms, "connection setup timed out", timed_out=True)
            elif conn.in_flight and now_ms >= conn.next_deadline_ms():
                self._close(conn, now_ms, "request timed out", timed_out=True)

    def _drain_wakeup(self) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while self._wakeup_r.recv(4096):
                pass
        self._wakeup_pending = False  # after draining: see wakeup()

    # -- ApiVersions ----------------------------------------------------------------------

    def _send_api_versions(self, conn: BrokerConnection, version: int, now_ms: int) -> None:
        conn.state = ConnectionState.CHECKING_API_VERSIONS

        def done(response: ClientResponse) -> None:
            self._handle_api_versions(conn, response, now_ms)

        request = ClientRequest(
            conn.node.id, ApiKey.API_VERSIONS, lambda v: api_versions_request(v), done,
            version=version, decode=_decode_api_versions,
        )  # fmt: skip
        self._do_send(conn, request, version, now_ms)

    def _handle_api_versions(
        self, conn: BrokerConnection, response: ClientResponse, now_ms: int
    ) -> None:
        if response.disconnected or conn.state is not ConnectionState.CHECKING_API_VERSIONS:
            return
        body: Any = response.body
        code = ErrorCode(body.error_code)
        versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
        if code is ErrorCode.unsupported_version and ApiKey.API_VERSIONS in versions:
            fallback = min(versions[ApiKey.API_VERSIONS][1], response.request.api_version - 1)
            if fallback >= 0:
                self._send_api_versions(conn, fallback, now_ms)
                return
        if code is not ErrorCode.none:
            self._close(conn, now_ms, f"ApiVersions failed with {code.name.upper()}")
            return
        conn.api_versions = versions
        if self._sasl is not None:
            self._authenticate(conn, None, None, now_ms)
            return
        self._ready(conn, now_ms)

    def _ready(self, conn: BrokerConnection, now_ms: int) -> None:
        conn.state = ConnectionState.READY
        self._states.ready(conn.node.id, now_ms)
        log.debug("Node %d is ready", conn.node.id)

    # -- SASL (sluice.security.sasl.client) ------------------------------------------------

    def _authenticate(
        self,
        conn: BrokerConnection,
        exchange: SaslClientExchange | None,
        response: ClientResponse | None,
        now_ms: int,
    ) -> None:
        """One step of Kafka's SaslClientAuthenticator: SaslHandshake v1, then
        SaslAuthenticate v2 until the mechanism is done; a refusal is fatal for the
        client (Metadata.fatal_error), not retried as a network error."""
        if response is not None and (
            response.disconnected or conn.state is not ConnectionState.AUTHENTICATING
        ):
            return
        try:
            if exchange is None:
                assert self._sasl is not None
                exchange = SaslClientExchange(self._sasl())
                conn.state = ConnectionState.AUTHENTICATING
                body: Any = {"mechanism": exchange.mechanism}
                self._sasl_send(conn, ApiKey.SASL_HANDSHAKE, 1, body, exchange, now_ms)
                return
            assert response is not None
            answer: Any = response.body
            if response.request.api_key == ApiKey.SASL_HANDSHAKE:
                exchange.on_handshake(answer.error_code, answer.mechanisms)
            else:
                lifetime = int(answer.session_lifetime.total_seconds() * 1000)
                exchange.on_authenticate(
                    answer.error_code, answer.error_message, answer.auth_bytes, lifetime
                )
            token = exchange.next_token()
        except (SaslAuthenticationError, UnsupportedSaslMechanismError) as exc:
            error: Exception = (
                SaslAuthenticationException(str(exc))
                if isinstance(exc, SaslAuthenticationError)
                else UnsupportedSaslMechanismException(str(exc))
            )
            log.error("Authentication with node %d (%s:%d) failed: %s",
                      conn.node.id, conn.node.host, conn.node.port, exc)  # fmt: skip
            self._close(conn, now_ms, f"authentication failed: {exc}")
            self.metadata.fatal_error(error)
            return
        if token is None:
            log.debug("Authenticated with node %d (%s)", conn.node.id, exchange.mechanism)
            lifetime = exchange.session_lifetime_ms
            # KIP-368: authenticate again at 85-95% of the session, as Kafka's clients do
            conn.reauthenticate_at_ms = (
                now_ms + int(lifetime * random.uniform(0.85, 0.95)) if lifetime > 0 else _FOREVER
            )
            self._ready(conn, now_ms)
            return
        self._sasl_send(conn, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token}, exchange, now_ms)

    def _maybe_reauthenticate(self, now_ms: int) -> None:
        """Re-authenticate (KIP-368) each ready connection whose session is ending, once
        nothing is in flight on it; meanwhile it takes no new requests."""
        for conn in list(self._conns.values()):
            if (
                conn.state is ConnectionState.READY
                and now_ms >= conn.reauthenticate_at_ms
                and not conn.in_flight
            ):
                log.debug("Re-authenticating with node %d", conn.node.id)
                conn.connect_started_ms = now_ms  # the setup timeout bounds it too
                self._authenticate(conn, None, None, now_ms)

    def _sasl_send(
        self,
        conn: BrokerConnection,
        api_key: int,
        version: int,
        fields: dict[str, Any],
        exchange: SaslClientExchange,
        now_ms: int,
    ) -> None:
        def done(response: ClientResponse) -> None:
            self._authenticate(conn, exchange, response, self._clock.hi_res_clock_ms())

        request = ClientRequest(
            conn.node.id, api_key, lambda v: build(request_type(api_key, v), **fields), done,
            version=version,
        )  # fmt: skip
        self._do_send(conn, request, version, now_ms)

    # -- closing --------------------------------------------------------------------------

    def disconnect(self, node_id: int) -> None:
        conn = self._conns.get(node_id)
        if conn is not None:
            self._close(conn, self._clock.hi_res_clock_ms(), "disconnect requested")

    def _close(
        self, conn: BrokerConnection, now_ms: int, reason: str, timed_out: bool = False
    ) -> None:
        if conn.sock is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(conn.sock)
        was_ready = conn.state is ConnectionState.READY
        pending = conn.close()
        self._states.failed(conn.node.id, now_ms)
        # A close we asked for is routine; losing a ready connection is worth a warning.
        unexpected = (was_ready or timed_out) and reason != "client closed"
        log_fn = log.warning if unexpected else log.debug
        log_fn("Disconnected from node %d (%s:%d): %s",
               conn.node.id, conn.node.host, conn.node.port, reason)  # fmt: skip
        for request in pending:
            self._completed.append(
                ClientResponse(request, now_ms, None, disconnected=True, timed_out=timed_out)
            )
        self.metadata.request_update()

    def close(self) -> None:
        """Close every connection (pending requests complete as disconnected)."""
        now_ms = self._clock.hi_res_clock_ms()
        for conn in list(self._conns.values()):
            if conn.state is not ConnectionState.DISCONNECTED:
                self._close(conn, now_ms, "client closed")
        completed, self._completed = self._completed, []
        for response in completed:
            response.on_complete()
        self._selector.close()
        self._wakeup_r.close()
        self._wakeup_w.close()


def _decode_api_versions(frame: memoryview, version: int) -> Any:
    """ApiVersions responses: an UNSUPPORTED_VERSION answer comes as v0 (KIP-511)."""
    try:
        return decode_response(frame, ApiKey.API_VERSIONS, version).body
    except ProtocolError:
        if version == 0:
            raise
        return decode_response(frame, ApiKey.API_VERSIONS, 0).body


# -- metadata updaters ------------------------------------------------------------------


class MetadataUpdater(Protocol):
    """Who sends Metadata requests from :meth:`NetworkClient.poll` (Kafka's interface)."""

    def is_update_due(self, now_ms: int) -> bool:
        """Whether an update must go out before any other request."""
        ...

    def maybe_update(self, now_ms: int) -> int:
        """Send a Metadata request if due; return ms until it should be checked again."""
        ...


class ManualMetadataUpdater:
    """Never sends Metadata on its own: the client's owner refreshes explicitly
    (Kafka's ``ManualMetadataUpdater``, as its admin client uses)."""

    def is_update_due(self, now_ms: int) -> bool:
        return False

    def maybe_update(self, now_ms: int) -> int:
        return _FOREVER


class DefaultMetadataUpdater:
    """Sends Metadata requests when :class:`~.metadata.Metadata` says one is due
    (Kafka's ``DefaultMetadataUpdater``), to the least loaded node."""

    def __init__(self, client: NetworkClient, metadata: Metadata) -> None:
        self._client = client
        self._metadata = metadata
        self.in_flight = False

    def is_update_due(self, now_ms: int) -> bool:
        return not self.in_flight and self._metadata.time_to_next_update(now_ms) == 0

    def maybe_update(self, now_ms: int) -> int:
        client = self._client
        time_to_next = self._metadata.time_to_next_update(now_ms)
        wait_for_fetch = client.request_timeout_ms if self.in_flight else 0
        delay = max(time_to_next, wait_for_fetch)
        if delay > 0:
            return delay
        node = client.least_loaded_node(now_ms)
        if node is None:
            log.debug("Give up sending metadata request since no node is available")
            self._metadata.failed_update(now_ms)
            return 50
        if client.can_send_request(node.id):
            topics, partial = self._metadata.request_topics(now_ms)
            try:
                version = client.latest_usable_version(node.id, ApiKey.METADATA)
            except UnsupportedVersionException as exc:
                log.error("%s", exc)
                self._metadata.failed_update(now_ms)
                return client.request_timeout_ms
            allow = self._metadata.allow_auto_topic_creation

            def done(response: ClientResponse) -> None:
                self.in_flight = False
                if response.disconnected:
                    self._metadata.failed_update(response.received_ms)
                else:
                    self._metadata.update(response.body, topics, partial, response.received_ms)

            log.debug("Sending metadata request for %s to node %s", topics, node)
            self.in_flight = True
            client.send(
                ClientRequest(node.id, ApiKey.METADATA,
                              lambda v: metadata_request(v, topics, allow), done,
                              version=version),
                now_ms,
            )  # fmt: skip
            return client.request_timeout_ms
        if client.is_connecting(node.id) or client.is_connected(node.id):
            return 50
        client.maybe_connect(node, now_ms)
        delay = client.connection_delay(node, now_ms)
        return delay if 0 < delay < 2**62 else 50
