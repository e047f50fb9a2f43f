"""The broker's delayed operations: DelayedProduce, DelayedFetch, DelayedDeleteRecords,
DelayedCreatePartitions."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from sluice.base import TopicPartition
from sluice.log import LogOffsetMetadata
from sluice.protocol import ErrorCode
from sluice.purgatory import DelayedOperation
from sluice.replication.partition import FetchIsolation

if TYPE_CHECKING:
    from sluice.replication.metadata_cache import MetadataCache
    from sluice.replication.replica_manager import FetchParams, PartitionFetch, ReplicaManager

__all__ = [
    "DelayedCreatePartitions",
    "DelayedDeleteRecords",
    "DelayedFetch",
    "DelayedProduce",
    "ProducePartitionStatus",
]


@dataclasses.dataclass(slots=True)
class ProducePartitionStatus:
    """One partition of a produce request: the offset its acks wait for and its result."""

    required_offset: int  # last appended offset + 1
    base_offset: int
    log_append_time: int = -1
    log_start_offset: int = -1
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None
    acks_pending: bool = False
    # The append made a flush.messages flush due, done by the broker's group flusher
    # (sluice.log.group_flush): answered once the recovery point passes required_offset.
    flush_pending: bool = False


def _answered(statuses: dict[TopicPartition, ProducePartitionStatus]) -> None:
    """The callback of a DelayedProduce that has answered."""


class DelayedProduce(DelayedOperation):
    """An acks=all produce waiting until every partition's HW reaches its last offset + 1.
    Either acks=all or acks=1 also waits, where its append made a flush due, until the
    recovery point passes it (sluice.log.group_flush)."""

    __slots__ = ("callback", "replica_manager", "required_acks", "statuses")

    def __init__(
        self,
        delay_ms: int,
        statuses: dict[TopicPartition, ProducePartitionStatus],
        replica_manager: ReplicaManager,
        callback: Callable[[dict[TopicPartition, ProducePartitionStatus]], None],
        required_acks: int = -1,
    ) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self.replica_manager = replica_manager
        self.callback = callback
        self.required_acks = required_acks
        for status in statuses.values():
            status.acks_pending = status.error == ErrorCode.none

    def try_complete(self) -> bool:
        for tp, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = self.replica_manager.get_partition(tp)
            if partition is None:
                status.acks_pending, status.error = False, ErrorCode.unknown_topic_or_partition
                continue
            if self.required_acks == -1:
                done, error = partition.check_enough_replicas_reach_offset(status.required_offset)
            else:
                done, error = partition.check_written(status.required_offset)
            if error != ErrorCode.none:
                status.acks_pending, status.error = False, error
            elif done and status.flush_pending:
                if partition.log.recovery_point >= status.required_offset:
                    status.acks_pending = status.flush_pending = False
            elif done:
                status.acks_pending = False
        if any(s.acks_pending for s in self.statuses.values()):
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        pass  # on_complete already answered the pending partitions with REQUEST_TIMED_OUT

    def on_complete(self) -> None:
        for status in self.statuses.values():
            if status.acks_pending:
                status.acks_pending, status.error = False, ErrorCode.request_timed_out
        # Whatever the callback holds is let go: the completed operation may stay in the
        # watcher lists until a purge.
        callback, self.callback = self.callback, _answered
        callback(self.statuses)


class DelayedFetch(DelayedOperation):
    """A fetch waiting for ``min_bytes`` to accumulate across its partitions, or ``max_wait``.

    Completes early when enough bytes are available, a partition is unknown or no
    longer led here, or its fetch offset is no longer on the segment the end is on
    (a roll or a truncation). On completion the log is read again.
    """

    __slots__ = ("callback", "params", "partitions", "replica_manager")

    def __init__(
        self,
        delay_ms: int,
        params: FetchParams,
        partitions: list[tuple[PartitionFetch, LogOffsetMetadata]],
        replica_manager: ReplicaManager,
        callback: Callable[[], None],
    ) -> None:
        super().__init__(delay_ms)
        self.params = params
        self.partitions = partitions
        self.replica_manager = replica_manager
        self.callback = callback

    def try_complete(self) -> bool:
        accumulated = 0
        params = self.params
        isolation: FetchIsolation = params.isolation
        rm = self.replica_manager
        throttling = params.is_from_follower and rm.leader_quota.is_bounded
        for fetch, start in self.partitions:
            partition = rm.get_partition(fetch.tp)
            if partition is None or not partition.is_leader or partition.log.is_offline:
                return self.force_complete()  # answered NOT_LEADER or KAFKA_STORAGE_ERROR
            end = partition.offset_metadata(isolation)
            if end.message_offset == start.message_offset:
                continue
            if end.message_offset < start.message_offset:
                return self.force_complete()  # truncated below the fetch offset
            # A replica the leader throttle holds back is answered with nothing: its
            # data does not complete the fetch (as Kafka's DelayedFetch).
            if throttling and rm.should_leader_throttle(fetch.tp, params.replica_id):
                continue
            if (
                end.segment_base_offset < 0
                or start.segment_base_offset < 0
                or end.segment_base_offset != start.segment_base_offset
            ):
                return self.force_complete()  # on another segment: cannot size it, answer
            available = end.relative_position_in_segment - start.relative_position_in_segment
            accumulated += min(available, fetch.max_bytes)
        if accumulated >= self.params.min_bytes:
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        pass

    def on_complete(self) -> None:
        self.callback()


class DelayedDeleteRecords(DelayedOperation):
    """DeleteRecords waiting until every replica's log start offset reached the target
    (on a single node the leader's own log already has)."""

    __slots__ = ("callback", "replica_manager", "results")

    def __init__(
        self,
        delay_ms: int,
        results: dict[TopicPartition, tuple[int, ErrorCode]],
        replica_manager: ReplicaManager,
        callback: Callable[[dict[TopicPartition, tuple[int, ErrorCode]]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.results = results
        self.replica_manager = replica_manager
        self.callback = callback

    def try_complete(self) -> bool:
        for tp, (low_watermark, error) in self.results.items():
            if error != ErrorCode.none:
                continue
            partition = self.replica_manager.get_partition(tp)
            if partition is None:
                self.results[tp] = (-1, ErrorCode.unknown_topic_or_partition)
            elif partition.low_watermark() < low_watermark:
                return False
        return self.force_complete()

    def on_expiration(self) -> None:
        pass

    def on_complete(self) -> None:
        for tp, (low, error) in list(self.results.items()):
            partition = self.replica_manager.get_partition(tp)
            lagging = partition is not None and partition.low_watermark() < low
            if error == ErrorCode.none and lagging:
                self.results[tp] = (-1, ErrorCode.request_timed_out)
        self.callback(self.results)


class DelayedCreatePartitions(DelayedOperation):
    """A CreateTopics or CreatePartitions answer waiting until this broker's metadata has
    a live leader for every new partition (in a cluster the controller's UpdateMetadata
    brings them, and completes it), as Kafka's. Watched under the topics' names; on
    completion, ``callback`` gets the topics some of whose partitions still have none
    (answered REQUEST_TIMED_OUT)."""

    __slots__ = ("callback", "metadata_cache", "partitions")

    def __init__(
        self,
        delay_ms: int,
        partitions: Mapping[str, Iterable[int]],
        metadata_cache: MetadataCache,
        callback: Callable[[set[str]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.partitions = {topic: tuple(ids) for topic, ids in partitions.items()}
        self.metadata_cache = metadata_cache
        self.callback = callback

    def missing_leaders(self) -> set[str]:
        """The topics with a new partition that has no live leader here yet."""
        leader = self.metadata_cache.leader
        return {
            topic
            for topic, ids in self.partitions.items()
            if any(leader(TopicPartition(topic, p)) is None for p in ids)
        }

    def try_complete(self) -> bool:
        if self.missing_leaders():
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        pass

    def on_complete(self) -> None:
        self.callback(self.missing_leaders())
