"""Broker-to-broker wire: the controller's requests and a small async client.

kio (Kafka 4.x schemas) has no LeaderAndIsr (4), StopReplica (5) or UpdateMetadata (6)
any more, so their non-flexible versions are encoded here by hand, byte-compatible
with Kafka: LeaderAndIsr v2, StopReplica v1, UpdateMetadata v5 (header v1 requests,
v0 responses). :class:`NetworkControllerChannel` implements the controller's
``ControllerChannel`` with one queue and one connection per broker, on the broker's
event loop. Other APIs (Fetch for replication) use the kio codecs through
:class:`BrokerConnection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from sluice.base import TopicPartition
from sluice.config import SECURITY_PROTOCOLS
from sluice.controller.events import ControlledShutdownResult
from sluice.controller.model import Broker, EndPoint
from sluice.controller.requests import (
    ControllerRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ResponseCallback,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from sluice.protocol import ErrorCode, FrameDecoder, FrameSizeError, encode_request
from sluice.protocol.apis import InterBrokerApiKey
from sluice.security.sasl.client import SaslClient, SaslClientExchange
from sluice.server.congestion import set_on_loopback
from sluice.server.low_water import ReceiveLowWater

if TYPE_CHECKING:
    from sluice.server.listener_security import InterBrokerListener

try:  # the protocol package's response decoder, when present
    from sluice.protocol.responses import decode_response
except ImportError:  # pragma: no cover
    decode_response = None  # type: ignore[assignment]

__all__ = [
    "LEADER_AND_ISR_VERSION",
    "STOP_REPLICA_VERSION",
    "UPDATE_METADATA_VERSION",
    "BrokerConnection",
    "ControlledShutdownRequest",
    "NetworkControllerChannel",
    "decode_controller_request",
    "decode_controller_response",
    "encode_controller_request",
    "encode_controller_response",
    "serve_raw_request",
]

log = logging.getLogger(__name__)

LEADER_AND_ISR = InterBrokerApiKey.LEADER_AND_ISR
STOP_REPLICA = InterBrokerApiKey.STOP_REPLICA
UPDATE_METADATA = InterBrokerApiKey.UPDATE_METADATA
LEADER_AND_ISR_VERSION, STOP_REPLICA_VERSION, UPDATE_METADATA_VERSION = 2, 1, 5
CONTROLLER_APIS: dict[int, int] = {
    LEADER_AND_ISR: LEADER_AND_ISR_VERSION,
    STOP_REPLICA: STOP_REPLICA_VERSION,
    UPDATE_METADATA: UPDATE_METADATA_VERSION,
}
# A broker's request to the controller (also gone from Kafka 4's schemas): v2 carries
# the broker epoch so that a restarted broker's stale request is refused.
CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN_VERSION = InterBrokerApiKey.CONTROLLED_SHUTDOWN, 2
RAW_API_VERSIONS: dict[int, int] = {
    **CONTROLLER_APIS,
    CONTROLLED_SHUTDOWN: CONTROLLED_SHUTDOWN_VERSION,
}


class _W:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i8(self, v: int) -> _W:
        self.parts.append(struct.pack(">b", v))
        return self

    def i16(self, v: int) -> _W:
        self.parts.append(struct.pack(">h", v))
        return self

    def i32(self, v: int) -> _W:
        self.parts.append(struct.pack(">i", v))
        return self

    def i64(self, v: int) -> _W:
        self.parts.append(struct.pack(">q", v))
        return self

    def string(self, v: str | None) -> _W:
        if v is None:
            return self.i16(-1)
        raw = v.encode()
        self.i16(len(raw))
        self.parts.append(raw)
        return self

    def ints(self, vs: Any) -> _W:
        vs = list(vs)
        self.i32(len(vs))
        for v in vs:
            self.i32(v)
        return self

    def bytes(self) -> bytes:
        return b"".join(self.parts)


class _R:
    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf, self.pos = bytes(buf), pos

    def _take(self, fmt: str) -> int:
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(v)

    def i8(self) -> int:
        return self._take(">b")

    def i16(self) -> int:
        return self._take(">h")

    def i32(self) -> int:
        return self._take(">i")

    def i64(self) -> int:
        return self._take(">q")

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        v = self.buf[self.pos : self.pos + n].decode()
        self.pos += n
        return v

    def ints(self) -> tuple[int, ...]:
        return tuple(self.i32() for _ in range(max(0, self.i32())))


def _by_topic(states: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for s in states:
        out.setdefault(s.topic_partition.topic, []).append(s)
    return out


def api_key_of(request: ControllerRequest) -> int:
    if isinstance(request, LeaderAndIsrRequest):
        return LEADER_AND_ISR
    if isinstance(request, StopReplicaRequest):
        return STOP_REPLICA
    return UPDATE_METADATA


def encode_controller_request(
    request: ControllerRequest, listener_name: str = "PLAINTEXT"
) -> bytes:
    """The body (no header) of a controller request; StopReplica v1 takes one delete flag,
    so a StopReplica must not mix deleting and non-deleting partitions. LeaderAndIsr names
    each live leader by its endpoint on ``listener_name`` (the inter-broker listener), as
    Kafka's does; UpdateMetadata carries every endpoint with its security protocol."""
    w = _W().i32(request.controller_id).i32(request.controller_epoch).i64(request.broker_epoch)
    if isinstance(request, LeaderAndIsrRequest):
        topics = _by_topic(request.partition_states)
        w.i32(len(topics))
        for topic, states in topics.items():
            w.string(topic).i32(len(states))
            for s in states:
                w.i32(s.topic_partition.partition).i32(s.controller_epoch).i32(s.leader)
                w.i32(s.leader_epoch).ints(s.isr).i32(s.partition_epoch).ints(s.replicas)
                w.i8(1 if s.is_new else 0)
        w.i32(len(request.live_leaders))
        for b in request.live_leaders:
            ep = b.endpoint(listener_name) or EndPoint("", -1)
            w.i32(b.id).string(ep.host).i32(ep.port)
        return w.bytes()
    if isinstance(request, StopReplicaRequest):
        delete = any(s.delete_partition for s in request.partition_states)
        w.i8(1 if delete else 0)
        topics = _by_topic(request.partition_states)
        w.i32(len(topics))
        for topic, states in topics.items():
            w.string(topic).ints(s.topic_partition.partition for s in states)
        return w.bytes()
    topics = _by_topic(request.partition_states)
    w.i32(len(topics))
    for topic, states in topics.items():
        w.string(topic).i32(len(states))
        for s in states:
            w.i32(s.topic_partition.partition).i32(s.controller_epoch).i32(s.leader)
            w.i32(s.leader_epoch).ints(s.isr).i32(s.zk_version).ints(s.replicas)
            w.ints(s.offline_replicas)
    w.i32(len(request.live_brokers))
    for b in request.live_brokers:
        w.i32(b.id).i32(len(b.endpoints))
        for ep in b.endpoints:
            w.i32(ep.port).string(ep.host).string(ep.listener_name)
            w.i16(SECURITY_PROTOCOLS.index(ep.security_protocol))
        w.string(b.rack)
    return w.bytes()


