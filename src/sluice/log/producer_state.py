"""What a partition knows about each producer, and the checks an append goes through.

Follows Kafka's ``ProducerStateEntry`` and ``ProducerAppendInfo``: for every producer id seen
in a partition a :class:`ProducerStateEntry` keeps the epoch, the metadata of its last five
batches, the coordinator epoch, the last timestamp and the first offset of an ongoing
transaction. On a leader append each batch that carries a producer id goes through a
:class:`ProducerAppendInfo` that checks its epoch and sequence numbers from the 61-byte batch
header alone. :mod:`sluice.log.producer_state_manager` holds the per-partition manager, its
snapshot files and the rebuild on load.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from sluice.log.append import AppendOrigin
from sluice.log.errors import LogError
from sluice.protocol.records.batch import BatchHeader
from sluice.protocol.records.errors import CorruptRecordException
from sluice.protocol.records.reader import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    batch_records,
    control_type,
)

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "BatchMetadata",
    "CompletedTxn",
    "EndTxnMarker",
    "InvalidProducerEpochException",
    "InvalidTxnStateException",
    "OutOfOrderSequenceException",
    "ProducerAppendInfo",
    "ProducerStateEntry",
    "TransactionCoordinatorFencedException",
    "TxnMetadata",
    "decrement_sequence",
    "increment_sequence",
    "last_sequence",
    "read_end_txn_marker",
]

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NUM_BATCHES_TO_RETAIN = 5
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinator epoch


class OutOfOrderSequenceException(LogError):
    """A batch's sequence number does not follow the producer's last one (a gap, a duplicate
    older than the five cached batches, or a new epoch not starting at 0)."""

    code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpochException(LogError):
    """A batch's producer epoch is older than the partition's latest one for that producer."""

    code = ErrorCode.invalid_producer_epoch


class InvalidTxnStateException(LogError):
    """A non-transactional batch from a producer with a transaction open in the partition."""

    code = ErrorCode.invalid_txn_state


class TransactionCoordinatorFencedException(LogError):
    """A transaction marker from a coordinator older than the last one seen."""

    code = ErrorCode.transaction_coordinator_fenced


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapping past Int32.MAX to 0, as producers do."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Inverse of :func:`increment_sequence`."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def last_sequence(header: BatchHeader) -> int:
    """The sequence number of the batch's last record."""
    if header.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return increment_sequence(header.base_sequence, header.last_offset_delta)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Sequence range, offsets and timestamp of one appended batch, kept for de-duplication."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class TxnMetadata:
    """An ongoing transaction in the partition: its producer and first offset."""

    __slots__ = ("first_offset", "last_offset", "producer_id")

    def __init__(self, producer_id: int, first_offset: int) -> None:
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset: int | None = None

    def __repr__(self) -> str:
        return f"TxnMetadata(producer_id={self.producer_id}, first_offset={self.first_offset})"


class CompletedTxn(NamedTuple):
    """A transaction ended by a COMMIT or ABORT marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class EndTxnMarker(NamedTuple):
    """The control record of a transaction marker batch."""

    control_type: int  # CONTROL_TYPE_ABORT or CONTROL_TYPE_COMMIT
    coordinator_epoch: int


class ProducerStateEntry:
    """What a partition knows about one producer id: its epoch, the metadata of its last
    :data:`NUM_BATCHES_TO_RETAIN` batches, and its transaction fields."""

    __slots__ = (
        "batch_metadata",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = -1,
        last_timestamp: int = -1,
        current_txn_first_offset: int | None = None,
        batches: Iterable[BatchMetadata] = (),
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batch_metadata: deque[BatchMetadata] = deque(batches, NUM_BATCHES_TO_RETAIN)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    def without_batches(self) -> ProducerStateEntry:
        """A copy with the same epoch and transaction fields but no batch metadata."""
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch, self.coordinator_epoch,
            self.last_timestamp, self.current_txn_first_offset,
        )  # fmt: skip

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A new epoch forgets the cached batches (sequences restart at 0)."""
        if self.producer_epoch == producer_epoch:
            return False
        self.batch_metadata.clear()
        self.producer_epoch = producer_epoch
        return True

    def add_batch(
        self,
        producer_epoch: int,
        last_seq: int,
        last_offset: int,
        offset_delta: int,
        timestamp: int,
    ) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, next_entry: ProducerStateEntry) -> None:
        """Fold in the result of an append (a :class:`ProducerAppendInfo`'s entry)."""
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.last_timestamp = next_entry.last_timestamp
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.batch_metadata.extend(next_entry.batch_metadata)

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        """The cached batch with the same epoch and exact sequence range, if any."""
        if header.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(header.base_sequence, last_sequence(header))

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batch_metadata:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.producer_epoch}, "
            f"batches={list(self.batch_metadata)}, coordinator_epoch={self.coordinator_epoch}, "
            f"last_timestamp={self.last_timestamp}, "
            f"current_txn_first_offset={self.current_txn_first_offset})"
        )


