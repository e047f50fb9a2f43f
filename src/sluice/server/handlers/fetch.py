"""Fetch (1): read record batches, long-polling through the fetch purgatory, with sessions."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from sluice.common import TopicPartition
from sluice.protocol import ErrorCode, Request
from sluice.server.fetch_session import FetchContext, PartitionState
from sluice.server.messages import build, field, ms
from sluice.server.partition import FetchIsolation
from sluice.server.replica_manager import FetchParams, FetchPartitionData, PartitionFetch

if TYPE_CHECKING:
    from sluice.server.broker import Broker


SENDFILE_MIN_BYTES = 64 * 1024


def _context(broker: Broker, request: Request) -> FetchContext:
    body: Any = request.body
    partitions: dict[TopicPartition, PartitionState] = {}
    for topic in body.topics:
        for p in topic.partitions:
            partitions[TopicPartition(topic.topic, p.partition)] = PartitionState(
                p.fetch_offset, p.partition_max_bytes,
                field(p, "current_leader_epoch", -1), field(p, "log_start_offset", -1),
            )  # fmt: skip
    if request.api_version < 7:
        return FetchContext(partitions)
    forgotten = [
        TopicPartition(t.topic, p)
        for t in field(body, "forgotten_topics_data", ())
        for p in t.partitions
    ]
    return broker.fetch_sessions.new_context(
        body.session_id, body.session_epoch, partitions, forgotten,
        privileged=body.replica_id >= 0, now_ms=broker.clock.now_ms(),
    )  # fmt: skip


def _response(
    request: Request,
    context: FetchContext,
    results: list[tuple[PartitionFetch, FetchPartitionData]],
) -> Any:
    topics: dict[str, list[dict[str, Any]]] = {}
    for fetch, data in results:
        size = data.records.size if data.records is not None else 0
        # Large slices go out with sendfile, straight from the segment file.
        records: Any = (
            data.records
            if size >= SENDFILE_MIN_BYTES
            else (data.records.read() if data.records is not None and size else b"")
        )
        if not context.include(
            fetch.tp, data.error, data.high_watermark, data.last_stable_offset,
            data.log_start_offset, size,
        ):  # fmt: skip
            continue
        topics.setdefault(fetch.tp.topic, []).append(
            {
                "partition_index": fetch.tp.partition,
                "error_code": data.error,
                "high_watermark": data.high_watermark,
                "last_stable_offset": data.last_stable_offset,
                "log_start_offset": data.log_start_offset,
                "aborted_transactions": None
                if data.aborted_transactions is None
                else [
                    {"producer_id": t.producer_id, "first_offset": t.first_offset}
                    for t in data.aborted_transactions
                ],
                "preferred_read_replica": -1,
                "records": records,
            }
        )
    return build(
        request.response_type,
        throttle_time=0,
        error_code=context.error,
        session_id=context.session_id,
        responses=[{"topic": t, "partitions": ps} for t, ps in topics.items()],
    )


def handle(broker: Broker, request: Request) -> Any:
    body: Any = request.body
    context = _context(broker, request)
    if context.error != ErrorCode.none:
        return _response(request, context, [])
    replica_id = body.replica_id
    if replica_id >= 0:
        isolation = FetchIsolation.LOG_END
    elif field(body, "isolation_level", 0) == 1:
        isolation = FetchIsolation.TXN_COMMITTED
    else:
        isolation = FetchIsolation.HIGH_WATERMARK
    params = FetchParams(
        replica_id=replica_id,
        max_wait_ms=ms(body.max_wait),
        min_bytes=body.min_bytes,
        max_bytes=field(body, "max_bytes", 2**31 - 1),
        isolation=isolation,
    )
    fetches = [
        PartitionFetch(tp, s.fetch_offset, s.max_bytes, s.current_leader_epoch, s.log_start_offset)
        for tp, s in context.partitions.items()
    ]
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def done(results: list[tuple[PartitionFetch, FetchPartitionData]]) -> None:
        if not future.done():
            future.set_result(_response(request, context, results))

    broker.replica_manager.fetch_messages(params, fetches, done)
    return future
