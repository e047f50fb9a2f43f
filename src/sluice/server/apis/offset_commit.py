"""OffsetCommit (8): store a group's consumed positions in ``__consumer_offsets``.

Versions 2-9: v9 carries a member epoch for the KIP-848 consumer protocol; for a classic
group it is the generation, as a Kafka 3.9 broker in ZooKeeper mode treats it (its group
coordinator has no KIP-848 groups); v10 (Kafka 4.1) names topics by id. The
minimum stays at 2: librdkafka before 2.11.1 enables consumer groups only if the range
overlaps its 1-2.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize, filter_by_authorized
from sluice.server.messages import build, field, ms, partition_errors_by_topic

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.offset_commit.v2.request as v2
    import kio.schema.offset_commit.v3.request as v3
    import kio.schema.offset_commit.v4.request as v4
    import kio.schema.offset_commit.v5.request as v5
    import kio.schema.offset_commit.v6.request as v6
    import kio.schema.offset_commit.v7.request as v7
    import kio.schema.offset_commit.v8.request as v8
    import kio.schema.offset_commit.v9.request as v9

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v2.OffsetCommitRequest
        | v3.OffsetCommitRequest
        | v4.OffsetCommitRequest
        | v5.OffsetCommitRequest
        | v6.OffsetCommitRequest
        | v7.OffsetCommitRequest
        | v8.OffsetCommitRequest
        | v9.OffsetCommitRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.OFFSET_COMMIT, 2, 9)


def handle(ctx: RequestContext, request: Request) -> Any:
    from sluice.coordinator.group import OffsetAndMetadata
    from sluice.server.group_runtime import deferred

    body = API.body(request)
    now = ctx.clock.milliseconds()
    retention_ms = ms(field(body, "retention_time", -1))
    expire = None if retention_ms == -1 else now + retention_ms
    order: list[TopicPartition] = []
    early: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    # As Kafka: READ on the group (else every partition GROUP_AUTHORIZATION_FAILED), then
    # READ on each topic.
    group_allowed = authorize(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id)
    readable = filter_by_authorized(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics)
    )
    for topic in body.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, int(p.partition_index))
            order.append(tp)
            if not group_allowed:
                early[tp] = ErrorCode.group_authorization_failed
            elif topic.name not in readable:
                early[tp] = ErrorCode.topic_authorization_failed
            elif not ctx.metadata_cache.contains_partition(tp):
                early[tp] = ErrorCode.unknown_topic_or_partition
                continue
            epoch = int(field(p, "committed_leader_epoch", -1))
            offsets[tp] = OffsetAndMetadata(
                int(p.committed_offset),
                None if epoch < 0 else epoch,
                p.committed_metadata or "",
                now,
                expire,
            )
    callback: Callable[[dict[TopicPartition, ErrorCode]], None]
    result: Awaitable[dict[TopicPartition, ErrorCode]]
    callback, result = deferred()
    if offsets:
        ctx.group_coordinator.handle_commit_offsets(
            body.group_id,
            body.member_id,
            field(body, "group_instance_id"),
            int(field(body, "generation_id_or_member_epoch", -1)),
            offsets,
            callback,
        )
    else:
        callback({})

    async def respond() -> Any:
        errors = {**early, **(await result)}
        topics = partition_errors_by_topic(order, errors)
        return build(request.response_type, throttle_time=0, topics=topics)

    return respond()