class ProducerAppendInfo:
    """The validation and bookkeeping of one append's batches from one producer; applied to
    the :class:`ProducerStateManager` only once the batches are in the log."""

    __slots__ = ("current_entry", "origin", "producer_id", "started_transactions", "tp", "updated")

    def __init__(
        self, tp: str, producer_id: int, current_entry: ProducerStateEntry, origin: AppendOrigin
    ) -> None:
        self.tp = tp
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = origin
        self.updated = current_entry.without_batches()
        self.started_transactions: list[TxnMetadata] = []

    def append(
        self, header: BatchHeader, marker: EndTxnMarker | None = None
    ) -> CompletedTxn | None:
        """Check and record one batch (offsets already assigned); ``marker`` is the decoded
        control record of a control batch (None: an empty control batch)."""
        if header.is_control:
            if marker is None:
                return None
            return self.append_end_txn_marker(
                marker, header.producer_epoch, header.base_offset, header.max_timestamp
            )
        self.append_data_batch(
            header.producer_epoch, header.base_sequence, last_sequence(header),
            header.max_timestamp, header.base_offset, header.last_offset, header.is_transactional,
        )  # fmt: skip
        return None

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        updated = self.updated
        updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        if updated.current_txn_first_offset is not None and not is_transactional:
            raise InvalidTxnStateException(
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset} in partition {self.tp}"
            )
        if updated.current_txn_first_offset is None and is_transactional:
            updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(
        self, marker: EndTxnMarker, producer_epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn | None:
        self._check_producer_epoch(producer_epoch, offset)
        updated = self.updated
        if updated.coordinator_epoch > marker.coordinator_epoch:
            message = (
                f"Invalid coordinator epoch for producer {self.producer_id} at offset {offset} "
                f"in partition {self.tp}: {marker.coordinator_epoch} (marker) < "
                f"{updated.coordinator_epoch} (last seen)"
            )
            if self.origin is not AppendOrigin.REPLICATION:
                raise TransactionCoordinatorFencedException(message)
            log.info("%s", message)
        completed = None
        if updated.current_txn_first_offset is not None:
            completed = CompletedTxn(
                self.producer_id, updated.current_txn_first_offset, offset,
                marker.control_type == CONTROL_TYPE_ABORT,
            )  # fmt: skip
        updated.maybe_update_producer_epoch(producer_epoch)
        updated.coordinator_epoch = marker.coordinator_epoch
        updated.last_timestamp = timestamp
        updated.current_txn_first_offset = None
        return completed

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch:
            message = (
                f"Epoch of producer {self.producer_id} at offset {offset} in {self.tp} is "
                f"{epoch}, which is smaller than the last seen epoch {self.updated.producer_epoch}"
            )
            if self.origin is not AppendOrigin.REPLICATION:
                raise InvalidProducerEpochException(message)
            log.warning("%s", message)

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self.updated, self.current_entry
        if epoch != updated.producer_epoch:
            # A new epoch restarts sequences at 0; a producer never seen here (or whose state
            # expired or was removed with its data) may continue with any sequence.
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceException(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset} in partition {self.tp}: {epoch} (request epoch), "
                    f"{first_seq} (seq. number), {updated.producer_epoch} (current epoch)"
                )
            return
        if not updated.is_empty:
            current_last_seq = updated.last_seq
        elif epoch == current.producer_epoch:
            current_last_seq = current.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        if current.producer_epoch != NO_PRODUCER_EPOCH and not _in_sequence(
            current_last_seq, first_seq
        ):
            raise OutOfOrderSequenceException(
                f"Out of order sequence number for producer {self.producer_id} at offset "
                f"{offset} in partition {self.tp}: {first_seq} (incoming seq. number), "
                f"{current_last_seq} (current end sequence number)"
            )


def read_end_txn_marker(
    buf: bytes | bytearray | memoryview, header: BatchHeader
) -> EndTxnMarker | None:
    """Decode the control record of the (never compressed) control batch at
    ``header.position``; None for an empty batch or a control type other than COMMIT/ABORT."""
    if not header.records_count or header.compression_type:
        return None
    try:
        record = batch_records(buf, header, check_crc=False)[0]
    except CorruptRecordException:
        return None  # a malformed control record is not a transaction marker
    kind = control_type(record)
    value = record.value
    if kind not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT) or value is None or len(value) < 6:
        return None
    _version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    return EndTxnMarker(kind, coordinator_epoch)