def decode_controller_request(api_key: int, body: bytes) -> ControllerRequest:
    r = _R(body)
    controller_id, controller_epoch, broker_epoch = r.i32(), r.i32(), r.i64()
    if api_key == LEADER_AND_ISR:
        lstates = []
        for _ in range(r.i32()):
            topic = r.string() or ""
            for _ in range(r.i32()):
                p, ce, leader, le = r.i32(), r.i32(), r.i32(), r.i32()
                isr, pe, replicas, is_new = r.ints(), r.i32(), r.ints(), bool(r.i8())
                lstates.append(
                    LeaderAndIsrPartitionState(
                        TopicPartition(topic, p),
                        ce,
                        leader,
                        le,
                        isr,
                        pe,
                        replicas,
                        is_new=is_new,
                    )
                )
        leaders = []
        for _ in range(r.i32()):
            bid, host, port = r.i32(), r.string() or "", r.i32()
            leaders.append(Broker.plaintext(bid, host, port))
        return LeaderAndIsrRequest(
            controller_id, controller_epoch, broker_epoch, tuple(lstates), {}, tuple(leaders)
        )
    if api_key == STOP_REPLICA:
        delete = bool(r.i8())
        sstates = []
        for _ in range(r.i32()):
            topic = r.string() or ""
            for p in r.ints():
                sstates.append(StopReplicaPartitionState(TopicPartition(topic, p), -1, delete))
        return StopReplicaRequest(controller_id, controller_epoch, broker_epoch, tuple(sstates))
    ustates = []
    for _ in range(r.i32()):
        topic = r.string() or ""
        for _ in range(r.i32()):
            p, ce, leader, le = r.i32(), r.i32(), r.i32(), r.i32()
            isr, zv, replicas, offline = r.ints(), r.i32(), r.ints(), r.ints()
            ustates.append(
                UpdateMetadataPartitionState(
                    TopicPartition(topic, p), ce, leader, le, isr, zv, replicas, offline
                )
            )
    brokers = []
    for _ in range(r.i32()):
        bid = r.i32()
        eps = []
        for _ in range(r.i32()):
            port, host, listener, protocol = r.i32(), r.string() or "", r.string(), r.i16()
            eps.append(EndPoint(host, port, listener or "PLAINTEXT", SECURITY_PROTOCOLS[protocol]))
        brokers.append(Broker(bid, tuple(eps), r.string()))
    return UpdateMetadataRequest(
        controller_id, controller_epoch, broker_epoch, tuple(ustates), tuple(brokers), {}
    )


