"""OffsetFetch (9): a group's committed offsets (v8: several groups at once).

Versions 1-9: v9 adds a member id and epoch for the KIP-848 consumer protocol, which a
classic group does not check, as in Kafka 3.9; v10 (Kafka 4.1) names topics by id. The
minimum stays at 1: librdkafka before 2.11.1 enables consumer groups only if the range
holds v1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize, filter_by_authorized
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.offset_fetch.v1.request as v1
    import kio.schema.offset_fetch.v2.request as v2
    import kio.schema.offset_fetch.v3.request as v3
    import kio.schema.offset_fetch.v4.request as v4
    import kio.schema.offset_fetch.v5.request as v5
    import kio.schema.offset_fetch.v6.request as v6
    import kio.schema.offset_fetch.v7.request as v7
    import kio.schema.offset_fetch.v8.request as v8
    import kio.schema.offset_fetch.v9.request as v9

    from sluice.coordinator.group import OffsetAndMetadata
    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v1.OffsetFetchRequest
        | v2.OffsetFetchRequest
        | v3.OffsetFetchRequest
        | v4.OffsetFetchRequest
        | v5.OffsetFetchRequest
        | v6.OffsetFetchRequest
        | v7.OffsetFetchRequest
        | v8.OffsetFetchRequest
        | v9.OffsetFetchRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.OFFSET_FETCH, 1, 9)


def _partitions(topics: Any) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t.name, int(p)) for t in topics for p in t.partition_indexes]


def _topics(
    offsets: dict[TopicPartition, OffsetAndMetadata | None],
    error: ErrorCode,
    unstable: frozenset[TopicPartition] = frozenset(),
) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, om in offsets.items():
        if tp in unstable:  # a transactional commit of it is still open (require_stable)
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "committed_offset": -1,
                 "committed_leader_epoch": -1, "metadata": "",
                 "error_code": ErrorCode.unstable_offset_commit}
            )  # fmt: skip
            continue
        by_topic.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "committed_offset": -1 if om is None else om.offset,
                "committed_leader_epoch": -1
                if om is None or om.leader_epoch is None
                else om.leader_epoch,
                "metadata": "" if om is None else om.metadata,
                "error_code": error,
            }
        )
    return [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


def _fetch(
    ctx: RequestContext, group_id: str, requested: list[TopicPartition] | None, require_stable: bool
) -> tuple[ErrorCode, list[dict[str, Any]]]:
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, []
    # As Kafka: named partitions of topics it may not describe are answered
    # TOPIC_AUTHORIZATION_FAILED; when all are asked for, those topics are left out.
    denied: list[TopicPartition] = []
    if requested is not None and ctx.authorizer is not None:
        described = filter_by_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, {tp.topic for tp in requested}
        )
        denied = [tp for tp in requested if tp.topic not in described]
        requested = [tp for tp in requested if tp.topic in described]
    coordinator = ctx.group_coordinator
    error, offsets = coordinator.handle_fetch_offsets(group_id, requested, require_stable)
    if requested is None and ctx.authorizer is not None:
        described = filter_by_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, {tp.topic for tp in offsets}
        )
        offsets = {tp: om for tp, om in offsets.items() if tp.topic in described}
    unstable = (
        coordinator.unstable_partitions(group_id, offsets)
        if require_stable and error == ErrorCode.none
        else frozenset()
    )
    topics = _topics(offsets, ErrorCode.none, unstable)
    if denied:
        topics += _topics(dict.fromkeys(denied), ErrorCode.topic_authorization_failed)
    return error, topics


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    version = request.api_version
    require_stable = bool(field(body, "require_stable", False))
    if version >= 8:
        groups = []
        for group in field(body, "groups"):
            error, topics = _fetch(ctx, group.group_id, _partitions(group.topics), require_stable)
            groups.append({"group_id": group.group_id, "topics": topics, "error_code": error})
        return build(request.response_type, throttle_time=0, groups=groups)
    requested = _partitions(field(body, "topics"))
    error, topics = _fetch(ctx, field(body, "group_id"), requested, require_stable)
    if error != ErrorCode.none and version < 2:
        # v1 has no group-level error: every requested partition carries it.
        topics = _topics(dict.fromkeys(requested or []), error)
    elif error != ErrorCode.none:
        topics = []
    return build(request.response_type, throttle_time=0, topics=topics, error_code=error)
