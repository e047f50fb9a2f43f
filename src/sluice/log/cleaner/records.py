"""Record-level work of the log cleaner (the part of Kafka's ``MemoryRecords.filterTo`` it uses).

The append and fetch paths treat batches as opaque bytes; compaction is the one place that has
to look inside them. This module decompresses a v2 batch (the record format's codecs), walks
its records just far enough to know each one's offset
delta, timestamp delta, key and whether it has a value, and writes a replacement batch holding
only the surviving records. Survivors keep their offsets: the batch keeps its base offset and
each record keeps its ``offsetDelta``; the record bytes are copied unchanged unless the batch's
base timestamp changes (the delete horizon of KIP-534), in which case only the
``timestampDelta`` varint of each record is re-encoded.

It also holds the produce-time rule of compacted topics: a record without a key is rejected
with ``INVALID_RECORD`` ("Compacted topic cannot accept message without key").
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import NamedTuple

import cramjam

from sluice.log.errors import CorruptRecordException, InvalidRecordException
from sluice.protocol.records.batch import (
    BATCH_HEADER_SIZE,
    DELETE_HORIZON_FLAG_MASK,
    NO_TIMESTAMP,
    BatchHeader,
    CompressionType,
    TimestampType,
    assemble_batch,
    compute_crc,
)
from sluice.protocol.records.compression import compress, decompress
from sluice.protocol.records.varint import encode_varint, read_varint

__all__ = [
    "RecordInfo",
    "build_batch_from_records",
    "check_keys_present",
    "decode_records",
    "delete_horizon_of",
    "empty_batch",
]

_ATTRIBUTES_KEEP = ~(DELETE_HORIZON_FLAG_MASK | 0x07) & 0xFFFF

Buffer = bytes | bytearray | memoryview


def _records_section(codec: int, data: Buffer) -> Buffer:
    """The uncompressed records section (a view when it is not compressed)."""
    return memoryview(data) if codec == CompressionType.NONE else decompress(codec, data)


# -- decoding -------------------------------------------------------------------------------
class RecordInfo(NamedTuple):
    """One record of a decoded batch: its deltas, key, whether it has a value, and where its
    bytes lie in the (decompressed) records payload."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    has_value: bool
    start: int  # the record's length varint
    attributes: int  # position of the attributes byte (the start of the record body)
    after_timestamp: int  # position just after the timestampDelta varint
    end: int  # one past the record's last byte


def delete_horizon_of(header: BatchHeader) -> int | None:
    """The batch's delete horizon (KIP-534: ``baseTimestamp`` when attribute bit 6 is set)."""
    if header.attributes & DELETE_HORIZON_FLAG_MASK:
        return header.base_timestamp
    return None


def decode_records(batch: Buffer, header: BatchHeader) -> tuple[Buffer, list[RecordInfo]]:
    """Check the CRC of the whole ``batch`` (which starts at index 0) and decode its records.

    Returns the decompressed records payload and one :class:`RecordInfo` per record. Raises
    :class:`CorruptRecordException` for a bad CRC or a malformed payload.
    """
    view = memoryview(batch)
    size = header.size_in_bytes
    if len(view) < size:
        raise CorruptRecordException(f"Truncated batch at offset {header.base_offset}")
    crc = compute_crc(view, 0, size)
    if crc != header.crc:
        raise CorruptRecordException(
            f"Record batch at offset {header.base_offset} is corrupt "
            f"(stored crc = {header.crc}, computed crc = {crc})"
        )
    try:
        payload = _records_section(header.compression_type, view[BATCH_HEADER_SIZE:size])
        records: list[RecordInfo] = []
        position = 0
        for _ in range(header.records_count):
            start = position
            length, body = read_varint(payload, position)
            end = body + length
            timestamp_delta, after_timestamp = read_varint(payload, body + 1)
            offset_delta, position = read_varint(payload, after_timestamp)
            key_length, position = read_varint(payload, position)
            key: bytes | None = None
            if key_length >= 0:
                key = bytes(payload[position : position + key_length])
                position += key_length
            value_length, _ = read_varint(payload, position)
            if end > len(payload) or position > end:
                raise ValueError("record overruns the batch")
            info = RecordInfo(
                offset_delta, timestamp_delta, key, value_length >= 0,
                start, body, after_timestamp, end,
            )  # fmt: skip
            records.append(info)
            position = end
    except (ValueError, IndexError, zlib.error, cramjam.DecompressionError) as exc:
        raise CorruptRecordException(
            f"Cannot decode the records of the batch at offset {header.base_offset}: {exc}"
        ) from exc
    return payload, records