def encode_controller_response(api_key: int, response: Any) -> bytes:
    w = _W().i16(int(response.error_code))
    if api_key in (LEADER_AND_ISR, STOP_REPLICA):
        errors = response.partition_errors
        w.i32(len(errors))
        for tp, code in errors.items():
            w.string(tp.topic).i32(tp.partition).i16(int(code))
    return w.bytes()


def decode_controller_response(api_key: int, body: bytes) -> Any:
    r = _R(body)
    error = ErrorCode(r.i16())
    if api_key == UPDATE_METADATA:
        return UpdateMetadataResponse(error)
    errors = {}
    for _ in range(r.i32()):
        topic, p, code = r.string() or "", r.i32(), r.i16()
        errors[TopicPartition(topic, p)] = ErrorCode(code)
    if api_key == LEADER_AND_ISR:
        return LeaderAndIsrResponse(error, errors)
    return StopReplicaResponse(error, errors)


def encode_controlled_shutdown_request(broker_id: int, broker_epoch: int) -> bytes:
    return _W().i32(broker_id).i64(broker_epoch).bytes()


class ControlledShutdownRequest(NamedTuple):
    """A broker's request to the controller to move its leaders away before it stops."""

    broker_id: int
    broker_epoch: int


def decode_controlled_shutdown_request(body: bytes) -> ControlledShutdownRequest:
    r = _R(body)
    return ControlledShutdownRequest(r.i32(), r.i64())


def encode_controlled_shutdown_response(result: ControlledShutdownResult) -> bytes:
    remaining = sorted(result.partitions_remaining)
    w = _W().i16(int(result.error_code)).i32(len(remaining))
    for tp in remaining:
        w.string(tp.topic).i32(tp.partition)
    return w.bytes()


def decode_controlled_shutdown_response(body: bytes) -> ControlledShutdownResult:
    r = _R(body)
    error = ErrorCode(r.i16())
    remaining = frozenset(TopicPartition(r.string() or "", r.i32()) for _ in range(max(0, r.i32())))
    return ControlledShutdownResult(error, remaining)


def parse_raw_request(frame: bytes) -> tuple[int, int, int, bytes]:
    """(api_key, api_version, correlation_id, body) of a v1-header request frame."""
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame, 0)
    (n,) = struct.unpack_from(">h", frame, 8)
    return api_key, api_version, correlation_id, bytes(frame[10 + max(0, n) :])


