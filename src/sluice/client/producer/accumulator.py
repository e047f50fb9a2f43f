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
deques' lifecycle is here too: re-enqueueing retried batches, delivery-timeout
expiry, muting, incomplete batches (flush waits for them, close aborts them) and
deallocation.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple

from sluice.base import TopicPartition
from sluice.base.clock import Clock
from sluice.client.backoff import ExponentialBackoff
from sluice.client.errors import KafkaException
from sluice.client.producer.buffer_pool import BufferPool
from sluice.client.producer.partitioner import BuiltInPartitioner
from sluice.client.producer.producer_batch import (
    Callback,
    FutureRecordMetadata,
    ProducerBatch,
)
from sluice.protocol.records.builder import MemoryRecordsBuilder, estimate_size_in_bytes_upper_bound
from sluice.protocol.records.compression import CompressionType

if TYPE_CHECKING:
    from sluice.client.net.cluster import Cluster, Node
    from sluice.client.producer.transaction_manager import TransactionManager

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


UNKNOWN_PARTITION = -1
"""A record for the sticky partitioner to place (Kafka's RecordMetadata.UNKNOWN_PARTITION)."""


class RecordAppendResult(NamedTuple):
    """What ``append`` did: the record's future, and whether to wake the Sender."""

    future: FutureRecordMetadata
    batch_is_full: bool
    new_batch_created: bool
    appended_bytes: int = 0


class ReadyCheckResult(NamedTuple):
    """Nodes with sendable data, when to check again, topics lacking a leader."""

    ready_nodes: set[Node]
    next_ready_check_delay_ms: int
    unknown_leader_topics: set[str]


@dataclass(frozen=True)
class AccumulatorConfig:
    """The producer settings the accumulator uses (Kafka's names, in snake case)."""

    batch_size: int = 16384
    compression: CompressionType = CompressionType.NONE
    compression_level: int | None = None
    linger_ms: int = 5
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    delivery_timeout_ms: int = 120000
    adaptive_partitioning: bool = True
    backoff_jitter: float = 0.2


class PartitionDeque(deque[ProducerBatch]):
    """A partition's batches and the lock guarding them (Java synchronizes on the deque)."""

    __slots__ = ("lock",)

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()


class TopicInfo:
    """A topic's deques by partition and its sticky partitioner (Kafka's TopicInfo)."""

    __slots__ = ("batches", "partitioner")

    def __init__(self, topic: str, sticky_batch_size: int) -> None:
        self.partitioner = BuiltInPartitioner(topic, sticky_batch_size)
        self.batches: dict[int, PartitionDeque] = {}


