"""ListOffsets (2): earliest, latest, max-timestamp and by-timestamp offsets.

Versions 1-9: v8 adds the earliest local offset (-4), which with no tiered storage is
the log start offset, and v9 the latest tiered offset (-5), which with no tiered storage
is none: offset -1, timestamp -1 and leader epoch -1, as Kafka answers when
remote.storage.enable is off. v10 (Kafka 4.0) adds a timeout for reads from remote
storage. The minimum stays at 1: librdkafka before 2.11.1 enables offsets by time only if
the range holds v1. Any other negative timestamp is a time like the others, as in Kafka:
the first record at or after it (the earliest record).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    KafkaStorageException,
)
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, filter_by_authorized
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.list_offsets.v1.request as v1
    import kio.schema.list_offsets.v2.request as v2
    import kio.schema.list_offsets.v3.request as v3
    import kio.schema.list_offsets.v4.request as v4
    import kio.schema.list_offsets.v5.request as v5
    import kio.schema.list_offsets.v6.request as v6
    import kio.schema.list_offsets.v7.request as v7
    import kio.schema.list_offsets.v8.request as v8
    import kio.schema.list_offsets.v9.request as v9

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v1.ListOffsetsRequest
        | v2.ListOffsetsRequest
        | v3.ListOffsetsRequest
        | v4.ListOffsetsRequest
        | v5.ListOffsetsRequest
        | v6.ListOffsetsRequest
        | v7.ListOffsetsRequest
        | v8.ListOffsetsRequest
        | v9.ListOffsetsRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.LIST_OFFSETS, 1, 9, needs_coordinators=False)

LATEST_TIERED_TIMESTAMP = -5
"""The highest offset in remote storage (KIP-1005): none without tiered storage."""

_SPECIAL = frozenset(
    {LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, MAX_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP}
)


def _lookup(
    ctx: RequestContext, tp: TopicPartition, timestamp: int, epoch: int, committed: bool
) -> dict[str, Any]:
    partition = ctx.replica_manager.get_partition(tp)
    if partition is None:
        return {"error_code": ErrorCode.unknown_topic_or_partition, "timestamp": -1, "offset": -1}
    if epoch >= 0 and epoch != partition.leader_epoch:
        code = (
            ErrorCode.fenced_leader_epoch
            if epoch < partition.leader_epoch
            else ErrorCode.unknown_leader_epoch
        )
        return {"error_code": code, "timestamp": -1, "offset": -1}
    if partition.log.is_offline:  # its log dir failed
        return {"error_code": ErrorCode.kafka_storage_error, "timestamp": -1, "offset": -1}
    bound = partition.last_stable_offset if committed else partition.high_watermark
    if timestamp == LATEST_TIMESTAMP:
        return {
            "error_code": ErrorCode.none,
            "timestamp": -1,
            "offset": bound,
            "leader_epoch": partition.leader_epoch,
        }
    if timestamp == EARLIEST_TIMESTAMP:
        return {
            "error_code": ErrorCode.none,
            "timestamp": -1,
            "offset": partition.log.log_start_offset,
            "leader_epoch": partition.leader_epoch,
        }
    if timestamp == LATEST_TIERED_TIMESTAMP:  # nothing is tiered
        return {"error_code": ErrorCode.none, "timestamp": -1, "offset": -1, "leader_epoch": -1}
    if timestamp < 0 and timestamp not in _SPECIAL:  # a time: the first record at or after it
        timestamp = 0
    try:
        found = partition.log.fetch_offset_by_timestamp(timestamp)
    except KafkaStorageException:  # an I/O error took its log dir offline
        return {"error_code": ErrorCode.kafka_storage_error, "timestamp": -1, "offset": -1}
    if found is None or (found.offset >= bound and timestamp >= 0):
        return {"error_code": ErrorCode.none, "timestamp": -1, "offset": -1}
    epoch = found.leader_epoch if found.leader_epoch is not None else -1
    return {"error_code": ErrorCode.none, "timestamp": found.timestamp, "offset": found.offset,
            "leader_epoch": epoch}  # fmt: skip


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    committed = field(body, "isolation_level", 0) == 1
    topics = []
    described = filter_by_authorized(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in body.topics)
    )
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            entry: dict[str, Any]
            if topic.name not in described:
                entry = {"error_code": ErrorCode.topic_authorization_failed, "timestamp": -1,
                         "offset": -1}  # fmt: skip
            else:
                entry = _lookup(
                    ctx, tp, p.timestamp, field(p, "current_leader_epoch", -1), committed
                )
            entry["partition_index"] = p.partition_index
            if request.api_version == 0:
                entry["old_style_offsets"] = [] if entry["offset"] < 0 else [entry["offset"]]
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return build(request.response_type, throttle_time=0, topics=topics)