def serve_raw_request(frame: bytes, handle: Callable[[object], object]) -> bytes | Awaitable[bytes]:
    """The framed answer to an inter-broker request ``frame``, from ``handle`` (its API
    module's handler, given the decoded request); ControlledShutdown's is awaited."""
    api_key, _version, correlation_id, body = parse_raw_request(frame)
    if api_key == CONTROLLED_SHUTDOWN:
        return _framed_when_done(correlation_id, handle(decode_controlled_shutdown_request(body)))
    response = handle(decode_controller_request(api_key, body))
    return _framed(correlation_id, encode_controller_response(api_key, response))


async def _framed_when_done(correlation_id: int, answer: object) -> bytes:
    result = await answer if inspect.isawaitable(answer) else answer
    if not isinstance(result, ControlledShutdownResult):
        raise TypeError(f"a ControlledShutdown answer, not {result!r}")
    return _framed(correlation_id, encode_controlled_shutdown_response(result))


def _framed(correlation_id: int, body: bytes) -> bytes:
    """A response frame: size, correlation id (response header v0), body."""
    return struct.pack(">ii", 4 + len(body), correlation_id) + body


def raw_request_frame(api_key: int, correlation_id: int, body: bytes, client_id: str) -> bytes:
    head = struct.pack(">hhi", api_key, RAW_API_VERSIONS[api_key], correlation_id)
    cid = client_id.encode()
    payload = head + struct.pack(">h", len(cid)) + cid + body
    return struct.pack(">i", len(payload)) + payload


MAX_RESPONSE_BYTES = 256 * 1024 * 1024
RESPONSE_SPARE_BUFFERS = 2
"""Large answers' buffers kept: enough for one answer to arrive while the one before it
is still referenced."""


class _ResponseReader(asyncio.BufferedProtocol):
    """Receives the size-prefixed answers of one connection with one request in flight,
    straight from the socket into the buffers of a :class:`~sluice.protocol.FrameDecoder`:
    small frames through its receive buffer (then copied out once), large ones into a
    buffer of their own, reused for a later answer once nothing refers to the earlier
    one (the replica fetcher's answers take turns in two). While a large one arrives the
    socket wakes the loop once for its rest (:class:`ReceiveLowWater`)."""

    def __init__(self) -> None:
        self._decoder = FrameDecoder(
            MAX_RESPONSE_BYTES, spare_buffers=RESPONSE_SPARE_BUFFERS,
            max_spare_bytes=MAX_RESPONSE_BYTES,
        )  # fmt: skip
        self._waiter: asyncio.Future[bytes | memoryview] | None = None
        self._error: BaseException | None = None
        self.transport: asyncio.Transport | None = None
        self.low_water = ReceiveLowWater()  # bound to the socket once connected

    def expect(self) -> asyncio.Future[bytes | memoryview]:
        """The future of the next frame."""
        waiter = asyncio.get_running_loop().create_future()
        if self._error is not None:
            waiter.set_exception(self._error)
            return waiter
        self._waiter = waiter
        return waiter

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.low_water = ReceiveLowWater(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionResetError("connection closed by the broker"))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        decoder = self._decoder
        try:
            decoder.buffer_updated(nbytes)
        except FrameSizeError as exc:
            self._fail(ConnectionError(f"response frame size {exc.size} out of range"))
            return
        self.low_water.expect(decoder.frame_rest)
        frame = decoder.next_frame()
        if frame is None:
            return
        if decoder.buffered or decoder.first_frame() is not None:
            self._fail(ConnectionError("bytes received beyond the awaited response"))
            return
        self._deliver(frame)

    def _deliver(self, frame: bytes | memoryview) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is None or waiter.done():
            self._fail(ConnectionError("unsolicited response"))
        else:
            waiter.set_result(frame)

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(self._error)
        if self.transport is not None:
            self.transport.close()


