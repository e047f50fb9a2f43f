"""Metadata (3): brokers, controller and the partitions of the requested topics.

Everything comes from the metadata cache, on a single node as in a cluster. A requested
topic that does not exist is created when the request and ``auto.create.topics.enable``
allow it: a single node answers with it at once, a cluster with LEADER_NOT_AVAILABLE
until the controller has told this broker about its partitions.

Versions 0-12: v13 adds a top-level error code. Before v12 a topic asked for by id
(v10-11 have the field, not the support) gets INVALID_REQUEST for every topic, as Kafka
answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.security.acl import CLUSTER_NAME
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_cluster,
    authorized_operations,
    may_auto_create,
)
from sluice.server.messages import build, field
from sluice.server.topics import InvalidTopicError, validate_topic_name

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.metadata.v0.request as v0
    import kio.schema.metadata.v1.request as v1
    import kio.schema.metadata.v2.request as v2
    import kio.schema.metadata.v3.request as v3
    import kio.schema.metadata.v4.request as v4
    import kio.schema.metadata.v5.request as v5
    import kio.schema.metadata.v6.request as v6
    import kio.schema.metadata.v7.request as v7
    import kio.schema.metadata.v8.request as v8
    import kio.schema.metadata.v9.request as v9
    import kio.schema.metadata.v10.request as v10
    import kio.schema.metadata.v11.request as v11
    import kio.schema.metadata.v12.request as v12

    from sluice.replication.metadata_cache import MetadataCache
    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.MetadataRequest
        | v1.MetadataRequest
        | v2.MetadataRequest
        | v3.MetadataRequest
        | v4.MetadataRequest
        | v5.MetadataRequest
        | v6.MetadataRequest
        | v7.MetadataRequest
        | v8.MetadataRequest
        | v9.MetadataRequest
        | v10.MetadataRequest
        | v11.MetadataRequest
        | v12.MetadataRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.METADATA, 0, 12, needs_coordinators=False)


def _topic_entry(cache: MetadataCache, name: str) -> dict[str, Any] | None:
    partitions = cache.partitions(name)
    if not partitions:
        return None
    return {
        "error_code": ErrorCode.none,
        "name": name,
        "topic_id": cache.topic_id(name),
        "is_internal": cache.is_internal(name),
        "partitions": [
            {
                "error_code": ErrorCode.none if p.leader >= 0 else ErrorCode.leader_not_available,
                "partition_index": p.partition,
                "leader_id": p.leader,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": list(p.replicas),
                "isr_nodes": list(p.isr),
                "offline_replicas": list(p.offline_replicas),
            }
            for p in partitions
        ],
    }


def _error_entry(name: str | None, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": None, "partitions": []}


def _requested_entry(ctx: RequestContext, item: Any, allow_create: bool) -> dict[str, Any]:
    cache = ctx.metadata_cache
    name = field(item, "name")
    if name is None:  # v10+: asked for by topic id
        name = cache.topic_name(field(item, "topic_id"))
        if name is not None and not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            return _error_entry(None, ErrorCode.topic_authorization_failed)
        entry = None if name is None else _topic_entry(cache, name)
        return entry if entry is not None else _error_entry(None, ErrorCode.unknown_topic_id)
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return _error_entry(name, ErrorCode.invalid_topic_exception)
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return _error_entry(name, ErrorCode.topic_authorization_failed)
    entry = _topic_entry(cache, name)
    if entry is None:
        if allow_create and not may_auto_create(ctx, name):
            return _error_entry(name, ErrorCode.topic_authorization_failed)
        created = allow_create and ctx.topic_admin.maybe_auto_create(name)
        entry = _topic_entry(cache, name)
        if entry is None:
            code = (
                ErrorCode.leader_not_available if created else ErrorCode.unknown_topic_or_partition
            )
            entry = _error_entry(name, code)
    return entry


def handle(ctx: RequestContext, request: Request) -> Any:
    cache = ctx.metadata_cache
    body = API.body(request)
    requested = field(body, "topics")
    # v0: an empty list means all topics; v1+: null means all topics.
    all_topics = requested is None or (request.api_version == 0 and not requested)
    allow_create = bool(field(body, "allow_auto_topic_creation", True))
    if all_topics:  # the topics this client may not describe are left out
        names = cache.topic_names()
        if ctx.authorizer is not None:
            names = [
                n for n in names if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, n)
            ]
        topics = [e for n in names if (e := _topic_entry(cache, n)) is not None]
    elif request.api_version < 12 and any(
        field(item, "name") is None or field(item, "topic_id") is not None for item in requested
    ):  # topic ids came with v12, and names cannot be null before: Kafka answers the whole
        # request INVALID_REQUEST, a null name as ""
        topics = [_error_entry(field(item, "name") or "", ErrorCode.invalid_request)
                  for item in requested]  # fmt: skip
    else:
        topics = [_requested_entry(ctx, item, allow_create) for item in requested]
    if field(body, "include_topic_authorized_operations", False):
        for entry in topics:
            if entry["error_code"] == ErrorCode.none:
                entry["topic_authorized_operations"] = authorized_operations(
                    ctx, ResourceType.TOPIC, entry["name"]
                )
    cluster_operations = authorized_operations(
        ctx, ResourceType.CLUSTER, CLUSTER_NAME,
        asked=bool(field(body, "include_cluster_authorized_operations", False)),
    )  # fmt: skip
    if cluster_operations >= 0 and not authorize_cluster(ctx, AclOperation.DESCRIBE):
        cluster_operations = 0
    brokers = [
        {"node_id": b.id, "host": ep.host, "port": ep.port, "rack": b.rack}
        for b, ep in cache.alive_endpoints(ctx.session.listener_name)
    ]
    return build(
        request.response_type,
        throttle_time=0,
        brokers=brokers,
        cluster_id=cache.cluster_id,
        controller_id=cache.controller_id,
        topics=topics,
        cluster_authorized_operations=cluster_operations,
    )
