"""Per-record timestamp scan of one batch, used only by timestamp lookups (ListOffsets).

The append and fetch paths never decode records; answering "earliest offset whose
timestamp >= T" exactly needs the record-level ``timestampDelta``/``offsetDelta`` of the one
batch holding the answer, so this module decompresses (gzip, snappy, lz4, zstd) that batch and
walks its records' leading varints, skipping keys, values and headers.
"""

from __future__ import annotations

import zlib

import cramjam

from sluice.log.batch import BATCH_HEADER_SIZE, TimestampType, read_header
from sluice.log.cleaner_records import decompress, read_varint
from sluice.log.errors import CorruptRecordException

__all__ = ["record_offsets_and_timestamps"]


def record_offsets_and_timestamps(batch: bytes | memoryview) -> list[tuple[int, int]] | None:
    """``(offset, timestamp)`` of every record in the (whole, single) ``batch``.

    LogAppendTime batches report ``maxTimestamp`` for every record, as Kafka does. Returns
    None when the batch cannot be decoded (unknown codec, malformed payload).
    """
    view = memoryview(batch)
    header = read_header(view)
    end = min(len(view), header.size_in_bytes)
    try:
        records = decompress(header.compression_type, view[BATCH_HEADER_SIZE:end])
        result: list[tuple[int, int]] = []
        log_append_time = header.timestamp_type is TimestampType.LOG_APPEND_TIME
        position = 0
        for _ in range(header.records_count):
            length, position = read_varint(records, position)
            next_record = position + length
            position += 1  # attributes int8
            timestamp_delta, position = read_varint(records, position)
            offset_delta, position = read_varint(records, position)
            timestamp = (
                header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
            )
            result.append((header.base_offset + offset_delta, timestamp))
            position = next_record
    except (ValueError, IndexError, zlib.error, cramjam.DecompressionError, CorruptRecordException):
        return None
    return result