class BrokerConnection:
    """One connection to another broker (TLS with ``ssl_context``); requests answered in
    order."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        loopback_congestion: str = "",
        ssl_context: ssl.SSLContext | None = None,
        sasl: Callable[[], SaslClient] | None = None,
    ) -> None:
        """``sasl``: authenticate each new connection with this mechanism's client."""
        self.host, self.port, self.client_id = host, port, client_id
        self.ssl_context = ssl_context
        self.sasl = sasl
        self._session_ends = float("inf")  # monotonic s: a SASL session's lifetime ends
        self.loopback_congestion = loopback_congestion  # sluice.server.congestion
        self._reader: _ResponseReader | None = None
        self._ids = itertools.count(1)

    def next_correlation_id(self) -> int:
        return next(self._ids)

    async def _connect(self) -> _ResponseReader:
        if self._reader is not None:
            if time.monotonic() < self._session_ends:
                return self._reader
            self.close()  # its SASL session is about to expire: a new one authenticates
        loop = asyncio.get_running_loop()
        transport, reader = await asyncio.wait_for(
            loop.create_connection(
                _ResponseReader, self.host, self.port, ssl=self.ssl_context,
                server_hostname=self.host if self.ssl_context is not None else None,
            ),
            5,
        )  # fmt: skip
        if self.loopback_congestion:
            set_on_loopback(transport, self.loopback_congestion)
        if self.sasl is not None:
            try:
                await asyncio.wait_for(self._authenticate(reader), 30)
            except BaseException:
                transport.close()
                raise
        self._reader = reader
        return reader

    async def _authenticate(self, reader: _ResponseReader) -> None:
        """Kafka's SaslClientAuthenticator: SaslHandshake v1, then SaslAuthenticate v2
        until the mechanism is done. Raises SaslAuthenticationError (the broker's message)
        or UnsupportedSaslMechanismError."""
        from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
        from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

        assert self.sasl is not None
        exchange = SaslClientExchange(self.sasl())

        async def call(body: Any) -> Any:
            frame = encode_request(next(self._ids), body, self.client_id)
            waiter = reader.expect()
            assert reader.transport is not None
            reader.transport.write(frame)
            reply = await waiter
            return decode_response(bytes(reply), body.__api_key__, body.__version__).body

        handshake = await call(SaslHandshakeRequest(mechanism=exchange.mechanism))
        exchange.on_handshake(handshake.error_code, handshake.mechanisms)
        while (token := exchange.next_token()) is not None:
            answer = await call(SaslAuthenticateRequest(auth_bytes=token))
            lifetime = int(answer.session_lifetime.total_seconds() * 1000)
            exchange.on_authenticate(
                answer.error_code, answer.error_message, answer.auth_bytes, lifetime
            )
        if exchange.session_lifetime_ms > 0:  # reconnect at 85% of it, before it ends
            self._session_ends = time.monotonic() + exchange.session_lifetime_ms * 0.85 / 1000
        else:
            self._session_ends = float("inf")

    async def roundtrip(self, frame: bytes) -> bytes | memoryview:
        """Send one framed request, return its response frame (without the size prefix):
        a large one is a read-only view of a buffer reused once the view is released."""
        reader = await self._connect()
        try:
            waiter = reader.expect()
            assert reader.transport is not None
            reader.transport.write(frame)
            return await waiter
        except BaseException:
            self.close()
            raise

    async def _roundtrip(self, frame: bytes) -> bytes:
        reply = await self.roundtrip(frame)
        return reply if isinstance(reply, bytes) else bytes(reply)

    async def send(self, body: Any) -> Any:
        """A kio request; returns kio's response body."""
        correlation_id = next(self._ids)
        frame = await self._roundtrip(encode_request(correlation_id, body, self.client_id))
        return decode_response(frame, body.__api_key__, body.__version__).body

    async def send_controller(
        self, request: ControllerRequest, listener_name: str = "PLAINTEXT"
    ) -> Any:
        """``listener_name``: the inter-broker listener, whose endpoints LeaderAndIsr
        names the live leaders by."""
        api_key = api_key_of(request)
        body = encode_controller_request(request, listener_name)
        frame = raw_request_frame(api_key, next(self._ids), body, self.client_id)
        reply = await self._roundtrip(frame)
        return decode_controller_response(api_key, reply[4:])

    async def send_controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> ControlledShutdownResult:
        frame = raw_request_frame(
            CONTROLLED_SHUTDOWN, next(self._ids),
            encode_controlled_shutdown_request(broker_id, broker_epoch), self.client_id,
        )  # fmt: skip
        reply = await self._roundtrip(frame)
        return decode_controlled_shutdown_response(reply[4:])

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader._fail(ConnectionResetError("connection closed"))


