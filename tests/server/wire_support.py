"""Helpers for tests that speak raw Kafka frames to a KafkaServer."""

from __future__ import annotations

import asyncio
import datetime
import struct

from kio.schema.produce.v9.request import ProduceRequest


def produce_request(acks: int) -> ProduceRequest:
    """An empty Produce v9 request with ``acks``."""
    return ProduceRequest(
        transactional_id=None, acks=acks,
        timeout=datetime.timedelta(milliseconds=1000), topic_data=(),
    )  # fmt: skip


async def read_correlation_id(reader: asyncio.StreamReader) -> int:
    """Read one response frame; its correlation id."""
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    body = await reader.readexactly(size)
    return int(struct.unpack_from(">i", body, 0)[0])
