"""Exceptions raised by the log layer, named after Apache Kafka's and carrying Kafka error codes."""

from __future__ import annotations

from typing import ClassVar

from kio.schema.errors import ErrorCode

__all__ = [
    "ConfigException",
    "CorruptIndexException",
    "CorruptRecordException",
    "InvalidOffsetException",
    "InvalidRecordException",
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


class LogError(Exception):
    """Base class of log-layer errors; `error_code` is the Kafka protocol error to answer with."""

    error_code: ClassVar[ErrorCode] = ErrorCode.unknown_server_error

    @property
    def error_name(self) -> str:
        """The Kafka error name, e.g. ``CORRUPT_MESSAGE``."""
        return self.error_code.name.upper()


class CorruptRecordException(LogError):
    """A record batch failed its CRC, has a bad magic, or is truncated or inconsistently sized."""

    error_code = ErrorCode.corrupt_message


class RecordTooLargeException(LogError):
    """A record batch is larger than ``max.message.bytes``."""

    error_code = ErrorCode.message_too_large


class RecordBatchTooLargeException(LogError):
    """The records of one append are larger than ``segment.bytes`` and can never fit a segment."""

    error_code = ErrorCode.record_list_too_large


class UnsupportedForMessageFormatException(LogError):
    """The records use the legacy v0/v1 message format, which this broker does not store."""

    error_code = ErrorCode.unsupported_for_message_format


class InvalidRecordException(LogError):
    """A well-formed batch breaks a rule for its origin (e.g. a client sending a control batch)."""

    error_code = ErrorCode.invalid_record


class OffsetOutOfRangeException(LogError):
    """The requested offset lies outside ``[log_start_offset, log_end_offset]``."""

    error_code = ErrorCode.offset_out_of_range


class UnexpectedAppendOffsetException(LogError):
    """A follower append starts below the log end offset."""

    error_code = ErrorCode.unknown_server_error

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class OffsetsOutOfOrderException(LogError):
    """A follower append whose batches' offsets are not strictly increasing."""

    error_code = ErrorCode.unknown_server_error


class InvalidOffsetException(LogError):
    """An index append whose offset is not larger than the last indexed offset."""

    error_code = ErrorCode.unknown_server_error


class CorruptIndexException(LogError):
    """An offset or time index file failed its sanity check and must be rebuilt."""

    error_code = ErrorCode.unknown_server_error


class KafkaStorageException(LogError):
    """An I/O error on a log directory, or use of a log that has been closed."""

    error_code = ErrorCode.kafka_storage_error


class InvalidTopicException(LogError):
    """A topic name that cannot be used as a log directory name."""

    error_code = ErrorCode.invalid_topic_exception


class ConfigException(LogError, ValueError):
    """An invalid log configuration value."""

    error_code = ErrorCode.invalid_config
