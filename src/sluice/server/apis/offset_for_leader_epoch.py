"""OffsetForLeaderEpoch (23): the end offset of a leader epoch, for log truncation checks.

Sluice keeps no leader-epoch checkpoint file (Kafka's ``leader-epoch-checkpoint``): the
epochs are read back from the ``partitionLeaderEpoch`` stamped on every batch, which
gives the same (epoch, start offset) entries as Kafka's LeaderEpochFileCache, plus the
partition's current epoch starting at the log end offset if nothing was written in it.
Then, as ``LeaderEpochFileCache.endOffsetFor``:

* requested epoch -1 (undefined) or newer than the latest epoch: epoch -1, offset -1;
* the latest epoch: the log end offset;
* an older epoch: the start offset of the next higher epoch, with the largest epoch
  <= the requested one (or the requested one when all earlier entries are gone).

The common cases (latest or newer epoch) need only the last batch's epoch; the batch
headers are scanned only for an older epoch, which on a single node happens only for
data written before the leader epoch last changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.log import LATEST_TIMESTAMP, KafkaStorageException
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize_cluster,
    filter_by_authorized,
)
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.offset_for_leader_epoch.v2.request as v2
    import kio.schema.offset_for_leader_epoch.v3.request as v3
    import kio.schema.offset_for_leader_epoch.v4.request as v4

    from sluice.replication.partition import Partition
    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v2.OffsetForLeaderEpochRequest
        | v3.OffsetForLeaderEpochRequest
        | v4.OffsetForLeaderEpochRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, needs_coordinators=False)

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


def epoch_entries(partition: Partition) -> list[tuple[int, int]]:
    """(epoch, start offset) for each epoch in the log, in increasing order; batches
    before the log start offset do not count, a batch spanning it starts at it."""
    log = partition.log
    start = log.log_start_offset
    entries: list[tuple[int, int]] = []
    for segment in log.segments:
        for header in segment.batches():
            epoch = header.partition_leader_epoch
            if header.next_offset <= start or epoch < 0:
                continue
            if not entries or epoch > entries[-1][0]:
                entries.append((epoch, max(header.base_offset, start)))
    if not entries or partition.leader_epoch > entries[-1][0]:
        entries.append((partition.leader_epoch, log.log_end_offset))
    return entries


def end_offset_for(partition: Partition, requested: int) -> tuple[int, int]:
    """(epoch, end offset) for ``requested``, as Kafka's LeaderEpochFileCache.endOffsetFor."""
    if requested == UNDEFINED_EPOCH:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    leo = partition.log.log_end_offset
    last = partition.log.fetch_offset_by_timestamp(LATEST_TIMESTAMP)
    last_written = last.leader_epoch if last is not None and last.leader_epoch is not None else -1
    latest = max(partition.leader_epoch, last_written)
    if requested == latest:
        return requested, leo
    if requested > latest:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    entries = epoch_entries(partition)
    higher = next((e for e in entries if e[0] > requested), None)
    if higher is None:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    floor = [e for e in entries if e[0] <= requested]
    return (floor[-1][0] if floor else requested), higher[1]


def _lookup(
    ctx: RequestContext, tp: TopicPartition, current_epoch: int, epoch: int
) -> dict[str, Any]:
    partition = ctx.replica_manager.get_partition(tp)
    if partition is None:
        return {"error_code": ErrorCode.unknown_topic_or_partition}
    if current_epoch >= 0 and current_epoch != partition.leader_epoch:
        code = (
            ErrorCode.fenced_leader_epoch
            if current_epoch < partition.leader_epoch
            else ErrorCode.unknown_leader_epoch
        )
        return {"error_code": code}
    if not partition.is_leader:
        return {"error_code": ErrorCode.not_leader_or_follower}
    if partition.log.is_offline:
        return {"error_code": ErrorCode.kafka_storage_error}
    try:
        found_epoch, end_offset = end_offset_for(partition, epoch)
    except (KafkaStorageException, OSError):  # the log's dir failed (its channel says so)
        return {"error_code": ErrorCode.kafka_storage_error}
    return {"error_code": ErrorCode.none, "leader_epoch": found_epoch, "end_offset": end_offset}


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    topics = []
    # As Kafka (KIP-320): a follower's CLUSTER_ACTION, or DESCRIBE on each topic.
    names = [t.topic for t in body.topics]
    if ctx.authorizer is None or authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        described: set[str] = set(names)
    else:
        described = filter_by_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition)
            entry = {
                "partition": p.partition,
                "leader_epoch": UNDEFINED_EPOCH,
                "end_offset": UNDEFINED_OFFSET,
            }
            if topic.topic not in described:
                entry["error_code"] = ErrorCode.topic_authorization_failed
            else:
                entry.update(_lookup(ctx, tp, field(p, "current_leader_epoch", -1), p.leader_epoch))
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return build(request.response_type, throttle_time=0, topics=topics)
