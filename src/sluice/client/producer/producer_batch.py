"""``ProducerBatch`` and the futures handed to ``send`` callers (Kafka's names).

A batch owns a :class:`~.records.MemoryRecordsBuilder` over a BufferPool buffer and
one :class:`ProduceRequestResult` shared by the futures of all its records, so
completing a batch is O(1) for futures; only user callbacks are called one by
one, in append order, before waiters on the futures are released (as in Java,
callbacks of one partition run in send order).
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from typing import NamedTuple

from sluice.base import TopicPartition
from sluice.client.errors import TimeoutException
from sluice.protocol.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from sluice.protocol.records.builder import MemoryRecordsBuilder

__all__ = [
    "Callback",
    "FinalState",
    "FutureRecordMetadata",
    "ProduceRequestResult",
    "ProducerBatch",
    "RecordMetadata",
]

log = logging.getLogger(__name__)


class RecordMetadata(NamedTuple):
    """Where a record was written. ``offset`` is -1 with acks=0; ``timestamp`` is the
    broker's log append time for LogAppendTime topics, else the record's own."""

    topic: str
    partition: int
    offset: int
    timestamp: int


Callback = Callable[[RecordMetadata | None, Exception | None], None]
"""``callback(metadata, None)`` on success, ``callback(None, exception)`` on failure."""


class FinalState(enum.Enum):
    ABORTED = "aborted"
    FAILED = "failed"
    SUCCEEDED = "succeeded"


class ProduceRequestResult:
    """The outcome of one batch, shared by its records' futures.

    The event to wait on is created only when somebody waits: most batches are
    completed without anyone blocking on them.
    """

    __slots__ = ("_done", "_event", "base_offset", "error", "log_append_time", "topic_partition")

    def __init__(self, topic_partition: TopicPartition) -> None:
        self.topic_partition = topic_partition
        self.base_offset = -1
        self.log_append_time = -1
        self.error: Exception | None = None
        self._done = False
        self._event: threading.Event | None = None

    def set(self, base_offset: int, log_append_time: int, error: Exception | None) -> None:
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = error

    def done(self) -> None:
        """Release everyone waiting on the result (after callbacks ran)."""
        self._done = True  # before reading _event: see wait()
        event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait up to ``timeout_s`` seconds (None: forever); whether it completed."""
        if self._done:
            return True
        event = self._event
        if event is None:
            with _EVENT_LOCK:
                event = self._event
                if event is None:
                    event = self._event = threading.Event()
        # done() sets _done before it reads _event, and the event is published
        # before _done is read again here: one side always sees the other.
        if self._done:
            return True
        return event.wait(timeout_s)

    def completed(self) -> bool:
        return self._done


_EVENT_LOCK = threading.Lock()


