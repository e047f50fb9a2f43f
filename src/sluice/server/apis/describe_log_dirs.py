"""DescribeLogDirs (35): this broker's ``log.dirs``, each with its error, its volume's
total and usable bytes and the partition logs in it.

As Kafka's ``ReplicaManager.describeLogDirs``: every directory of ``log.dirs`` is listed
by its absolute path; an offline one answers KAFKA_STORAGE_ERROR and nothing else. A
partition log's entry gives its size (the bytes of its segments), whether it is the
future log of a move between directories (AlterReplicaLogDirs) and its offset lag: for
the current log how far its end lies below the partition's high watermark (0 for a
replica that holds what the leader committed), for a future log how far its end lies
below the current log's. The request names partitions, or none (null) for every log
here; a named partition this broker has no log of is left out. It needs DESCRIBE on the
cluster: without it the answer is CLUSTER_AUTHORIZATION_FAILED (v3+) and no directory.
The volume's sizes come from ``statvfs``: total is its size, usable what an
unprivileged writer may still use (Java's ``FileStore.getUsableSpace``).

Versions 1-4: v0 was removed in Kafka 4.0 and kio has no schema for it; v4 adds the
volume's total and usable bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.security.acl import AclOperation
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import authorize_cluster
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.describe_log_dirs.v1.request as v1
    import kio.schema.describe_log_dirs.v2.request as v2
    import kio.schema.describe_log_dirs.v3.request as v3
    import kio.schema.describe_log_dirs.v4.request as v4

    from sluice.log import Log
    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v1.DescribeLogDirsRequest
        | v2.DescribeLogDirsRequest
        | v3.DescribeLogDirsRequest
        | v4.DescribeLogDirsRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.DESCRIBE_LOG_DIRS, 1, 4, needs_coordinators=False)

INVALID_OFFSET_LAG = -1
"""The lag of a log whose partition is not hosted here (Kafka's INVALID_OFFSET_LAG)."""

_MAX_LONG = 2**63 - 1


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return build(request.response_type, throttle_time=0, results=[],
                     error_code=ErrorCode.cluster_authorization_failed)  # fmt: skip
    wanted: set[TopicPartition] | None = None
    if body.topics is not None:
        wanted = {TopicPartition(t.topic, p) for t in body.topics for p in t.partitions}
    return build(
        request.response_type,
        throttle_time=0,
        error_code=ErrorCode.none,
        results=describe_log_dirs(ctx, wanted),
    )


def describe_log_dirs(ctx: RequestContext, wanted: set[TopicPartition] | None) -> list[Any]:
    """One result per directory of ``log.dirs``, in its order."""
    manager = ctx.log_manager
    live = set(manager.live_log_dirs)
    by_dir: dict[Path, list[tuple[TopicPartition, Log, bool]]] = {}
    for tp, log, is_future in _all_logs(ctx):
        if wanted is None or tp in wanted:
            by_dir.setdefault(log.dir.parent, []).append((tp, log, is_future))
    results: list[Any] = []
    for directory in manager.log_dirs:
        path = str(directory.absolute())
        if directory not in live:
            results.append(
                {"error_code": ErrorCode.kafka_storage_error, "log_dir": path, "topics": []}
            )
            continue
        try:
            total, usable = volume_bytes(directory)
        except OSError:
            results.append(
                {"error_code": ErrorCode.kafka_storage_error, "log_dir": path, "topics": []}
            )
            continue
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, log, is_future in sorted(by_dir.get(directory, ()), key=lambda e: e[0]):
            topics.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "partition_size": log.size,
                    "offset_lag": offset_lag(ctx, tp, log, is_future),
                    "is_future_key": is_future,
                }
            )
        results.append(
            {
                "error_code": ErrorCode.none,
                "log_dir": path,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "total_bytes": total,
                "usable_bytes": usable,
            }
        )
    return results


def _all_logs(ctx: RequestContext) -> Iterable[tuple[TopicPartition, Log, bool]]:
    """Every live log here, current and future (Kafka's ``allLogs``)."""
    manager = ctx.log_manager
    for tp, log in manager.logs.items():
        if not log.is_offline:
            yield tp, log, False
    for tp, log in manager.future_logs.items():
        if not log.is_offline:
            yield tp, log, True


def offset_lag(ctx: RequestContext, tp: TopicPartition, log: Log, is_future: bool) -> int:
    """Kafka's ``getLogEndOffsetLag``."""
    partition = ctx.replica_manager.get_partition(tp)
    if partition is None or partition.log.is_offline:
        return INVALID_OFFSET_LAG
    if is_future:
        return int(partition.log.log_end_offset - log.log_end_offset)
    return max(partition.high_watermark - log.log_end_offset, 0)


def volume_bytes(directory: Path) -> tuple[int, int]:
    """The total and usable bytes of the volume holding ``directory``."""
    stats = os.statvfs(directory)
    total = stats.f_blocks * stats.f_frsize
    usable = stats.f_bavail * stats.f_frsize
    return min(total, _MAX_LONG), min(usable, _MAX_LONG)
