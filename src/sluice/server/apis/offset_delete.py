"""OffsetDelete (47): delete a group's committed offsets for some partitions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize, filter_by_authorized
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.offset_delete.v0.request as v0

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.OffsetDeleteRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.OFFSET_DELETE, 0, 0)


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    order: list[TopicPartition] = []
    errors: dict[TopicPartition, ErrorCode] = {}
    known: list[TopicPartition] = []
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, body.group_id):
        return build(
            request.response_type, throttle_time=0,
            error_code=ErrorCode.group_authorization_failed, topics=[],
        )  # fmt: skip
    readable = filter_by_authorized(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics)
    )
    for topic in body.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, int(p.partition_index))
            order.append(tp)
            if topic.name not in readable:
                errors[tp] = ErrorCode.topic_authorization_failed
            elif not ctx.metadata_cache.contains_partition(tp):
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                known.append(tp)
    group_error, deleted = ctx.group_coordinator.handle_delete_offsets(body.group_id, known)
    if group_error != ErrorCode.none:
        return build(request.response_type, throttle_time=0, error_code=group_error, topics=[])
    errors.update(deleted)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in order:
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": errors.get(tp, ErrorCode.none)}
        )
    return build(
        request.response_type,
        throttle_time=0,
        error_code=ErrorCode.none,
        topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    )
