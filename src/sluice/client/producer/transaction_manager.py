"""``TransactionManager``: the idempotent producer's state (Kafka's class, idempotence only).

It holds the producer id and epoch from InitProducerId and, per partition, the
next sequence number, the last acknowledged sequence and the in-flight batches
ordered by sequence. The accumulator asks it, at drain time, whether a
partition's next batch may go (``should_stop_drain_batches_for_partition``) and
has it stamp new batches with id, epoch and sequence. The Sender reports each
outcome, and the manager decides as the Java client does:

* OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID for a batch that is the
  next expected one means a real gap: the epoch is bumped locally (KIP-360) and
  the sequences of in-flight batches restart at 0 under the new epoch; other
  batches are retried until the gap resolves.
* A batch that expired after being sent leaves its sequence *unresolved*: no new
  batch of that partition is drained until the in-flight ones complete; if the
  acknowledged sequence then does not line up, the epoch is bumped.
* Epoch exhausted (32767): a new producer id is requested.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sluice.base import TopicPartition
from sluice.client.errors import (
    KafkaException,
    OutOfOrderSequenceException,
    ProducerFencedException,
    UnknownProducerIdException,
    exception_for,
)
from sluice.client.producer.producer_batch import ProducerBatch
from sluice.protocol.errors import ErrorCode
from sluice.protocol.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE

__all__ = ["ProducerIdAndEpoch", "TransactionManager"]

log = logging.getLogger(__name__)

NO_LAST_ACKED_SEQUENCE_NUMBER = -1
MAX_EPOCH = 32767


class ProducerIdAndEpoch(NamedTuple):
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH

    def is_valid(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID


NONE = ProducerIdAndEpoch()


@dataclass
class _TxnPartitionEntry:
    producer_id_and_epoch: ProducerIdAndEpoch = NONE
    next_sequence: int = 0
    last_acked_sequence: int = NO_LAST_ACKED_SEQUENCE_NUMBER
    last_acked_offset: int = -1
    in_flight: list[ProducerBatch] = field(default_factory=list)  # by base sequence


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from Int32.MAX to 0."""
    return (sequence + increment) & 0x7FFFFFFF


