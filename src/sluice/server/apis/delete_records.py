"""DeleteRecords (21): move partitions' log start offsets forward (the low watermark).

The replica manager raises each log start offset (offset -1 means the high watermark)
and answers through a callback once every replica reached it, or at the request's
timeout; the handler returns an awaitable, as Produce does. Records before the new log
start offset can no longer be fetched (OFFSET_OUT_OF_RANGE) and their whole segments are
deleted. The internal topics' partitions are refused with INVALID_TOPIC_EXCEPTION, as in
Kafka (the response has no message field).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize
from sluice.server.messages import build, ms

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.delete_records.v0.request as v0
    import kio.schema.delete_records.v1.request as v1
    import kio.schema.delete_records.v2.request as v2

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.DeleteRecordsRequest | v1.DeleteRecordsRequest | v2.DeleteRecordsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.DELETE_RECORDS, 0, 2, needs_coordinators=False)

Result = dict[TopicPartition, tuple[int, ErrorCode]]


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    order: list[TopicPartition] = []
    offsets: dict[TopicPartition, int] = {}
    early: Result = {}
    for topic in body.topics:
        known = ctx.metadata_cache.contains_topic(topic.name)
        allowed = authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if tp not in offsets and tp not in early:
                order.append(tp)
            if not allowed:
                early[tp] = (-1, ErrorCode.topic_authorization_failed)
            elif not known:
                early[tp] = (-1, ErrorCode.unknown_topic_or_partition)
            else:
                offsets[tp] = int(p.offset)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Result] = loop.create_future()

    def done(results: Result) -> None:
        if not future.done():
            future.set_result(dict(results))

    ctx.replica_manager.delete_records(ms(body.timeout), offsets, done)

    async def respond() -> Any:
        results = {**await future, **early}
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in order:
            low, code = results.get(tp, (-1, ErrorCode.unknown_topic_or_partition))
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "low_watermark": low, "error_code": code}
            )
        return build(
            request.response_type,
            throttle_time=0,
            topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        )

    return respond()
