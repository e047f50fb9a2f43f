"""Produce (0): append record batches to partition leaders, acks 0, 1 or all.

Versions 3-11, advertised from v0 as Kafka 4.x does (KAFKA-18659,
``PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION = 0``): librdkafka before 2.11.1 (Debian's
kcat links 2.0.2) compresses with gzip, snappy or lz4 only if the broker's Produce range
holds v0, and otherwise sends uncompressed batches without a word. Produce v0-2 requests
are still rejected (gone since Kafka 4.0; kio cannot parse them). The same clients enable
the v2 record format only if the range holds v3, and zstd only if it holds v7. v12 is
v11 plus transactions v2 (KIP-890 part 2); v13 names topics by id.

As in Kafka, an internal topic (``__consumer_offsets``, ``__transaction_state``) takes
no client's records: INVALID_TOPIC_EXCEPTION, unless the client id is Kafka's
``__admin_client``. Its coordinator writes it through the replica manager.

A client over its ``producer_byte_rate`` (the records' bytes count) gets its answer with
``throttle_time_ms`` and its connection is muted that long (an acks=0 client: muted
only); see ``server/throttled_channel.py``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.protocol.produce_response import PartitionResult, encode_produce_response
from sluice.protocol.throttle import NoResponse
from sluice.replication.delayed import ProducePartitionStatus
from sluice.replication.metadata_cache import INTERNAL_TOPICS
from sluice.server.answer import Answer
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize,
    filter_by_authorized,
    may_auto_create,
)
from sluice.server.messages import ms
from sluice.server.topics import InvalidTopicError, validate_topic_name

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.produce.v3.request as v3
    import kio.schema.produce.v4.request as v4
    import kio.schema.produce.v5.request as v5
    import kio.schema.produce.v6.request as v6
    import kio.schema.produce.v7.request as v7
    import kio.schema.produce.v8.request as v8
    import kio.schema.produce.v9.request as v9
    import kio.schema.produce.v10.request as v10
    import kio.schema.produce.v11.request as v11

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v3.ProduceRequest
        | v4.ProduceRequest
        | v5.ProduceRequest
        | v6.ProduceRequest
        | v7.ProduceRequest
        | v8.ProduceRequest
        | v9.ProduceRequest
        | v10.ProduceRequest
        | v11.ProduceRequest
    )

API: ApiSpec[Body] = ApiSpec(
    ApiKey.PRODUCE, 3, 11, advertised_min_version=0, needs_coordinators=False
)

ADMIN_CLIENT_ID = "__admin_client"
"""Kafka's ``AdminUtils.ADMIN_CLIENT_ID``: the one client allowed to append to internal topics."""


def _response(
    version: int, statuses: dict[TopicPartition, ProducePartitionStatus], throttle_ms: int = 0
) -> Any:
    """The answer, hand-encoded: the broker accepts Produce v3-11 (``API``),
    exactly the versions ``encode_produce_response`` writes."""
    by_topic: dict[str, list[PartitionResult]] = {}
    for tp, s in statuses.items():
        by_topic.setdefault(tp.topic, []).append(
            (tp.partition, s.error, s.base_offset, s.log_append_time if s.log_append_time
             >= 0 else -1, s.log_start_offset, s.error_message)
        )  # fmt: skip
    return encode_produce_response(version, by_topic.items(), throttle_ms)


