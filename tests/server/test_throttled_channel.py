"""Throttle ends on the hierarchical timer, handed to the event loop, and the request
quota's exemptions."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.static.protocol import RequestPayload

from sluice.base.clock import SYSTEM_CLOCK, Clock, ManualClock
from sluice.protocol import ApiKey, Request, VersionTable, decode_request, encode_request
from sluice.protocol.responses import decode_response
from sluice.protocol.throttle import throttle_time_ms
from sluice.quota import ClientQuotaEntity, MetricConfig, QuotaManagers
from sluice.security import DEFAULT_SESSION
from sluice.server.apis import registry
from sluice.server.client_quotas import ClientQuotas, LocalEntityConfigStore
from sluice.server.messages import build
from sluice.server.network import ClientIdentity, KafkaConnectionProtocol, KafkaServer
from sluice.server.throttled_channel import ThrottledChannels

VERSIONS: VersionTable = registry().versions


def _request(body: RequestPayload, client_id: str = "c") -> Request:
    frame = encode_request(1, body, client_id)
    return decode_request(frame[4:], VERSIONS)


def _channels(tmp_path: Path, clock: Clock = SYSTEM_CLOCK) -> ThrottledChannels:
    managers = QuotaManagers(MetricConfig(), MetricConfig(), lambda: 0)
    quotas = ClientQuotas(managers, LocalEntityConfigStore(tmp_path))
    return ThrottledChannels(quotas, clock)


def test_a_throttle_ends_on_the_event_loop(tmp_path: Path) -> None:
    channels = _channels(tmp_path)

    async def run() -> tuple[float, bool]:
        loop = asyncio.get_running_loop()
        channels.start(loop)
        ended = loop.create_future()
        started = time.monotonic()
        channels.throttle(60, lambda: ended.set_result(asyncio.get_running_loop() is loop))
        on_loop = await asyncio.wait_for(ended, 5)
        return time.monotonic() - started, on_loop

    try:
        waited, on_loop = asyncio.run(run())
    finally:
        channels.stop()
    assert on_loop and waited >= 0.055


def test_the_request_quota_skips_exempt_requests(tmp_path: Path) -> None:
    clock = ManualClock()
    channels = _channels(tmp_path, clock)
    assert not channels.active
    channels.quotas.managers.apply(ClientQuotaEntity(client_id="c"), {"request_percentage": "1"})
    assert channels.active
    api_versions = _request(ApiVersionsRequest(client_software_name="x",
                                               client_software_version="1"))  # fmt: skip
    assert channels.request_throttle_ms(api_versions, DEFAULT_SESSION, 10**9) == 0
    metadata = _request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                        include_topic_authorized_operations=False))  # fmt: skip
    # a second of handler time against 1% of a thread: capped at one window
    assert channels.request_throttle_ms(metadata, DEFAULT_SESSION, 10**9) == 1000
    stats = channels.quotas.managers.request.throttle_stats()[("", "c")]
    assert (stats.count, stats.max_ms) == (1, 1000)


class _Transport(asyncio.Transport):
    """Records what is written and whether reading is paused."""

    def __init__(self) -> None:
        super().__init__()
        self.reading_paused = False
        self.written = bytearray()
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.reading_paused = True

    def resume_reading(self) -> None:
        self.reading_paused = False

    def writelines(self, data: Any) -> None:
        for segment in data:
            self.written += segment

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def correlation_ids(self) -> list[int]:
        ids, pos = [], 0
        while pos < len(self.written):
            size, cid = struct.unpack_from(">ii", self.written, pos)
            ids.append(cid)
            pos += 4 + size
        return ids


class _Throttling:
    """Throttles whose ends the test fires by hand; a request quota of ``request_ms``."""

    active = True

    def __init__(self, request_ms: int = 0) -> None:
        self.request_ms = request_ms
        self.scheduled: list[tuple[int, Callable[[], None]]] = []

    def throttle(self, ms: int, on_end: Callable[[], None]) -> object:
        self.scheduled.append((ms, on_end))
        return None

    def request_throttle_ms(self, request: Request, session: object, nanos: int) -> int:
        return self.request_ms


METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def _connected(
    throttle_ms: int, throttling: _Throttling
) -> tuple[KafkaConnectionProtocol[ClientIdentity], _Transport]:
    def metadata(_ctx: Any, request: Request) -> Any:
        return build(request.response_type, throttle_time=throttle_ms, brokers=[],
                     cluster_id=None, controller_id=-1, topics=[])  # fmt: skip

    handlers: dict[int, Callable[[Any, Request], Any]] = {ApiKey.METADATA: metadata}
    server = KafkaServer("127.0.0.1", 0, handlers, VERSIONS.restrict(handlers), 1 << 23, 0,
                         ClientIdentity(), throttling=throttling)  # fmt: skip
    protocol = KafkaConnectionProtocol(server)
    transport = _Transport()
    protocol.connection_made(transport)
    frames = encode_request(1, METADATA) + encode_request(2, METADATA)
    buf = protocol.get_buffer(-1)
    buf[: len(frames)] = frames
    del buf
    protocol.buffer_updated(len(frames))
    return protocol, transport


def test_a_throttled_answer_is_written_then_the_connection_is_muted_until_its_end() -> None:
    async def scenario() -> None:
        throttling = _Throttling()
        protocol, transport = _connected(250, throttling)
        assert transport.correlation_ids() == [1]  # sent at once (KIP-219)...
        assert transport.reading_paused and [ms for ms, _ in throttling.scheduled] == [250]
        await asyncio.sleep(0)
        assert transport.correlation_ids() == [1]  # ...and request 2 waits for the end
        throttling.scheduled.pop()[1]()
        assert transport.correlation_ids() == [1, 2]  # handled, and throttled again
        throttling.scheduled.pop()[1]()
        assert not transport.reading_paused and not protocol.conn.throttled

    asyncio.run(scenario())


def test_the_request_quota_raises_an_answers_throttle() -> None:
    async def scenario() -> None:
        throttling = _Throttling(request_ms=700)
        _protocol, transport = _connected(0, throttling)
        assert [ms for ms, _ in throttling.scheduled] == [700]
        frame = bytes(transport.written)
        decoded = decode_response(frame[4:], ApiKey.METADATA, 12)
        assert throttle_time_ms(decoded.body) == 700

    asyncio.run(scenario())


def test_an_inter_broker_answer_from_an_awaitable_is_written() -> None:
    """The done callback of a raw (inter-broker) answer takes no throttle."""

    async def scenario() -> None:
        async def raw(frame: bytes) -> bytes:
            await asyncio.sleep(0)
            return struct.pack(">ii", 4, 9)

        server = KafkaServer("127.0.0.1", 0, {}, VERSIONS.restrict({}), 1 << 23, 0,
                             ClientIdentity(), raw_handlers={7: raw},
                             throttling=_Throttling())  # fmt: skip
        protocol = KafkaConnectionProtocol(server)
        transport = _Transport()
        protocol.connection_made(transport)
        frame = struct.pack(">hhih", 7, 0, 9, -1) + b"\0" * 8
        buf = protocol.get_buffer(-1)
        buf[: 4 + len(frame)] = struct.pack(">i", len(frame)) + frame
        del buf
        protocol.buffer_updated(4 + len(frame))
        for _ in range(5):
            await asyncio.sleep(0)
        assert transport.correlation_ids() == [9] and not transport.closed

    asyncio.run(scenario())
