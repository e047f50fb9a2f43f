"""The record batch (magic v2) header: the one definition of its layout in Sluice.

The broker's append and fetch paths, the clients and the coordinators all read and
write batch headers through this module; it never decodes the records themselves
(:mod:`.reader` does, :mod:`.builder` writes them).

Layout of a v2 batch (big-endian), 61 bytes of header followed by the records::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordsCount int32 | records...

``batchLength`` counts the bytes after the length field; the CRC32C covers everything from
``attributes`` to the end of the batch, so rewriting the base offset or the partition leader
epoch needs no CRC update.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from typing import NamedTuple

from .compression import CompressionType
from .crc import crc32c
from .errors import (
    CorruptRecordException,
    RecordTooLargeException,
    UnsupportedForMessageFormatException,
)

__all__ = [
    "ATTRIBUTES_OFFSET",
    "BATCH_HEADER_SIZE",
    "CONTROL_FLAG_MASK",
    "CRC_OFFSET",
    "CURRENT_MAGIC",
    "DELETE_HORIZON_FLAG_MASK",
    "HEADER_BODY_STRUCT",
    "HEADER_PREFIX_STRUCT",
    "HEADER_STRUCT",
    "LENGTH_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "MIN_BATCH_LENGTH",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "PRODUCER_ID_OFFSET",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_FLAG_MASK",
    "BatchHeader",
    "CompressionType",
    "TimestampType",
    "assemble_batch",
    "batch_error",
    "compression_type",
    "compute_crc",
    "header_error",
    "is_control",
    "is_transactional",
    "iter_batches",
    "read_base_offset_and_length",
    "read_header",
    "set_base_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
    "timestamp_type",
    "validate_records",
]

CURRENT_MAGIC = 2
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted by batchLength
BATCH_HEADER_SIZE = 61
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
RECORDS_COUNT_OFFSET = 57

NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
HEADER_PREFIX_STRUCT = struct.Struct(">qiib")
"""baseOffset, batchLength, partitionLeaderEpoch, magic: the fields before the CRC."""
HEADER_BODY_STRUCT = struct.Struct(">hiqqqhii")
"""attributes .. recordsCount: the part of the header the CRC covers."""
_HEADER = HEADER_STRUCT
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class TimestampType(enum.IntEnum):
    """Whether a batch's timestamps were set by the producer or by the broker on append."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def compression_type(attributes: int) -> int:
    """The compression codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
    return attributes & COMPRESSION_CODEC_MASK


def timestamp_type(attributes: int) -> TimestampType:
    """``LOG_APPEND_TIME`` when attribute bit 3 is set, else ``CREATE_TIME``."""
    if attributes & TIMESTAMP_TYPE_MASK:
        return TimestampType.LOG_APPEND_TIME
    return TimestampType.CREATE_TIME


def is_transactional(attributes: int) -> bool:
    """Attribute bit 4."""
    return bool(attributes & TRANSACTIONAL_FLAG_MASK)


def is_control(attributes: int) -> bool:
    """Attribute bit 5: the batch holds a transaction or other control marker."""
    return bool(attributes & CONTROL_FLAG_MASK)


class BatchHeader(NamedTuple):
    """The decoded 61-byte header of one batch plus its ``position`` in the enclosing buffer."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        """Total size of the batch including the 12-byte log overhead."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def end_position(self) -> int:
        return self.position + self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression_type(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        return timestamp_type(self.attributes)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


_new_header = BatchHeader.__new__


def read_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Decode the header of the batch at ``position``; the buffer must hold all 61 bytes."""
    if len(buf) - position < BATCH_HEADER_SIZE:
        raise CorruptRecordException(
            f"Truncated record batch header at position {position}: "
            f"{len(buf) - position} of {BATCH_HEADER_SIZE} bytes"
        )
    return _new_header(BatchHeader, position, *_HEADER.unpack_from(buf, position))


def iter_batches(
    buf: bytes | bytearray | memoryview, position: int = 0, end: int | None = None
) -> Iterator[BatchHeader]:
    """Yield the headers of the complete batches in ``buf[position:end]``, in order.

    Structural only (no CRC check): iteration stops silently at the first batch that is
    incomplete or whose length is impossible, like Kafka's batch iterators.
    """
    limit = len(buf) if end is None else min(end, len(buf))
    unpack = _HEADER.unpack_from
    while limit - position >= BATCH_HEADER_SIZE:
        fields = unpack(buf, position)
        length = fields[1]
        if length < MIN_BATCH_LENGTH or position + LOG_OVERHEAD + length > limit:
            return
        yield _new_header(BatchHeader, position, *fields)
        position += LOG_OVERHEAD + length


def compute_crc(buf: bytes | bytearray | memoryview, position: int, size: int) -> int:
    """CRC32C of the batch at ``position`` of ``size`` bytes (attributes to end of batch)."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    return crc32c(view[position + ATTRIBUTES_OFFSET : position + size])


def _structure_error(
    buf: bytes | bytearray | memoryview, position: int, limit: int
) -> CorruptRecordException | RecordTooLargeException | UnsupportedForMessageFormatException | None:
    """Check that a whole batch of plausible size and magic 2 starts at ``position``."""
    remaining = limit - position
    if remaining < LOG_OVERHEAD:
        return CorruptRecordException(
            f"Truncated record batch at position {position}: only {remaining} bytes remain"
        )
    _, length = _OFFSET_AND_LENGTH.unpack_from(buf, position)
    if remaining > MAGIC_OFFSET:
        magic = buf[position + MAGIC_OFFSET]
        if magic in (0, 1):
            return UnsupportedForMessageFormatException(
                f"Message format v{magic} at position {position} is not supported; use v2"
            )
        if magic != CURRENT_MAGIC:
            return CorruptRecordException(f"Invalid magic {magic} at position {position}")
    if length < MIN_BATCH_LENGTH:
        return CorruptRecordException(
            f"Record batch at position {position} has illegal length {length}"
        )
    if remaining < LOG_OVERHEAD + length:
        return CorruptRecordException(
            f"Truncated record batch at position {position}: batchLength {length} but only "
            f"{remaining - LOG_OVERHEAD} bytes follow"
        )
    return None


def batch_error(
    buf: bytes | bytearray | memoryview,
    position: int = 0,
    max_message_bytes: int | None = None,
    end: int | None = None,
) -> CorruptRecordException | RecordTooLargeException | UnsupportedForMessageFormatException | None:
    """Validate the batch at ``position``; return the exception to raise, or None if valid.

    Checks (in Kafka's order): whole batch present, magic 2, size against
    ``max_message_bytes`` (MESSAGE_TOO_LARGE), non-negative counts, then the CRC32C.
    """
    limit = len(buf) if end is None else min(end, len(buf))
    error = _structure_error(buf, position, limit)
    if error is not None:
        return error
    header = _new_header(BatchHeader, position, *_HEADER.unpack_from(buf, position))
    return header_error(buf, header, max_message_bytes)


def header_error(
    buf: bytes | bytearray | memoryview, header: BatchHeader, max_message_bytes: int | None
) -> CorruptRecordException | RecordTooLargeException | UnsupportedForMessageFormatException | None:
    """The checks of :func:`batch_error` that need the decoded header (size, counts, CRC)."""
    size = header.batch_length + LOG_OVERHEAD
    if max_message_bytes is not None and size > max_message_bytes:
        return RecordTooLargeException(
            f"Record batch of {size} bytes exceeds max.message.bytes {max_message_bytes}"
        )
    if header.records_count < 0 or header.last_offset_delta < 0:
        return CorruptRecordException(
            f"Record batch at position {header.position} has negative recordsCount "
            f"({header.records_count}) or lastOffsetDelta ({header.last_offset_delta})"
        )
    crc = compute_crc(buf, header.position, size)
    if crc != header.crc:
        return CorruptRecordException(
            f"Record batch at position {header.position} is corrupt "
            f"(stored crc = {header.crc}, computed crc = {crc})"
        )
    return None


def validate_records(
    buf: bytes | bytearray | memoryview,
    max_message_bytes: int | None = None,
    *,
    allow_partial_tail: bool = False,
) -> list[BatchHeader]:
    """Validate every batch in ``buf`` and return their headers; raise the first error.

    With ``allow_partial_tail`` (fetch responses may end in a partial batch) an incomplete
    last batch is dropped instead of rejected; ``sum(h.size_in_bytes)`` is then the valid size.
    """
    headers: list[BatchHeader] = []
    limit = len(buf)
    position = 0
    unpack = _HEADER.unpack_from
    while position < limit:
        if limit - position >= BATCH_HEADER_SIZE:
            fields = unpack(buf, position)
            length = fields[1]
            if (
                fields[3] == CURRENT_MAGIC
                and length >= MIN_BATCH_LENGTH
                and (position + LOG_OVERHEAD + length <= limit)
            ):
                header = _new_header(BatchHeader, position, *fields)
                error = header_error(buf, header, max_message_bytes)
                if error is not None:
                    raise error
                headers.append(header)
                position += LOG_OVERHEAD + length
                continue
        structural = _structure_error(buf, position, limit)
        if structural is None:  # whole, magic 2, but shorter than a header
            structural = CorruptRecordException(f"Truncated batch header at {position}")
        if allow_partial_tail and _is_partial_tail(buf, position, limit):
            break
        raise structural
    return headers


def _is_partial_tail(buf: bytes | bytearray | memoryview, position: int, limit: int) -> bool:
    """True if the bytes from ``position`` look like the start of a batch cut short."""
    if limit - position < LOG_OVERHEAD:
        return True
    length: int = _INT32.unpack_from(buf, position + LENGTH_OFFSET)[0]
    if length < MIN_BATCH_LENGTH:
        return False
    if limit - position > MAGIC_OFFSET and buf[position + MAGIC_OFFSET] != CURRENT_MAGIC:
        return False
    return position + LOG_OVERHEAD + length > limit


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Assign offsets to a batch by rewriting its baseOffset field (not covered by the CRC)."""
    _INT64.pack_into(buf, position + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Stamp the partitionLeaderEpoch field (not covered by the CRC)."""
    _INT32.pack_into(buf, position + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, position: int, timestamp: int) -> bool:
    """Mark the batch LogAppendTime with ``timestamp`` as maxTimestamp and recompute the CRC.

    Returns False (and writes nothing) if the batch already carries exactly that.
    """
    attributes = _INT16.unpack_from(buf, position + ATTRIBUTES_OFFSET)[0]
    current = _INT64.unpack_from(buf, position + MAX_TIMESTAMP_OFFSET)[0]
    if attributes & TIMESTAMP_TYPE_MASK and current == timestamp:
        return False
    _INT16.pack_into(buf, position + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, timestamp)
    size = _INT32.unpack_from(buf, position + LENGTH_OFFSET)[0] + LOG_OVERHEAD
    _UINT32.pack_into(buf, position + CRC_OFFSET, compute_crc(buf, position, size))
    return True


def assemble_batch(
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
    records: bytes | bytearray | memoryview,
) -> bytes:
    """A whole batch: the header over ``records`` (the records section, compressed or not,
    as ``attributes`` says), with its length and CRC32C computed."""
    body = (
        HEADER_BODY_STRUCT.pack(
            attributes - 0x10000 if attributes & 0x8000 else attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count,
        )
        + records
    )
    length = BATCH_HEADER_SIZE - LOG_OVERHEAD - HEADER_BODY_STRUCT.size + len(body)
    prefix = HEADER_PREFIX_STRUCT.pack(base_offset, length, partition_leader_epoch, CURRENT_MAGIC)
    return prefix + _UINT32.pack(crc32c(body)) + body


def read_base_offset_and_length(
    buf: bytes | bytearray | memoryview, position: int
) -> tuple[int, int]:
    """The (baseOffset, batchLength) pair of the batch at ``position`` (12 bytes needed)."""
    base_offset, length = _OFFSET_AND_LENGTH.unpack_from(buf, position)
    return base_offset, length
