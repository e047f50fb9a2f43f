"""Throttle ends on the hierarchical timer, handed to the event loop, and the request
quota's exemptions."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.static.protocol import RequestPayload

from sluice.base.clock import SYSTEM_CLOCK, Clock, ManualClock
from sluice.protocol import Request, VersionTable, decode_request, encode_request
from sluice.quota import ClientQuotaEntity, MetricConfig, QuotaManagers
from sluice.security import DEFAULT_SESSION
from sluice.server.apis import registry
from sluice.server.client_quotas import ClientQuotas, LocalEntityConfigStore
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