class TransactionManager:
    """Producer id, epoch and per-partition sequences of an idempotent producer."""

    def __init__(self, transactional: bool = False) -> None:
        # A transactional producer's batches carry the transactional flag and its producer
        # id comes from init_transactions(), never from the Sender.
        self.transactional = transactional
        self._lock = threading.RLock()
        self.producer_id_and_epoch = NONE
        self._partitions: dict[TopicPartition, _TxnPartitionEntry] = {}
        self._unresolved: dict[TopicPartition, int] = {}
        self._partitions_to_rewrite: set[TopicPartition] = set()
        self._epoch_bump_required = False
        self._fatal_error: KafkaException | None = None
        # a transactional producer's first batch that failed in the current transaction:
        # the transaction cannot commit (checked by the producer, reset when it begins)
        self.failed_batch_error: Exception | None = None
        self.initializing = False

    # -- producer id --------------------------------------------------------------

    def has_producer_id(self) -> bool:
        return self.producer_id_and_epoch.is_valid()

    def has_producer_id_and_epoch(self, producer_id: int, epoch: int) -> bool:
        return self.producer_id_and_epoch == (producer_id, epoch)

    def set_producer_id_and_epoch(self, value: ProducerIdAndEpoch) -> None:
        with self._lock:
            log.info("ProducerId set to %d with epoch %d", value.producer_id, value.epoch)
            self.producer_id_and_epoch = value
            self.initializing = False

    def start_new_epoch(self, value: ProducerIdAndEpoch) -> None:
        """A transactional producer's epoch bumped after an aborted transaction (nothing in
        flight): every partition's sequence starts again at 0, as in Java's client."""
        with self._lock:
            log.info("ProducerId set to %d with epoch %d; sequences reset",
                     value.producer_id, value.epoch)  # fmt: skip
            self.producer_id_and_epoch = value
            self._partitions.clear()
            self._unresolved.clear()
            self._partitions_to_rewrite.clear()
            self._epoch_bump_required = False
            self.failed_batch_error = None

    def handle_init_producer_id_response(self, body: Any) -> bool:
        """Apply an InitProducerId response; False if it should be retried."""
        code = ErrorCode(body.error_code)
        if code is ErrorCode.none:
            self.set_producer_id_and_epoch(
                ProducerIdAndEpoch(int(body.producer_id), int(body.producer_epoch))
            )
        elif code.retriable:
            log.warning("InitProducerId failed with %s; retrying", code.name.upper())
            return False
        else:
            message = (
                f"InitProducerId failed: {code.name.upper()} (the idempotent producer "
                "cannot start; set enable.idempotence=false to produce without it)"
            )
            self.transition_to_fatal_error(exception_for(code, message))
        return True

    def needs_init_producer_id(self) -> bool:
        """Bump the epoch if asked to; whether an InitProducerId request is needed."""
        with self._lock:
            if self._fatal_error is not None or self.transactional:
                return False
            if self._epoch_bump_required:
                self._bump_idempotent_producer_epoch()
            return not self.has_producer_id()

    def _bump_idempotent_producer_epoch(self) -> None:
        current = self.producer_id_and_epoch
        if current.epoch >= MAX_EPOCH:
            self.producer_id_and_epoch = NONE  # a new id resets every sequence
        else:
            self.producer_id_and_epoch = ProducerIdAndEpoch(current.producer_id, current.epoch + 1)
            log.info("Incremented producer epoch to %d (producer id %d)",
                     current.epoch + 1, current.producer_id)  # fmt: skip
        for tp in self._partitions_to_rewrite:
            self._start_sequences_at_beginning(tp, self.producer_id_and_epoch)
            self._unresolved.pop(tp, None)
        self._partitions_to_rewrite.clear()
        self._epoch_bump_required = False

    def transition_to_fatal_error(self, error: KafkaException) -> None:
        with self._lock:
            if self._fatal_error is None:
                log.error("idempotent producer failed: %s", error)
                self._fatal_error = error

    @property
    def fatal_error(self) -> KafkaException | None:
        return self._fatal_error

    def has_fatal_error(self) -> bool:
        return self._fatal_error is not None

    # -- per-partition sequences ------------------------------------------------------

    def _entry(self, tp: TopicPartition) -> _TxnPartitionEntry:
        entry = self._partitions.get(tp)
        if entry is None:
            entry = self._partitions[tp] = _TxnPartitionEntry(self.producer_id_and_epoch)
        return entry

    def sequence_number(self, tp: TopicPartition) -> int:
        return self._entry(tp).next_sequence

    def last_acked_sequence(self, tp: TopicPartition) -> int:
        return self._entry(tp).last_acked_sequence

    def has_in_flight_batches(self, tp: TopicPartition) -> bool:
        entry = self._partitions.get(tp)
        return entry is not None and bool(entry.in_flight)

    def first_in_flight_sequence(self, tp: TopicPartition) -> int:
        entry = self._partitions.get(tp)
        if entry is None or not entry.in_flight:
            return NO_SEQUENCE
        return entry.in_flight[0].base_sequence

    def has_stale_producer_id_and_epoch(self, tp: TopicPartition) -> bool:
        return self._entry(tp).producer_id_and_epoch != self.producer_id_and_epoch

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool:
        return tp in self._unresolved

    def is_next_sequence(self, tp: TopicPartition, sequence: int) -> bool:
        return sequence - self._entry(tp).last_acked_sequence == 1

    def should_stop_drain_batches_for_partition(
        self, first: ProducerBatch, tp: TopicPartition
    ) -> bool:
        """Whether ``first`` must wait (deque lock held), as in Kafka's accumulator."""
        with self._lock:
            if self._fatal_error is not None or not self.has_producer_id():
                return True
            if not first.has_sequence():
                if self.has_in_flight_batches(tp) and self.has_stale_producer_id_and_epoch(tp):
                    # a new epoch must not start before the old one's batches are done
                    return True
                if self.has_unresolved_sequence(tp):
                    return True
            first_in_flight = self.first_in_flight_sequence(tp)
            # A retried batch goes only when it is the first in flight: this keeps
            # retries in order (effectively one request in flight while retrying).
            return (
                first_in_flight != NO_SEQUENCE
                and first.has_sequence()
                and first.base_sequence != first_in_flight
            )

    def assign_sequence_if_needed(self, batch: ProducerBatch) -> None:
        """Stamp a drained batch with id, epoch and the partition's next sequence."""
        with self._lock:
            if batch.has_sequence():
                return
            tp = batch.topic_partition
            entry = self._entry(tp)
            if entry.producer_id_and_epoch != self.producer_id_and_epoch and not entry.in_flight:
                self._start_sequences_at_beginning(tp, self.producer_id_and_epoch)
            pid, epoch = self.producer_id_and_epoch
            batch.set_producer_state(pid, epoch, entry.next_sequence, self.transactional)
            entry.next_sequence = increment_sequence(entry.next_sequence, batch.record_count)
            entry.in_flight.append(batch)
            entry.in_flight.sort(key=lambda b: b.base_sequence)

    def _start_sequences_at_beginning(self, tp: TopicPartition, pid: ProducerIdAndEpoch) -> None:
        entry = self._entry(tp)
        sequence = 0
        for batch in entry.in_flight:
            batch.reset_producer_state(pid.producer_id, pid.epoch, sequence)
            sequence = increment_sequence(sequence, batch.record_count)
        entry.producer_id_and_epoch = pid
        entry.next_sequence = sequence
        entry.last_acked_sequence = NO_LAST_ACKED_SEQUENCE_NUMBER

    def remove_in_flight_batch(self, batch: ProducerBatch) -> None:
        with self._lock:
            entry = self._partitions.get(batch.topic_partition)
            if entry is not None and batch in entry.in_flight:
                entry.in_flight.remove(batch)

    # -- outcomes ---------------------------------------------------------------------

    def handle_completed_batch(self, batch: ProducerBatch, base_offset: int) -> None:
        with self._lock:
            entry = self._entry(batch.topic_partition)
            if batch.last_sequence() > entry.last_acked_sequence:
                entry.last_acked_sequence = batch.last_sequence()
            if base_offset >= 0:
                entry.last_acked_offset = max(
                    entry.last_acked_offset, base_offset + batch.record_count - 1
                )
            if batch in entry.in_flight:
                entry.in_flight.remove(batch)

    def handle_failed_batch(
        self, batch: ProducerBatch, exception: Exception, adjust_sequence_numbers: bool
    ) -> None:
        with self._lock:
            self.remove_in_flight_batch(batch)
            if self.transactional and self.failed_batch_error is None:
                self.failed_batch_error = exception
            if self._fatal_error is not None:
                return
            tp = batch.topic_partition
            code = getattr(exception, "code", None)
            if self.transactional and code in (
                ErrorCode.producer_fenced,
                ErrorCode.invalid_producer_epoch,
            ):
                fenced = ProducerFencedException(
                    f"A newer producer with the same transactional.id fenced this one ({exception})"
                )
                self._fatal_error = fenced
                return
            if isinstance(exception, OutOfOrderSequenceException) and not isinstance(
                exception, UnknownProducerIdException
            ):
                log.error("The broker returned %s for %s with producer id %d, epoch %d and "
                          "sequence %d", exception.code.name.upper(), tp, batch.producer_id,
                          batch.producer_epoch, batch.base_sequence)  # fmt: skip
                self._request_epoch_bump(tp)
            elif isinstance(exception, UnknownProducerIdException):
                entry = self._entry(tp)
                entry.next_sequence = 0
                entry.last_acked_sequence = NO_LAST_ACKED_SEQUENCE_NUMBER
            elif adjust_sequence_numbers:
                self._request_epoch_bump(tp)

    def can_retry(self, error: ErrorCode, log_start_offset: int, batch: ProducerBatch) -> bool:
        """Whether a failed batch may be retried (Kafka's TransactionManager.canRetry)."""
        with self._lock:
            tp = batch.topic_partition
            if error is ErrorCode.unknown_producer_id:
                if log_start_offset == -1 or batch.sequence_has_been_reset():
                    return True
                self._request_epoch_bump(tp)
                return True
            if error is ErrorCode.out_of_order_sequence_number:
                unresolved = self.has_unresolved_sequence(tp)
                if not unresolved and (
                    batch.sequence_has_been_reset()
                    or not self.is_next_sequence(tp, batch.base_sequence)
                ):
                    return True  # not the next batch: wait for the gap to resolve
                if not unresolved or self._unresolved.get(tp) == batch.base_sequence:
                    self._request_epoch_bump(tp)
                return True
            return bool(error.retriable)

    def _request_epoch_bump(self, tp: TopicPartition) -> None:
        self._epoch_bump_required = True
        self._partitions_to_rewrite.add(tp)

    def mark_sequence_unresolved(self, batch: ProducerBatch) -> None:
        """A sent batch expired: its outcome is unknown until in-flight ones finish."""
        with self._lock:
            tp = batch.topic_partition
            self._unresolved[tp] = self._entry(tp).next_sequence
            log.debug("Marking partition %s unresolved", tp)

    def maybe_resolve_sequences(self) -> None:
        """Resolve partitions whose in-flight batches all completed."""
        with self._lock:
            for tp in list(self._unresolved):
                if self.has_in_flight_batches(tp):
                    continue
                if not self.is_next_sequence(tp, self.sequence_number(tp)):
                    self._request_epoch_bump(tp)
                del self._unresolved[tp]

    def producer_id_and_epoch_for_request(self) -> ProducerIdAndEpoch:
        return self.producer_id_and_epoch
