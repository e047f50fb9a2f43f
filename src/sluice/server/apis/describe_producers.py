"""DescribeProducers (61): the producers a partition leader knows, with their open
transaction's first offset.

As Kafka's ``handleDescribeProducersRequest``: per partition, the leader's producer
state (id, epoch, last sequence, last timestamp, the coordinator epoch of its last
marker, and ``current_txn_start_offset``, the first offset of its open transaction or
-1). What ``kafka-transactions find-hanging`` and ``abort --start-offset`` read. A
partition this broker does not lead gets NOT_LEADER_OR_FOLLOWER, an unknown one
UNKNOWN_TOPIC_OR_PARTITION; READ on the topic is needed (TOPIC_AUTHORIZATION_FAILED).
Version 0, Kafka 3.9's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.describe_producers.v0.request as v0

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.DescribeProducersRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.DESCRIBE_PRODUCERS, 0, 0, needs_coordinators=False)


def _partition(ctx: RequestContext, tp: TopicPartition, allowed: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"partition_index": tp.partition, "error_code": ErrorCode.none,
                           "error_message": None, "active_producers": []}  # fmt: skip
    partition = ctx.replica_manager.get_partition(tp)
    if not allowed:
        out["error_code"] = ErrorCode.topic_authorization_failed
    elif partition is None:
        out["error_code"] = ErrorCode.unknown_topic_or_partition
    elif not partition.is_leader:
        out["error_code"] = ErrorCode.not_leader_or_follower
    else:
        producers = partition.log.producer_state_manager.producers
        out["active_producers"] = [
            {
                "producer_id": e.producer_id,
                "producer_epoch": e.producer_epoch,
                "last_sequence": e.last_seq,
                "last_timestamp": e.last_timestamp,
                "coordinator_epoch": e.coordinator_epoch,
                "current_txn_start_offset": (
                    -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
                ),
            }
            for e in producers.values()
        ]
    return out


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    topics = []
    for topic in body.topics:
        allowed = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name)
        partitions = [
            _partition(ctx, TopicPartition(topic.name, int(p)), allowed)
            for p in topic.partition_indexes
        ]
        topics.append({"name": topic.name, "partitions": partitions})
    return build(request.response_type, throttle_time=0, topics=topics)
