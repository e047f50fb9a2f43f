"""Per-record timestamp scan of one batch, used only by timestamp lookups (ListOffsets).

The append and fetch paths never decode records; answering "earliest offset whose
timestamp >= T" exactly needs the record-level ``timestampDelta``/``offsetDelta`` of the one
batch holding the answer, so this module decompresses (gzip, snappy, lz4, zstd) that batch and
walks its records' leading varints, skipping keys, values and headers.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from sluice.log.batch import BATCH_HEADER_SIZE, CompressionType, TimestampType, read_header

__all__ = ["record_offsets_and_timestamps"]

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16
_INT32 = struct.Struct(">i")


def _unsnappy(data: bytes | memoryview) -> bytes:
    """Kafka's snappy payloads use xerial (snappy-java) block framing; fall back to raw."""
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    parts: list[bytes] = []
    position = _XERIAL_HEADER_SIZE
    while position + 4 <= len(view):
        size = _INT32.unpack_from(view, position)[0]
        position += 4
        parts.append(bytes(cramjam.snappy.decompress_raw(view[position : position + size])))
        position += size
    return b"".join(parts)


def _decompress(codec: int, data: memoryview) -> bytes | memoryview:
    if codec == CompressionType.NONE:
        return data
    if codec == CompressionType.GZIP:
        return zlib.decompress(data, 32 + zlib.MAX_WBITS)
    if codec == CompressionType.SNAPPY:
        return _unsnappy(data)
    if codec == CompressionType.LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"Unknown compression codec {codec}")


def _varint(buf: bytes | memoryview, position: int) -> tuple[int, int]:
    """Decode a zig-zag varint/varlong; returns (value, next position)."""
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


def record_offsets_and_timestamps(batch: bytes | memoryview) -> list[tuple[int, int]] | None:
    """``(offset, timestamp)`` of every record in the (whole, single) ``batch``.

    LogAppendTime batches report ``maxTimestamp`` for every record, as Kafka does. Returns
    None when the batch cannot be decoded (unknown codec, malformed payload).
    """
    view = memoryview(batch)
    header = read_header(view)
    end = min(len(view), header.size_in_bytes)
    try:
        records = _decompress(header.compression_type, view[BATCH_HEADER_SIZE:end])
        result: list[tuple[int, int]] = []
        log_append_time = header.timestamp_type is TimestampType.LOG_APPEND_TIME
        position = 0
        for _ in range(header.records_count):
            length, position = _varint(records, position)
            next_record = position + length
            position += 1  # attributes int8
            timestamp_delta, position = _varint(records, position)
            offset_delta, position = _varint(records, position)
            timestamp = (
                header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
            )
            result.append((header.base_offset + offset_delta, timestamp))
            position = next_record
    except (ValueError, IndexError, zlib.error, cramjam.DecompressionError):
        return None
    return result