class FutureRecordMetadata(tuple[ProduceRequestResult, int, int]):
    """The future ``Producer.send`` returns: ``get(timeout)`` waits for the record's
    batch and returns its :class:`RecordMetadata` or raises its exception.

    It holds (batch result, offset within the batch, timestamp); it is a tuple only
    because that is the cheapest object to create once per record.
    """

    __slots__ = ()

    def __new__(
        cls, result: ProduceRequestResult, relative_offset: int, timestamp: int
    ) -> FutureRecordMetadata:
        return _new_future(cls, (result, relative_offset, timestamp))

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Wait up to ``timeout`` seconds (None: forever) for the record's metadata.

        :raises TimeoutException: not completed within ``timeout``.
        :raises KafkaException: (a subclass) the record was not written.
        """
        result = self[0]
        if not result.wait(timeout):
            raise TimeoutException(f"Timeout after waiting for {int((timeout or 0) * 1000)} ms.")
        if result.error is not None:
            raise result.error
        return self.value()

    def done(self) -> bool:
        return self[0].completed()

    def exception(self) -> Exception | None:
        """The failure, once done (None while pending or on success)."""
        result = self[0]
        return result.error if result.completed() else None

    def value(self) -> RecordMetadata:
        result, relative_offset, timestamp = self
        base = result.base_offset
        offset = base + relative_offset if base >= 0 else -1
        if result.log_append_time >= 0:
            timestamp = result.log_append_time
        tp = result.topic_partition
        return RecordMetadata(tp.topic, tp.partition, offset, timestamp)

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"FutureRecordMetadata({self[0].topic_partition}, {state})"

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


_new_future = tuple.__new__


class ProducerBatch:
    """Records for one partition, sent and completed together."""

    __slots__ = (
        "attempts",
        "created_ms",
        "drained_ms",
        "final_state",
        "in_flight",
        "initial_capacity",
        "last_append_time",
        "last_attempt_ms",
        "last_record_size",
        "produce_future",
        "record_count",
        "records_builder",
        "reopened",
        "retry",
        "thunks",
        "topic_partition",
    )

    def __init__(
        self, tp: TopicPartition, records_builder: MemoryRecordsBuilder, created_ms: int
    ) -> None:
        self.topic_partition = tp
        self.records_builder = records_builder
        self.created_ms = created_ms
        self.last_attempt_ms = created_ms
        self.last_append_time = created_ms
        self.drained_ms = created_ms
        self.produce_future = ProduceRequestResult(tp)
        self.thunks: list[tuple[Callback, FutureRecordMetadata]] = []
        self.record_count = 0
        self.last_record_size = 0
        self.attempts = 0
        self.retry = False
        self.reopened = False
        self.in_flight = False
        """A produce request carrying this batch is outstanding (its buffer is in use)."""
        self.final_state: FinalState | None = None
        self.initial_capacity = len(records_builder.buffer)

    def try_append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: bytes,
        callback: Callback | None,
        now_ms: int,
    ) -> FutureRecordMetadata | None:
        """Append a record; None when the batch has no room for it."""
        size = self.records_builder.try_append(timestamp, key, value, headers)
        if not size:
            return None
        self.last_record_size = size
        future = _new_future(
            FutureRecordMetadata, (self.produce_future, self.record_count, timestamp)
        )
        if callback is not None:
            self.thunks.append((callback, future))
        self.record_count += 1
        self.last_append_time = now_ms
        return future

    # -- completion ------------------------------------------------------------

    def abort(self, exception: Exception) -> None:
        """Fail the batch before it was ever completed (producer closing, fatal error).

        :raises RuntimeError: if the batch already reached a final state.
        """
        if self.final_state is not None:
            raise RuntimeError(
                f"Batch has already been completed in final state {self.final_state}"
            )
        self.final_state = FinalState.ABORTED
        log.debug("aborting batch for %s: %s", self.topic_partition, exception)
        self._complete_future_and_fire_callbacks(-1, -1, exception)

    def complete(self, base_offset: int, log_append_time: int) -> bool:
        return self.done(base_offset, log_append_time, None)

    def complete_exceptionally(self, exception: Exception) -> bool:
        return self.done(-1, -1, exception)

    def done(self, base_offset: int, log_append_time: int, exception: Exception | None) -> bool:
        """Complete the batch once; later outcomes are ignored (a SUCCEEDED batch must
        not change). Returns whether this call completed it."""
        try_state = FinalState.SUCCEEDED if exception is None else FinalState.FAILED
        if self.final_state is None:
            self.final_state = try_state
            self._complete_future_and_fire_callbacks(base_offset, log_append_time, exception)
            return True
        if self.final_state is FinalState.SUCCEEDED:
            raise RuntimeError(
                f"A SUCCEEDED batch must not attempt another state change to {try_state.name}"
            )
        log.debug(
            "ignoring %s for %s batch of %s (already %s)",
            try_state.name, self.final_state.name, self.topic_partition, self.final_state.name,
        )  # fmt: skip
        return False

    def _complete_future_and_fire_callbacks(
        self, base_offset: int, log_append_time: int, exception: Exception | None
    ) -> None:
        self.produce_future.set(base_offset, log_append_time, exception)
        for callback, future in self.thunks:
            try:
                if exception is None:
                    callback(future.value(), None)
                else:
                    callback(None, exception)
            except Exception:
                log.exception(
                    "Error executing user-provided callback on message for topic-partition '%s'",
                    self.topic_partition,
                )
        self.produce_future.done()

    def is_done(self) -> bool:
        return self.final_state is not None

    # -- timing and retries ----------------------------------------------------

    def has_reached_delivery_timeout(self, delivery_timeout_ms: int, now_ms: int) -> bool:
        return delivery_timeout_ms <= now_ms - self.created_ms

    def waited_time_ms(self, now_ms: int) -> int:
        return max(0, now_ms - self.last_attempt_ms)

    def reenqueued(self, now_ms: int) -> None:
        self.attempts += 1
        self.last_attempt_ms = max(self.last_append_time, now_ms)
        self.last_append_time = max(self.last_append_time, now_ms)
        self.retry = True

    def drained(self, now_ms: int) -> None:
        self.drained_ms = max(self.drained_ms, now_ms)

    def in_retry(self) -> bool:
        return self.retry

    # -- records ---------------------------------------------------------------

    def is_full(self) -> bool:
        return self.records_builder.full

    def close_for_record_appends(self) -> None:
        self.records_builder.close_for_record_appends()

    def abort_record_appends(self) -> None:
        self.records_builder.close_for_record_appends()

    def close(self) -> None:
        """Seal the batch (compression, header, CRC); appends are over."""
        self.records_builder.close()

    def records(self) -> memoryview:
        """The sealed batch bytes (call :meth:`close` first)."""
        return self.records_builder.close()

    def estimated_size_in_bytes(self) -> int:
        return self.records_builder.size_in_bytes()

    def buffer(self) -> bytearray:
        return self.records_builder.buffer

    # -- idempotence -----------------------------------------------------------

    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool
    ) -> None:
        self.records_builder.set_producer_state(
            producer_id, producer_epoch, base_sequence, is_transactional
        )

    def reset_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int
    ) -> None:
        """New id/epoch/sequence for a batch that will be retried (after an epoch bump)."""
        self.reopened = True
        self.records_builder.set_producer_state(producer_id, producer_epoch, base_sequence, False)

    @property
    def producer_id(self) -> int:
        return self.records_builder.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.records_builder.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.records_builder.base_sequence

    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.record_count - 1) & 0x7FFFFFFF

    def sequence_has_been_reset(self) -> bool:
        return self.reopened

    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID and self.producer_epoch != NO_PRODUCER_EPOCH

    def __repr__(self) -> str:
        return (
            f"ProducerBatch(topic_partition={self.topic_partition}, "
            f"record_count={self.record_count}, attempts={self.attempts})"
        )
