"""``BatchQueues``: the accumulator's per-partition deques and their lifecycle.

The state :class:`~.accumulator.RecordAccumulator` shares between appenders and
the Sender, and everything that is not append/ready/drain: the copy-on-write map
of deques, re-enqueueing retried batches, delivery-timeout expiry, muting,
incomplete batches (flush waits for them, close aborts them) and deallocation.
"""

from __future__ import annotations

import threading
from collections import deque

from sluice.base import TopicPartition
from sluice.base.clock import Clock

from .accumulator_support import (
    AccumulatorConfig,
    IncompleteBatches,
    PartitionDeque,
    TopicInfo,
    insert_in_sequence_order,
)
from .buffer_pool import BufferPool
from .errors import KafkaException
from .producer_batch import ProducerBatch
from .transaction_manager import TransactionManager

__all__ = ["BatchQueues"]

_FOREVER = 2**63 - 1


class BatchQueues:
    """Per-partition deques of batches, and their retry, expiry and close handling."""

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