# -- writing --------------------------------------------------------------------------------
def build_batch_from_records(
    header: BatchHeader,
    payload: Buffer,
    kept: Sequence[RecordInfo],
    base_timestamp: int,
    delete_horizon: bool,
) -> bytes:
    """A replacement for the batch ``header`` holding only ``kept`` (non-empty, in order).

    The base offset, ``lastOffsetDelta`` (Kafka's ``overrideLastOffset``: the producer's last
    sequence number must survive), leader epoch, producer fields, codec, timestamp type and
    transactional flag are kept; ``recordsCount``, ``maxTimestamp`` (CreateTime) and the CRC
    are recomputed. ``base_timestamp`` becomes the batch's base timestamp, and with
    ``delete_horizon`` it is the KIP-534 delete horizon (attribute bit 6).
    """
    old_base = header.base_timestamp
    log_append_time = header.timestamp_type is TimestampType.LOG_APPEND_TIME
    max_timestamp = header.max_timestamp if log_append_time else NO_TIMESTAMP
    parts: list[Buffer] = []
    view = memoryview(payload)
    for record in kept:
        timestamp = old_base + record.timestamp_delta
        if not log_append_time and timestamp > max_timestamp:
            max_timestamp = timestamp
        if base_timestamp == old_base:
            parts.append(view[record.start : record.end])
        else:
            body = (
                bytes(view[record.attributes : record.attributes + 1])
                + encode_varint(timestamp - base_timestamp)
                + bytes(view[record.after_timestamp : record.end])
            )
            parts.append(encode_varint(len(body)))
            parts.append(body)
    attributes = (header.attributes & _ATTRIBUTES_KEEP) | header.compression_type
    if delete_horizon:
        attributes |= DELETE_HORIZON_FLAG_MASK
    records = compress(CompressionType(header.compression_type), b"".join(parts))
    return assemble_batch(
        header.base_offset, header.partition_leader_epoch, attributes, header.last_offset_delta,
        base_timestamp, max_timestamp, header.producer_id, header.producer_epoch,
        header.base_sequence, len(kept), records,
    )  # fmt: skip


def empty_batch(header: BatchHeader) -> bytes:
    """Kafka's ``writeEmptyHeader``: the batch with every record removed but its offsets,
    producer id, epoch and sequence kept (retained to preserve a producer's state)."""
    attributes = header.attributes & _ATTRIBUTES_KEEP  # uncompressed, no delete horizon
    return assemble_batch(
        header.base_offset, header.partition_leader_epoch, attributes, header.last_offset_delta,
        header.max_timestamp, header.max_timestamp, header.producer_id, header.producer_epoch,
        header.base_sequence, 0, b"",
    )  # fmt: skip


# -- produce-time check -----------------------------------------------------------------------
def check_keys_present(buf: Buffer, headers: Sequence[BatchHeader], partition: str) -> None:
    """Kafka's LogValidator rule for compacted topics: every record of every data batch must
    have a key. Raises :class:`InvalidRecordException` (``INVALID_RECORD``) otherwise."""
    view = memoryview(buf)
    for header in headers:
        if header.is_control:
            continue
        start = header.position
        try:
            payload = _records_section(
                header.compression_type,
                view[start + BATCH_HEADER_SIZE : start + header.size_in_bytes],
            )
            position = 0
            for _ in range(header.records_count):
                length, body = read_varint(payload, position)
                _, after = read_varint(payload, body + 1)  # timestampDelta
                _, after = read_varint(payload, after)  # offsetDelta
                key_length, _ = read_varint(payload, after)
                if key_length < 0:
                    raise InvalidRecordException(
                        f"Compacted topic cannot accept message without key in topic "
                        f"partition {partition}."
                    )
                position = body + length
        except (ValueError, IndexError, zlib.error, cramjam.DecompressionError) as exc:
            raise CorruptRecordException(
                f"Cannot decode the records of a batch for {partition}: {exc}"
            ) from exc