def _throttle_ms(ctx: RequestContext, entries: dict[TopicPartition, bytes]) -> int:
    """Record the records' bytes against the client's produce quota; its throttle."""
    quotas = ctx.quotas
    if quotas is None or not quotas.managers.produce.quotas_enabled:
        return 0
    manager = quotas.managers.produce
    size = sum(len(records) for records in entries.values())
    name, now = ctx.principal.name, ctx.clock.hi_res_clock_ms()
    throttle = manager.record_and_get_throttle_time_ms(name, ctx.client_id, size, now)
    manager.record_throttle(name, ctx.client_id, throttle, now)
    return throttle


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    acks = int(body.acks)
    if acks not in (-1, 0, 1):
        statuses = {
            TopicPartition(t.name, p.index): ProducePartitionStatus(
                -1, -1, error=ErrorCode.invalid_required_acks
            )
            for t in body.topic_data
            for p in t.partition_data
        }
        return _response(request.api_version, statuses)
    entries: dict[TopicPartition, bytes] = {}
    early: dict[TopicPartition, ProducePartitionStatus] = {}
    writable: set[str] | None = None
    if ctx.authorizer is not None:
        if not _transaction_authorized(ctx, body):
            statuses = {
                TopicPartition(t.name, p.index): ProducePartitionStatus(
                    -1, -1, error=ErrorCode.transactional_id_authorization_failed
                )
                for t in body.topic_data
                for p in t.partition_data
            }
            return None if acks == 0 else _response(request.api_version, statuses)
        writable = filter_by_authorized(
            ctx, AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in body.topic_data)
        )
    for topic in body.topic_data:
        message = None
        try:
            validate_topic_name(topic.name)
        except InvalidTopicError:
            known, code = False, ErrorCode.invalid_topic_exception
        else:
            if writable is not None and topic.name not in writable:
                known, code = False, ErrorCode.topic_authorization_failed
            elif topic.name in INTERNAL_TOPICS and ctx.client_id != ADMIN_CLIENT_ID:
                known, code = False, ErrorCode.invalid_topic_exception
                message = f"Cannot append to internal topic {topic.name}"
            elif not may_auto_create(ctx, topic.name):
                known, code = False, ErrorCode.unknown_topic_or_partition
            else:
                known = ctx.topic_admin.maybe_auto_create(topic.name)
                code = ErrorCode.unknown_topic_or_partition
        for p in topic.partition_data:
            tp = TopicPartition(topic.name, p.index)
            if not known:
                early[tp] = ProducePartitionStatus(-1, -1, error=code, error_message=message)
            elif p.records is None:
                early[tp] = ProducePartitionStatus(-1, -1, error=ErrorCode.invalid_record)
            else:
                entries[tp] = p.records
    throttle = _throttle_ms(ctx, entries)
    if acks == 0:  # no response at all, as in Kafka
        ctx.replica_manager.append_records(ms(body.timeout), acks, entries, _ignore)
        return NoResponse(throttle) if throttle else None
    # The answer is built where the append completes (at once, or when the DelayedProduce
    # does) and the network layer awaits this future itself, or writes it when it is set:
    # no task per produce.
    future = Answer(loop=asyncio.get_running_loop())
    # Only the version is kept for the answer: the request's records are views of the
    # connection's receive buffer, which it reuses for the next large frame as soon as
    # the append no longer needs them, not when an acks=all wait ends.
    version = request.api_version

    def done(statuses: dict[TopicPartition, ProducePartitionStatus]) -> None:
        if future.done():
            return
        try:
            future.set_result(_response(version, {**early, **statuses}, throttle))
        except Exception as exc:  # answered as an error by the network layer
            future.set_exception(exc)

    ctx.replica_manager.append_records(ms(body.timeout), acks, entries, done)
    return future


def _transaction_authorized(ctx: RequestContext, body: Body) -> bool:
    """As Kafka: transactional batches need WRITE on the request's transactional id (the
    transactional bit of each partition's first batch header, attributes bit 4)."""
    transactional = any(
        p.records is not None and len(p.records) > 22 and p.records[22] & 0x10
        for t in body.topic_data
        for p in t.partition_data
    )
    if not transactional:
        return True
    txn_id = body.transactional_id
    return txn_id is not None and authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id
    )


def _ignore(statuses: dict[TopicPartition, ProducePartitionStatus]) -> None:
    """acks=0: nobody waits for the outcome."""
