"""Exceptions raised by the log layer, named after Apache Kafka's and carrying Kafka error codes.

The record-format errors (corrupt, too large, old format, invalid record) are defined with
the format in :mod:`sluice.protocol.records.errors` and exported here too.
"""

from __future__ import annotations

from sluice.protocol.errors import ErrorCode, KafkaError
from sluice.protocol.records.errors import (
    CorruptRecordException,
    InvalidRecordException,
    RecordTooLargeException,
    UnsupportedForMessageFormatException,
)

__all__ = [
    "ConfigException",
    "CorruptIndexException",
    "CorruptRecordException",
    "InvalidOffsetException",
    "InvalidRecordException",
    "InvalidTimestampException",
    "InvalidTopicException",
    "KafkaStorageException",
    "LogError",
    "OffsetOutOfRangeException",
    "OffsetsOutOfOrderException",
    "RecordBatchTooLargeException",
    "RecordTooLargeException",
    "UnexpectedAppendOffsetException",
    "UnsupportedForMessageFormatException",
]


class LogError(KafkaError):
    """Base class of log-layer errors; ``code`` is the Kafka error to answer with."""


class RecordBatchTooLargeException(LogError):
    """The records of one append are larger than ``segment.bytes`` and can never fit a segment."""

    code = ErrorCode.record_list_too_large


class InvalidTimestampException(LogError):
    """A CreateTime record's timestamp lies outside the topic's
    ``message.timestamp.before.max.ms`` / ``after.max.ms`` of the broker's clock."""

    code = ErrorCode.invalid_timestamp


class OffsetOutOfRangeException(LogError):
    """The requested offset lies outside ``[log_start_offset, log_end_offset]``."""

    code = ErrorCode.offset_out_of_range


class UnexpectedAppendOffsetException(LogError):
    """A follower append starts below the log end offset."""

    code = ErrorCode.unknown_server_error

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class OffsetsOutOfOrderException(LogError):
    """A follower append whose batches' offsets are not strictly increasing."""

    code = ErrorCode.unknown_server_error


class InvalidOffsetException(LogError):
    """An index append whose offset is not larger than the last indexed offset."""

    code = ErrorCode.unknown_server_error


class CorruptIndexException(LogError):
    """An offset or time index file failed its sanity check and must be rebuilt."""

    code = ErrorCode.unknown_server_error


class KafkaStorageException(LogError):
    """An I/O error on a log directory, or use of a log that has been closed."""

    code = ErrorCode.kafka_storage_error


class InvalidTopicException(LogError):
    """A topic name that cannot be used as a log directory name."""

    code = ErrorCode.invalid_topic_exception


class ConfigException(LogError, ValueError):
    """An invalid log configuration value."""

    code = ErrorCode.invalid_config
