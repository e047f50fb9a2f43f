"""Per-record timestamp scan of one batch, used only by timestamp lookups (ListOffsets).

The append and fetch paths never decode records; answering "earliest offset whose
timestamp >= T" exactly needs the record-level ``timestampDelta``/``offsetDelta`` of the one
batch holding the answer, so this module decodes that one batch with the record reader.
"""

from __future__ import annotations

from sluice.protocol.records.batch import TimestampType, read_header
from sluice.protocol.records.errors import CorruptRecordException
from sluice.protocol.records.reader import batch_records

__all__ = ["record_offsets_and_timestamps"]


def record_offsets_and_timestamps(batch: bytes | memoryview) -> list[tuple[int, int]] | None:
    """``(offset, timestamp)`` of every record in the (whole, single) ``batch``.

    LogAppendTime batches report ``maxTimestamp`` for every record, as Kafka does. Returns
    None when the batch cannot be decoded (unknown codec, malformed payload).
    """
    try:
        header = read_header(batch)
        records = batch_records(batch, header, check_crc=False)
    except CorruptRecordException:
        return None
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        return [(header.base_offset + r.offset_delta, header.max_timestamp) for r in records]
    base_offset, base_timestamp = header.base_offset, header.base_timestamp
    return [(base_offset + r.offset_delta, base_timestamp + r.timestamp_delta) for r in records]
