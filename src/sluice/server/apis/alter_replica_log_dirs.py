"""AlterReplicaLogDirs (34): move this broker's replicas of partitions to other
directories of its ``log.dirs`` while they keep serving.

As Kafka's ``ReplicaManager.alterReplicaLogDirs``, for each partition (a partition
named under several paths goes to the last): a topic whose future log's directory name
would pass 255 bytes is refused with INVALID_TOPIC_EXCEPTION; a path that is not one of
the ``log.dirs`` answers LOG_DIR_NOT_FOUND and an offline one KAFKA_STORAGE_ERROR. The
target is remembered for a partition not hosted here yet (its log is created there
later), which answers REPLICA_NOT_AVAILABLE (UNKNOWN_TOPIC_OR_PARTITION for a topic the
broker does not know). For a hosted partition a future log is created in the target
directory, unless the log is there already (a move elsewhere under way is then dropped)
or a move there is under way; no future log is created while a directory is offline
(KAFKA_STORAGE_ERROR), nor for a partition whose log is offline. The move itself runs in
the background (``server/replica_alter_log_dirs.py``): the answer says it started, and
DescribeLogDirs shows the future log and its lag until it is swapped in. As in Kafka,
the request needs ALTER on the cluster: without it every partition answers
CLUSTER_AUTHORIZATION_FAILED and nothing moves.

Versions 1-2: v0 was removed in Kafka 4.0 and kio has no schema for it; v2 is the
flexible version.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.log.errors import KafkaStorageException
from sluice.log.manager import LogDirNotFoundException
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.security.acl import AclOperation
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import authorize_cluster
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.alter_replica_log_dirs.v1.request as v1
    import kio.schema.alter_replica_log_dirs.v2.request as v2

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v1.AlterReplicaLogDirsRequest | v2.AlterReplicaLogDirsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2, needs_coordinators=False)

log = logging.getLogger(__name__)

MAX_DIR_NAME_BYTES = 255
_FUTURE_SUFFIX_BYTES = len(".") + 32 + len("-future")


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    wanted: dict[TopicPartition, str] = {}
    for log_dir in body.dirs:
        for topic in log_dir.topics:
            for p in topic.partitions:
                wanted[TopicPartition(topic.name, p)] = log_dir.path
    by_topic: dict[str, list[dict[str, Any]]] = {}
    allowed = authorize_cluster(ctx, AclOperation.ALTER)
    for tp, path in wanted.items():
        if not allowed:
            code = ErrorCode.cluster_authorization_failed
        else:
            code = alter_replica_log_dir(ctx, tp, path)
        if allowed and code != ErrorCode.none:
            log.warning("Unable to alter log dirs for %s to %s: %s", tp, path, code.name)
        entry = {"partition_index": tp.partition, "error_code": code}
        by_topic.setdefault(tp.topic, []).append(entry)
    return build(
        request.response_type,
        throttle_time=0,
        results=[{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()],
    )


def alter_replica_log_dir(ctx: RequestContext, tp: TopicPartition, path: str) -> ErrorCode:
    """Start moving ``tp``'s replica here to ``path``; the error code of the answer."""
    manager = ctx.log_manager
    name = f"{tp.topic}-{tp.partition}"
    if len(name.encode()) + _FUTURE_SUFFIX_BYTES > MAX_DIR_NAME_BYTES:
        return ErrorCode.invalid_topic_exception
    try:
        directory = manager.log_dir_of(path)
    except LogDirNotFoundException:
        return ErrorCode.log_dir_not_found
    except KafkaStorageException:
        return ErrorCode.kafka_storage_error
    partition = ctx.replica_manager.get_partition(tp)
    current = manager.logs.get(tp)
    if partition is not None and current is not None and current.is_offline:
        return ErrorCode.kafka_storage_error
    manager.maybe_update_preferred_log_dir(tp, directory)
    if partition is None or current is None:
        if ctx.metadata_cache.contains_topic(tp.topic):
            return ErrorCode.replica_not_available
        return ErrorCode.unknown_topic_or_partition
    try:
        future = manager.create_future_log(tp, directory)
    except KafkaStorageException:
        return ErrorCode.kafka_storage_error
    if future is not None:
        ctx.alter_log_dirs.add(tp)
    return ErrorCode.none
