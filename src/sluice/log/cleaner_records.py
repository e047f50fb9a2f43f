"""Record-level work of the log cleaner (the part of Kafka's ``MemoryRecords.filterTo`` it uses).

The append and fetch paths treat batches as opaque bytes; compaction is the one place that has
to look inside them. This module decompresses a v2 batch (gzip through :mod:`zlib`, snappy, lz4
and zstd through ``cramjam``), walks its records just far enough to know each one's offset
delta, timestamp delta, key and whether it has a value, and writes a replacement batch holding
only the surviving records. Survivors keep their offsets: the batch keeps its base offset and
each record keeps its ``offsetDelta``; the record bytes are copied unchanged unless the batch's
base timestamp changes (the delete horizon of KIP-534), in which case only the
``timestampDelta`` varint of each record is re-encoded.

It also holds the produce-time rule of compacted topics: a record without a key is rejected
with ``INVALID_RECORD`` ("Compacted topic cannot accept message without key").
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

import cramjam

from sluice.checksum import crc32c
from sluice.log.batch import (
    BATCH_HEADER_SIZE,
    DELETE_HORIZON_FLAG_MASK,
    NO_TIMESTAMP,
    BatchHeader,
    CompressionType,
    TimestampType,
    compute_crc,
)
from sluice.log.errors import CorruptRecordException, InvalidRecordException

__all__ = [
    "RecordInfo",
    "build_batch_from_records",
    "check_keys_present",
    "compress",
    "decode_records",
    "decompress",
    "delete_horizon_of",
    "empty_batch",
    "read_varint",
]

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")
_PREFIX = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc
_BODY = struct.Struct(">hiqqqhii")  # attributes .. recordsCount (the CRC-covered header part)
_ATTRIBUTES_KEEP = ~(DELETE_HORIZON_FLAG_MASK | 0x07) & 0xFFFF

Buffer = bytes | bytearray | memoryview


# -- codecs ---------------------------------------------------------------------------------
def decompress(codec: int, data: Buffer) -> bytes | memoryview:
    """The records payload of a batch compressed with ``codec`` (a CompressionType id)."""
    if codec == CompressionType.NONE:
        return memoryview(data)
    if codec == CompressionType.GZIP:
        return zlib.decompress(data, 32 + zlib.MAX_WBITS)
    if codec == CompressionType.SNAPPY:
        return _unsnappy(memoryview(data))
    if codec == CompressionType.LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise CorruptRecordException(f"Unknown compression codec {codec}")


def compress(codec: int, data: Buffer) -> bytes:
    """``data`` compressed the way Kafka's Java producer does for ``codec``: gzip member,
    xerial-framed snappy, LZ4 frame (independent blocks), zstd frame."""
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        return gzip.compress(bytes(data), mtime=0)
    if codec == CompressionType.SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
            out += _INT32.pack(len(block))
            out += block
        return bytes(out)
    if codec == CompressionType.LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise CorruptRecordException(f"Unknown compression codec {codec}")


def _unsnappy(view: memoryview) -> bytes:
    """Kafka's snappy payloads use xerial (snappy-java) block framing; fall back to raw."""
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    parts: list[bytes] = []
    position = 16
    while position + 4 <= len(view):
        size = _INT32.unpack_from(view, position)[0]
        position += 4
        parts.append(bytes(cramjam.snappy.decompress_raw(view[position : position + size])))
        position += size
    return b"".join(parts)


# -- varints --------------------------------------------------------------------------------
def read_varint(buf: Buffer, position: int) -> tuple[int, int]:
    """Decode a zig-zag varint/varlong at ``position``; returns (value, next position)."""
    result = 0
    shift = 0
    while True:
        byte = buf[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7
        if shift > 63:
            raise ValueError("Varint is too long")


def _encode_varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


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
        payload = decompress(header.compression_type, view[BATCH_HEADER_SIZE:size])
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
                + _encode_varint(timestamp - base_timestamp)
                + bytes(view[record.after_timestamp : record.end])
            )
            parts.append(_encode_varint(len(body)))
            parts.append(body)
    attributes = (header.attributes & _ATTRIBUTES_KEEP) | header.compression_type
    if delete_horizon:
        attributes |= DELETE_HORIZON_FLAG_MASK
    records = compress(header.compression_type, b"".join(parts))
    return _assemble(
        header, attributes, header.last_offset_delta, base_timestamp, max_timestamp,
        len(kept), records,
    )  # fmt: skip


def empty_batch(header: BatchHeader) -> bytes:
    """Kafka's ``writeEmptyHeader``: the batch with every record removed but its offsets,
    producer id, epoch and sequence kept (retained to preserve a producer's state)."""
    attributes = header.attributes & _ATTRIBUTES_KEEP  # uncompressed, no delete horizon
    return _assemble(
        header, attributes, header.last_offset_delta, header.max_timestamp,
        header.max_timestamp, 0, b"",
    )  # fmt: skip


def _assemble(
    header: BatchHeader,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    count: int,
    records: bytes,
) -> bytes:
    body = _BODY.pack(
        _signed16(attributes), last_offset_delta, base_timestamp, max_timestamp,
        header.producer_id, header.producer_epoch, header.base_sequence, count,
    ) + records  # fmt: skip
    crc = crc32c(body)
    length = 4 + 1 + 4 + len(body)  # partitionLeaderEpoch + magic + crc + the rest
    prefix = _PREFIX.pack(header.base_offset, length, header.partition_leader_epoch, 2, crc)
    return prefix + body


def _signed16(value: int) -> int:
    return value - 0x10000 if value & 0x8000 else value


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
            payload = decompress(
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
