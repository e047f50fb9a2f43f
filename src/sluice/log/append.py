"""Validation and offset assignment of an append, and the :class:`LogAppendInfo` it yields."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sluice.log.config import LogConfig
from sluice.log.errors import (
    InvalidRecordException,
    InvalidTimestampException,
    OffsetsOutOfOrderException,
    RecordBatchTooLargeException,
    UnexpectedAppendOffsetException,
)
from sluice.log.patched_records import PatchedRecords
from sluice.protocol.records.batch import (
    NO_TIMESTAMP,
    BatchHeader,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_records,
)

Buffer = bytes | bytearray | memoryview

__all__ = [
    "AppendOrigin",
    "LogAppendInfo",
    "assign_offsets",
    "check_client_batches",
    "check_follower_offsets",
    "prepare_follower_append",
    "prepare_leader_append",
]


class AppendOrigin(enum.Enum):
    """Who is appending: producers, an internal coordinator, or replication from a leader."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """What an append stored: its offset range, timestamps and sizes (the ProduceResponse
    needs ``first_offset``, ``log_append_time`` and ``log_start_offset``)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    record_count: int
    batch_count: int
    valid_bytes: int
    last_leader_epoch: int = -1


def check_client_batches(headers: list[BatchHeader]) -> None:
    """Kafka's LogValidator rules for producer batches that need only the header."""
    for header in headers:
        if header.is_control:
            raise InvalidRecordException("Clients may not write control (marker) batches")
        if header.records_count != header.last_offset_delta + 1:
            raise InvalidRecordException(
                f"Record batch has {header.records_count} records but lastOffsetDelta "
                f"{header.last_offset_delta}"
            )
        if header.records_count == 0:
            raise InvalidRecordException("Record batch has no records")
        if header.has_producer_id and header.base_sequence < 0:
            raise InvalidRecordException(
                f"Record batch with producerId {header.producer_id} has an invalid "
                f"baseSequence {header.base_sequence}"
            )


def check_timestamps(
    headers: list[BatchHeader], first_offset: int, now_ms: int, before_ms: int, after_ms: int
) -> None:
    """Kafka's LogValidator.validateTimestamp for CreateTime batches, on what the batch
    header holds: the first record's timestamp and the largest. A record in the middle
    older than the first is not seen (the records are not decoded on the way in)."""
    low, high = now_ms - before_ms, now_ms + after_ms
    offset = first_offset
    for header in headers:
        for timestamp in (header.base_timestamp, header.max_timestamp):
            if timestamp != NO_TIMESTAMP and not low <= timestamp <= high:
                raise InvalidTimestampException(
                    f"Timestamp {timestamp} of message with offset {offset} is out of range. "
                    f"The timestamp should be within [{low}, {high}]"
                )
        offset += header.last_offset_delta + 1


def check_follower_offsets(headers: list[BatchHeader]) -> None:
    """Offsets as sent by the leader must strictly increase across the batches."""
    previous = -1
    for header in headers:
        if header.base_offset <= previous:
            raise OffsetsOutOfOrderException(
                f"Out of order offsets: batch at offset {header.base_offset} follows "
                f"last offset {previous}"
            )
        previous = header.base_offset + header.last_offset_delta


def assign_offsets(
    buf: bytearray | memoryview | PatchedRecords,
    headers: list[BatchHeader],
    first_offset: int,
    leader_epoch: int,
    log_append_time: int,
) -> tuple[list[BatchHeader], int, int, int]:
    """Rewrite each batch's baseOffset (consecutively from ``first_offset``) and leader
    epoch in place, and for ``log_append_time >= 0`` its timestamp type, maxTimestamp and CRC.

    A :class:`PatchedRecords` gets its heads rewritten instead (offset and epoch only: a
    LogAppendTime rewrite changes the CRC and needs the whole batch writable).

    Returns the updated headers, the record count, the max timestamp and its (batch) offset.
    """
    offset = first_offset
    assigned: list[BatchHeader] = []
    max_timestamp = NO_TIMESTAMP
    offset_of_max = first_offset
    records = 0
    patched = isinstance(buf, PatchedRecords)
    for header in headers:
        position = header.position
        target, at = (buf.head(position), 0) if isinstance(buf, PatchedRecords) else (buf, position)
        set_base_offset(target, at, offset)
        set_partition_leader_epoch(target, at, leader_epoch)
        timestamp = header.max_timestamp
        if log_append_time >= 0:
            if patched:
                raise ValueError("LogAppendTime needs whole batches writable, not patched heads")
            set_log_append_time(target, at, log_append_time)
            timestamp = log_append_time
        last = offset + header.last_offset_delta
        if timestamp > max_timestamp:
            max_timestamp, offset_of_max = timestamp, last
        assigned.append(
            header._replace(
                base_offset=offset, partition_leader_epoch=leader_epoch, max_timestamp=timestamp
            )
        )
        records += header.records_count
        offset = last + 1
    return assigned, records, max_timestamp, offset_of_max


