"""``RecordAccumulator``: per-partition queues of batches between ``send`` and the Sender.

Kafka's design (seed 003, and KIP-794 for unkeyed records):

* ``append`` adds to the last batch of the partition's deque under the deque's
  lock; when it is full, memory for a new batch comes from the :class:`BufferPool`
  *outside* the lock (this may block up to max.block.ms), then the lock is taken
  again and the append retried before a new batch is created, since another
  thread may have created one meanwhile (the unused buffer goes back).
* ``ready`` tells the Sender which leaders have a sendable batch: full (or the
  deque holds more than one batch), lingered past linger.ms, memory exhausted
  (appenders are waiting), closing, or a flush in progress, unless the batch is
  backing off after a failed attempt or the partition is muted.
* ``drain`` takes, per ready node, at most one batch per partition up to
  max.request.size, starting at a rotating index per node (``drain_index``)
  so that no partition starves.

The map of deques is copy-on-write (Kafka's ``CopyOnWriteMap``): the Sender
iterates a snapshot without locking it; new partitions replace the map. The
deques' lifecycle (retries, expiry, muting, flush, close) lives in
:class:`~.accumulator_queues.BatchQueues`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from sluice.base import TopicPartition
from sluice.base.clock import Clock
from sluice.protocol.records.builder import MemoryRecordsBuilder, estimate_size_in_bytes_upper_bound
from sluice.protocol.records.compression import CompressionType

from .accumulator_queues import BatchQueues
from .accumulator_support import (
    UNKNOWN_PARTITION,
    AccumulatorConfig,
    PartitionDeque,
    ReadyCheckResult,
    RecordAppendResult,
    all_batches_full,
)
from .backoff import ExponentialBackoff
from .buffer_pool import BufferPool
from .errors import KafkaException
from .producer_batch import Callback, ProducerBatch

if TYPE_CHECKING:
    from .cluster import Cluster, Node
    from .transaction_manager import TransactionManager

__all__ = [
    "UNKNOWN_PARTITION",
    "AccumulatorConfig",
    "CompressionRatioEstimator",
    "ReadyCheckResult",
    "RecordAccumulator",
    "RecordAppendResult",
]

log = logging.getLogger(__name__)

_FOREVER = 2**63 - 1
_new_result = tuple.__new__


class CompressionRatioEstimator:
    """Per-topic compressed/uncompressed ratio estimates, Kafka's algorithm: start at
    1.0, step down slowly (0.005) when batches compress better, up fast (0.05)
    when worse. The accumulator uses them to size compressed batches."""

    IMPROVING_STEP: Final = 0.005
    DETERIORATE_STEP: Final = 0.05

    def __init__(self) -> None:
        self._ratios: dict[str, float] = {}

    def estimation(self, topic: str) -> float:
        return self._ratios.get(topic, 1.0)

    def update_estimation(self, topic: str, observed: float) -> float:
        current = self._ratios.get(topic, 1.0)
        if observed > current:
            current = max(current + self.DETERIORATE_STEP, observed)
        elif observed < current:
            current = max(current - self.IMPROVING_STEP, observed)
        self._ratios[topic] = current
        return current


class RecordAccumulator(BatchQueues):
    """Batches records per partition for the Sender (Kafka's RecordAccumulator)."""

    def __init__(
        self,
        config: AccumulatorConfig,
        free: BufferPool,
        clock: Clock,
        transaction_manager: TransactionManager | None = None,
    ) -> None:
        super().__init__(config, free, clock, transaction_manager)
        self._retry_backoff = ExponentialBackoff(
            config.retry_backoff_ms, 2, config.retry_backoff_max_ms, config.backoff_jitter
        )
        self._linger_ms = config.linger_ms
        self.drain_index: dict[int, int] = {}
        self._ratios = CompressionRatioEstimator()

    # -- append ----------------------------------------------------------------

    def append(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: bytes,
        callback: Callback | None,
        max_time_to_block_ms: int,
        now_ms: int,
        cluster: Cluster,
    ) -> RecordAppendResult:
        """Append a record; ``partition`` -1 lets the sticky partitioner choose.

        :raises KafkaException: the producer is closed.
        :raises BufferExhaustedException: no memory for a new batch within the block time.
        """
        info = self._topic_info.get(topic)
        if info is None:
            info = self._topic_info_for(topic)
        buffer: bytearray | None = None
        try:
            while True:
                if partition == UNKNOWN_PARTITION:
                    sticky = info.partitioner.sticky_partition_info
                    if sticky is None:
                        sticky = info.partitioner.peek_current_partition_info(cluster)
                    effective = sticky.partition
                else:
                    sticky = None
                    effective = partition
                dq = info.batches.get(effective)
                if dq is None:
                    dq = self._get_or_create_deque(info, TopicPartition(topic, effective))
                with dq.lock:
                    if sticky is not None and info.partitioner.sticky_partition_info is not sticky:
                        continue  # another thread switched partitions meanwhile
                    if self._closed:
                        raise KafkaException("Producer closed while send in progress")
                    if dq:  # the hot path: _try_append, inlined
                        last = dq[-1]
                        future = last.try_append(timestamp, key, value, headers, callback, now_ms)
                        if future is not None:
                            last_full = last.records_builder.full
                            size = last.last_record_size
                            if sticky is not None:
                                info.partitioner.update_partition_info(
                                    sticky, size, cluster, last_full
                                )
                            return _new_result(
                                RecordAppendResult, (future, last_full or len(dq) > 1, False, size)
                            )
                        last.close_for_record_appends()
                if buffer is None:
                    size = max(
                        self._batch_size,
                        estimate_size_in_bytes_upper_bound(
                            0 if key is None else len(key),
                            0 if value is None else len(value),
                            len(headers),
                        ),
                    )
                    log.debug("Allocating a new %d byte message buffer for %s-%d",
                              size, topic, effective)  # fmt: skip
                    buffer = self.free.allocate(size, max_time_to_block_ms)  # may block
                    now_ms = self._clock.now_ms()
                with dq.lock:
                    if sticky is not None and info.partitioner.is_partition_changed(sticky):
                        continue
                    if self._closed:
                        raise KafkaException("Producer closed while send in progress")
                    result = self._append_new_batch(
                        topic, effective, dq, timestamp, key, value, headers, callback, buffer,
                        now_ms,
                    )  # fmt: skip
                    if result.new_batch_created:
                        buffer = None  # now owned by the batch
                    if sticky is not None:
                        info.partitioner.update_partition_info(
                            sticky, result.appended_bytes, cluster, all_batches_full(dq)
                        )
                    return result
        finally:
            if buffer is not None:
                self.free.deallocate(buffer)

    def _try_append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: bytes,
        callback: Callback | None,
        dq: PartitionDeque,
        now_ms: int,
    ) -> RecordAppendResult | None:
        """Append to the deque's last batch if it has room (deque lock held)."""
        if not dq:
            return None
        last = dq[-1]
        future = last.try_append(timestamp, key, value, headers, callback, now_ms)
        if future is None:
            last.close_for_record_appends()
            return None
        return RecordAppendResult(
            future, len(dq) > 1 or last.is_full(), False, last.last_record_size
        )

    def _append_new_batch(
        self,
        topic: str,
        partition: int,
        dq: PartitionDeque,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: bytes,
        callback: Callback | None,
        buffer: bytearray,
        now_ms: int,
    ) -> RecordAppendResult:
        """Retry the last batch, else start a batch in ``buffer`` (deque lock held)."""
        result = self._try_append(timestamp, key, value, headers, callback, dq, now_ms)
        if result is not None:
            return result  # somebody else found us a batch; the buffer goes back
        builder = MemoryRecordsBuilder(
            buffer,
            self.config.compression,
            estimated_compression_ratio=self._ratios.estimation(topic),
            compression_level=self.config.compression_level,
        )
        batch = ProducerBatch(TopicPartition(topic, partition), builder, now_ms)
        future = batch.try_append(timestamp, key, value, headers, callback, now_ms)
        if future is None:  # pragma: no cover - the buffer is sized for the record
            raise AssertionError("a record did not fit in a batch sized for it")
        dq.append(batch)
        self._incomplete.add(batch)
        return RecordAppendResult(
            future, len(dq) > 1 or batch.is_full(), True, batch.estimated_size_in_bytes()
        )

    # -- ready and drain -------------------------------------------------------

    def ready(self, cluster: Cluster, now_ms: int) -> ReadyCheckResult:
        """Which leaders have sendable batches (Kafka's rules, see the module doc)."""
        ready_nodes: set[Node] = set()
        next_delay = _FOREVER
        unknown_leader_topics: set[str] = set()
        exhausted = self.free.queued() > 0
        closing = self._closed or self._flushes_in_progress > 0
        queue_sizes: dict[str, tuple[list[int], list[int]]] = {}
        adaptive = self.config.adaptive_partitioning
        for tp, dq in self._batches.items():
            leader = cluster.leader_for(tp)
            if adaptive and leader is not None:
                sizes, ids = queue_sizes.setdefault(tp.topic, ([], []))
                sizes.append(len(dq))
                ids.append(tp.partition)
            if not dq:
                continue
            if leader is None:
                unknown_leader_topics.add(tp.topic)
                continue
            if leader in ready_nodes or tp in self._muted:
                continue
            with dq.lock:
                if not dq:
                    continue
                batch = dq[0]
                waited = batch.waited_time_ms(now_ms)
                backoff = self._retry_backoff.backoff(batch.attempts - 1) if batch.attempts else 0
                backing_off = batch.attempts > 0 and waited < backoff
                time_to_wait = backoff if backing_off else self._linger_ms
                full = len(dq) > 1 or batch.is_full()
            expired = waited >= time_to_wait
            sendable = full or expired or exhausted or closing
            if sendable and not backing_off:
                ready_nodes.add(leader)
            else:
                next_delay = min(next_delay, max(time_to_wait - waited, 0))
        if adaptive:
            for topic, (sizes, ids) in queue_sizes.items():
                info = self._topic_info.get(topic)
                if info is not None:
                    info.partitioner.update_partition_load_stats(sizes, ids)
        return ReadyCheckResult(ready_nodes, next_delay, unknown_leader_topics)

    def drain(
        self, cluster: Cluster, nodes: Iterable[Node], max_size: int, now_ms: int
    ) -> dict[int, list[ProducerBatch]]:
        """Up to ``max_size`` bytes of batches per node, one batch per partition."""
        return {node.id: self._drain_batches_for_one_node(cluster, node, max_size, now_ms)
                for node in nodes}  # fmt: skip

    def _drain_batches_for_one_node(
        self, cluster: Cluster, node: Node, max_size: int, now_ms: int
    ) -> list[ProducerBatch]:
        size = 0
        parts = cluster.partitions_for_node(node.id)
        ready: list[ProducerBatch] = []
        if not parts:
            return ready
        tm = self._transaction_manager
        start = drain_index = self.drain_index.get(node.id, 0) % len(parts)
        while True:
            part = parts[drain_index]
            tp = TopicPartition(part.topic, part.partition)
            self.drain_index[node.id] = drain_index
            drain_index = (drain_index + 1) % len(parts)
            dq = self._batches.get(tp)
            if dq is not None and tp not in self._muted:
                batch: ProducerBatch | None = None
                with dq.lock:
                    first = dq[0] if dq else None
                    if first is not None and not self._backing_off(first, now_ms):
                        if size + first.estimated_size_in_bytes() > max_size and ready:
                            # A batch larger than the request size still goes, alone.
                            break
                        if tm is None or not tm.should_stop_drain_batches_for_partition(first, tp):
                            batch = dq.popleft()
                            if tm is not None:
                                tm.assign_sequence_if_needed(batch)
                if batch is not None:
                    batch.close()  # compression and CRC outside the lock
                    if self.config.compression != CompressionType.NONE:
                        self._ratios.update_estimation(
                            tp.topic, batch.records_builder.compression_ratio
                        )
                    size += batch.estimated_size_in_bytes()
                    ready.append(batch)
                    batch.drained(now_ms)
            if drain_index == start:
                break
        return ready

    def _backing_off(self, batch: ProducerBatch, now_ms: int) -> bool:
        if batch.attempts == 0:
            return False
        return batch.waited_time_ms(now_ms) < self._retry_backoff.backoff(batch.attempts - 1)