class IncompleteBatches:
    """Batches created and not yet completed: what flush waits for and close aborts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: set[ProducerBatch] = set()

    def add(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._batches.add(batch)

    def remove(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._batches.discard(batch)

    def copy_all(self) -> list[ProducerBatch]:
        with self._lock:
            return list(self._batches)

    def is_empty(self) -> bool:
        with self._lock:
            return not self._batches

    def await_all(self, clock: Clock, timeout_ms: int | None) -> bool:
        """Wait for the batches incomplete now; False if ``timeout_ms`` ran out."""
        deadline = None if timeout_ms is None else clock.hi_res_clock_ms() + timeout_ms
        for batch in self.copy_all():
            result = batch.produce_future
            if deadline is None:
                result.wait()
                continue
            remaining = (deadline - clock.hi_res_clock_ms()) / 1000
            if not (result.completed() or (remaining > 0 and result.wait(remaining))):
                return False
        return True


def all_batches_full(dq: PartitionDeque) -> bool:
    """Whether the sticky partitioner may switch away from this partition."""
    return not dq or dq[-1].is_full()


def insert_in_sequence_order(dq: PartitionDeque, batch: ProducerBatch) -> None:
    """Re-enqueue ``batch`` ahead of later sequences (batches without one come last)."""
    first = dq[0] if dq else None
    if first is not None and first.has_sequence() and first.base_sequence < batch.base_sequence:
        ordered: list[ProducerBatch] = []
        while dq and dq[0].has_sequence() and dq[0].base_sequence < batch.base_sequence:
            ordered.append(dq.popleft())
        dq.appendleft(batch)
        for earlier in reversed(ordered):
            dq.appendleft(earlier)
    else:
        dq.appendleft(batch)


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


class RecordAccumulator:
    """Batches records per partition for the Sender (Kafka's RecordAccumulator)."""

    def __init__(
        self,
        config: AccumulatorConfig,
        free: BufferPool,
        clock: Clock,
        transaction_manager: TransactionManager | None = None,
    ) -> None:
        self.config = config
        self.free = free
        self._clock = clock
        self._transaction_manager = transaction_manager
        self._batch_size = config.batch_size
        self._delivery_timeout_ms = config.delivery_timeout_ms
        self._topic_info: dict[str, TopicInfo] = {}
        self._batches: dict[TopicPartition, PartitionDeque] = {}  # copy-on-write
        self._cow_lock = threading.Lock()
        self._incomplete = IncompleteBatches()
        self._muted: set[TopicPartition] = set()
        self._flushes_in_progress = 0
        self._flush_lock = threading.Lock()
        self._closed = False
        self.next_batch_expiry_time_ms = _FOREVER
        self._retry_backoff = ExponentialBackoff(
            config.retry_backoff_ms, 2, config.retry_backoff_max_ms, config.backoff_jitter
        )
        self._linger_ms = config.linger_ms
        self.drain_index: dict[int, int] = {}
        self._ratios = CompressionRatioEstimator()

    def _topic_info_for(self, topic: str) -> TopicInfo:
        info = self._topic_info.get(topic)
        if info is None:
            info = self._topic_info.setdefault(topic, TopicInfo(topic, self._batch_size))
        return info

    def _get_or_create_deque(self, info: TopicInfo, tp: TopicPartition) -> PartitionDeque:
        with self._cow_lock:
            dq = info.batches.get(tp.partition)
            if dq is None:
                dq = PartitionDeque()
                info.batches[tp.partition] = dq
                batches = dict(self._batches)
                batches[tp] = dq
                self._batches = batches
            return dq

    def get_deque(self, tp: TopicPartition) -> deque[ProducerBatch] | None:
        return self._batches.get(tp)

    # -- retries, expiry, muting ---------------------------------------------------

    def reenqueue(self, batch: ProducerBatch, now_ms: int) -> None:
        """Put a batch to retry back at the head of its deque (in sequence order)."""
        batch.reenqueued(now_ms)
        tp = batch.topic_partition
        dq = self._get_or_create_deque(self._topic_info_for(tp.topic), tp)
        with dq.lock:
            if self._transaction_manager is not None and batch.has_sequence():
                insert_in_sequence_order(dq, batch)
            else:
                dq.appendleft(batch)

    def expired_batches(self, now_ms: int) -> list[ProducerBatch]:
        """Remove and return queued batches past delivery.timeout.ms, oldest first."""
        expired: list[ProducerBatch] = []
        for dq in self._batches.values():
            if not dq:
                continue
            with dq.lock:
                while dq:
                    batch = dq[0]
                    if batch.has_reached_delivery_timeout(self._delivery_timeout_ms, now_ms):
                        dq.popleft()
                        batch.abort_record_appends()
                        expired.append(batch)
                    else:
                        self.maybe_update_next_batch_expiry_time(batch)
                        break
        return expired

    def maybe_update_next_batch_expiry_time(self, batch: ProducerBatch) -> None:
        expiry = batch.created_ms + self._delivery_timeout_ms
        if expiry < self.next_batch_expiry_time_ms:
            self.next_batch_expiry_time_ms = expiry

    def reset_next_batch_expiry_time(self) -> None:
        self.next_batch_expiry_time_ms = _FOREVER

    @property
    def delivery_timeout_ms(self) -> int:
        return self._delivery_timeout_ms

    def mute_partition(self, tp: TopicPartition) -> None:
        self._muted.add(tp)

    def unmute_partition(self, tp: TopicPartition) -> None:
        self._muted.discard(tp)

    def is_muted(self, tp: TopicPartition) -> bool:
        return tp in self._muted

    # -- completion, flush, close ------------------------------------------------

    def deallocate(self, batch: ProducerBatch) -> None:
        """Forget a completed batch and return its memory (its buffer to the pool
        unless a socket write may still reference it)."""
        self._incomplete.remove(batch)
        batch.records_builder.release()
        if batch.in_flight:
            self.free.deallocate(None, batch.initial_capacity)
        else:
            self.free.deallocate(batch.buffer(), batch.initial_capacity)

    def has_undrained(self) -> bool:
        return any(self._batches.values())

    def has_incomplete(self) -> bool:
        return not self._incomplete.is_empty()

    def incomplete_batches(self) -> list[ProducerBatch]:
        return self._incomplete.copy_all()

    def begin_flush(self) -> None:
        """Make every batch ready at once until the matching :meth:`end_flush`."""
        with self._flush_lock:
            self._flushes_in_progress += 1

    def end_flush(self) -> None:
        with self._flush_lock:
            self._flushes_in_progress -= 1

    def flush_in_progress(self) -> bool:
        return self._flushes_in_progress > 0

    def await_flush_completion(self, timeout_ms: int | None = None) -> bool:
        """Wait for the batches incomplete now; False on timeout. Ends the flush."""
        try:
            return self._incomplete.await_all(self._clock, timeout_ms)
        finally:
            self.end_flush()

    def close(self) -> None:
        """No more appends; waiting appenders fail. Queued batches are still sent."""
        self._closed = True
        self.free.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def abort_incomplete_batches(self, reason: Exception | None = None) -> None:
        """Fail every batch not yet completed (forced close): queued and in flight."""
        error = reason or KafkaException("Producer is closed forcefully.")
        self._closed = True
        for dq in self._batches.values():
            with dq.lock:
                for batch in dq:
                    batch.abort_record_appends()
                dq.clear()
        for batch in self.incomplete_batches():
            if not batch.is_done():
                batch.abort(error)
            self.deallocate(batch)

    def abort_undrained_batches(self, reason: Exception) -> None:
        """Fail the queued batches that were never sent (a fatal producer error)."""
        aborted: list[ProducerBatch] = []
        for dq in self._batches.values():
            with dq.lock:
                kept = [b for b in dq if b.has_sequence() or b.in_flight]
                aborted.extend(b for b in dq if not (b.has_sequence() or b.in_flight))
                dq.clear()
                dq.extend(kept)
        for batch in aborted:
            batch.abort_record_appends()
            batch.abort(reason)
            self.deallocate(batch)

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
                    now_ms = self._clock.hi_res_clock_ms()
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