def _check_segment_size(size: int, config: LogConfig, name: str) -> None:
    if size > config.segment_bytes:
        raise RecordBatchTooLargeException(
            f"Message batch size is {size} bytes in append to partition {name} which "
            f"exceeds the maximum configured segment size of {config.segment_bytes}"
        )


def _empty_info(log_end_offset: int, log_start_offset: int) -> LogAppendInfo:
    return LogAppendInfo(
        log_end_offset, log_end_offset - 1, NO_TIMESTAMP, -1, NO_TIMESTAMP,
        log_start_offset, 0, 0, 0,
    )  # fmt: skip


def prepare_leader_append(
    records: Buffer,
    config: LogConfig,
    first_offset: int,
    leader_epoch: int,
    origin: AppendOrigin,
    log_append_time: int,
    log_start_offset: int,
    name: str,
    now_ms: int = NO_TIMESTAMP,
) -> tuple[Buffer | PatchedRecords, list[BatchHeader], LogAppendInfo]:
    """Validate a produce buffer and assign its offsets; returns what to store (the buffer
    itself when writable, else its batches with patched heads, or a copy when the append
    time must be written), its batch headers (empty: nothing to append) and the append info.
    ``now_ms``: the broker's clock, given for topics whose timestamps are bounded."""
    headers = validate_records(records, config.max_message_bytes)
    if origin is AppendOrigin.CLIENT:
        check_client_batches(headers)
        if now_ms != NO_TIMESTAMP:  # given only when the topic bounds its timestamps
            bounds = config.timestamp_bounds
            if bounds is not None:
                check_timestamps(headers, first_offset, now_ms, *bounds)
    if not headers:
        return records, headers, _empty_info(first_offset, log_start_offset)
    _check_segment_size(len(records), config, name)
    buf: bytearray | memoryview | PatchedRecords = (
        records if isinstance(records, bytearray) else memoryview(records)
    )
    if isinstance(buf, memoryview) and buf.readonly:
        buf = bytearray(buf) if log_append_time >= 0 else PatchedRecords(buf, headers)
    assigned, count, max_timestamp, offset_of_max = assign_offsets(
        buf, headers, first_offset, leader_epoch, log_append_time
    )
    info = LogAppendInfo(
        first_offset, assigned[-1].last_offset, max_timestamp, offset_of_max, log_append_time,
        log_start_offset, count, len(assigned), len(buf), leader_epoch,
    )  # fmt: skip
    return buf, assigned, info


def prepare_follower_append(
    records: Buffer, config: LogConfig, log_end_offset: int, log_start_offset: int, name: str
) -> tuple[Buffer, list[BatchHeader], LogAppendInfo]:
    """Validate replicated batches (offsets kept); a partial trailing batch is dropped."""
    headers = validate_records(records, config.max_message_bytes, allow_partial_tail=True)
    if not headers:
        return records, headers, _empty_info(log_end_offset, log_start_offset)
    check_follower_offsets(headers)
    first, last = headers[0].base_offset, headers[-1].last_offset
    if first < log_end_offset:
        raise UnexpectedAppendOffsetException(
            f"Follower append of offsets [{first}, {last}] to {name} is below the log end "
            f"offset {log_end_offset}",
            first,
            last,
        )
    valid_bytes = headers[-1].end_position
    _check_segment_size(valid_bytes, config, name)
    max_timestamp, offset_of_max, count = NO_TIMESTAMP, first, 0
    for header in headers:
        if header.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
        count += header.records_count
    info = LogAppendInfo(
        first, last, max_timestamp, offset_of_max, NO_TIMESTAMP, log_start_offset,
        count, len(headers), valid_bytes, headers[-1].partition_leader_epoch,
    )  # fmt: skip
    return memoryview(records)[:valid_bytes], headers, info
