"""The errors of the record-batch format, named after Kafka's and carrying its error codes.

They are raised wherever batches are checked (a produce request, a follower's fetch, a log
being recovered, a consumer decoding a fetch) and answer with the code Kafka uses.
"""

from __future__ import annotations

from sluice.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "CorruptRecordException",
    "InvalidRecordException",
    "RecordTooLargeException",
    "UnsupportedForMessageFormatException",
]


class CorruptRecordException(KafkaError):
    """A batch failed its CRC, has a bad magic, or is truncated or inconsistently sized."""

    code = ErrorCode.corrupt_message


class RecordTooLargeException(KafkaError):
    """A batch is larger than ``max.message.bytes``."""

    code = ErrorCode.message_too_large


class UnsupportedForMessageFormatException(KafkaError):
    """The records use the legacy v0/v1 message format, which Sluice does not store."""

    code = ErrorCode.unsupported_for_message_format


class InvalidRecordException(KafkaError):
    """A well-formed batch breaks a rule for its origin (e.g. a client sending a control
    batch, or a record without a key for a compacted topic)."""

    code = ErrorCode.invalid_record