class NetworkControllerChannel:
    """Kafka's ControllerChannelManager on the broker's event loop: one queue and one
    connection per broker; requests go in order and are retried until the broker is
    removed. Callable from any thread."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, local_id: int, inter_broker: InterBrokerListener
    ) -> None:
        """``inter_broker``: the listener the other brokers are reached on."""
        self._loop = loop
        self._local_id = local_id
        self._inter_broker = inter_broker
        self._queues: dict[int, asyncio.Queue[Any]] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def add_broker(self, broker: Broker) -> None:
        self._call(self._add, broker)

    def remove_broker(self, broker_id: int) -> None:
        self._call(self._remove, broker_id)

    def send_request(
        self, broker_id: int, request: ControllerRequest, callback: ResponseCallback | None = None
    ) -> None:
        self._call(self._enqueue, broker_id, request, callback)

    def close(self) -> None:
        for broker_id in list(self._tasks):
            self._remove(broker_id)

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        if self._loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(fn, *args)

    def _add(self, broker: Broker) -> None:
        if broker.id in self._tasks:
            return
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._queues[broker.id] = queue
        self._tasks[broker.id] = asyncio.ensure_future(self._run(broker, queue))

    def _remove(self, broker_id: int) -> None:
        task = self._tasks.pop(broker_id, None)
        self._queues.pop(broker_id, None)
        if task is not None:
            task.cancel()

    def _enqueue(self, broker_id: int, request: ControllerRequest, callback: Any) -> None:
        queue = self._queues.get(broker_id)
        if queue is None:
            log.debug("dropping request for unknown broker %d", broker_id)
            return
        queue.put_nowait((request, callback))

    async def _run(self, broker: Broker, queue: asyncio.Queue[Any]) -> None:
        inter_broker = self._inter_broker
        ep = inter_broker.endpoint(broker)
        if ep is None:
            log.warning("broker %d has no %s listener: no controller requests reach it",
                        broker.id, inter_broker.listener_name)  # fmt: skip
            return
        conn = inter_broker.connection(ep, f"controller-{self._local_id}")
        try:
            while True:
                request, callback = await queue.get()
                parts = [request]
                if isinstance(request, StopReplicaRequest):  # v1: one delete flag each
                    parts = [
                        StopReplicaRequest(
                            request.controller_id,
                            request.controller_epoch,
                            request.broker_epoch,
                            tuple(s for s in request.partition_states if s.delete_partition == d),
                        )
                        for d in (False, True)
                        if any(s.delete_partition == d for s in request.partition_states)
                    ]
                responses = []
                for part in parts:
                    while True:
                        try:
                            responses.append(
                                await conn.send_controller(part, inter_broker.listener_name)
                            )
                            break
                        except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
                            log.debug("controller request to %d failed: %s", broker.id, exc)
                            await asyncio.sleep(0.2)
                if callback is None:
                    continue
                response = responses[0]
                if len(responses) > 1:
                    merged: dict[TopicPartition, ErrorCode] = {}
                    for r in responses:
                        merged.update(r.partition_errors)
                    response = StopReplicaResponse(responses[0].error_code, merged)
                try:
                    callback(response)
                except Exception:
                    log.exception("controller response callback failed")
        finally:
            conn.close()
