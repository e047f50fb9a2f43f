"""TxnOffsetCommit (28): a group's offsets committed inside a transaction, visible to
OffsetFetch only once the transaction commits.

Versions 0-4: v4 lets the answer carry TRANSACTION_ABORTABLE (KIP-890 part 1), an error
Sluice never needs; v5 (Kafka 4.0) is transactions v2, which Sluice does not serve.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize, filter_by_authorized
from sluice.server.messages import build, field, partition_errors_by_topic

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.txn_offset_commit.v0.request as v0
    import kio.schema.txn_offset_commit.v1.request as v1
    import kio.schema.txn_offset_commit.v2.request as v2
    import kio.schema.txn_offset_commit.v3.request as v3
    import kio.schema.txn_offset_commit.v4.request as v4

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.TxnOffsetCommitRequest
        | v1.TxnOffsetCommitRequest
        | v2.TxnOffsetCommitRequest
        | v3.TxnOffsetCommitRequest
        | v4.TxnOffsetCommitRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.TXN_OFFSET_COMMIT, 0, 4)


def handle(ctx: RequestContext, request: Request) -> Any:
    from sluice.coordinator.group import OffsetAndMetadata
    from sluice.server.group_runtime import deferred

    body = API.body(request)
    now = ctx.clock.milliseconds()
    order: list[TopicPartition] = []
    early: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    # As Kafka: WRITE on the transactional id, READ on the group, READ on each topic.
    txn_allowed = authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
    )
    group_allowed = authorize(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id)
    readable = filter_by_authorized(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics)
    )
    for topic in body.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, int(p.partition_index))
            order.append(tp)
            if not txn_allowed:
                early[tp] = ErrorCode.transactional_id_authorization_failed
            elif not group_allowed:
                early[tp] = ErrorCode.group_authorization_failed
            elif topic.name not in readable:
                early[tp] = ErrorCode.topic_authorization_failed
            elif not ctx.metadata_cache.contains_partition(tp):
                early[tp] = ErrorCode.unknown_topic_or_partition
                continue
            epoch = int(field(p, "committed_leader_epoch", -1))
            offsets[tp] = OffsetAndMetadata(
                int(p.committed_offset), None if epoch < 0 else epoch,
                p.committed_metadata or "", now,
            )  # fmt: skip
    callback: Callable[[dict[TopicPartition, ErrorCode]], None]
    result: Awaitable[dict[TopicPartition, ErrorCode]]
    callback, result = deferred()
    if offsets:
        ctx.group_coordinator.handle_txn_commit_offsets(
            body.group_id, int(body.producer_id), int(body.producer_epoch),
            field(body, "member_id", ""), field(body, "group_instance_id"),
            int(field(body, "generation_id", -1)), offsets, callback,
        )  # fmt: skip
    else:
        callback({})

    async def respond() -> Any:
        errors = {**early, **(await result)}
        topics = partition_errors_by_topic(order, errors)
        return build(request.response_type, throttle_time=0, topics=topics)

    return respond()
