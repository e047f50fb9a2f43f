"""The durable, segmented partition log (sans-I/O core: plain classes, no asyncio).

Follows Apache Kafka's log layer: :class:`Log` (UnifiedLog) over :class:`LocalLog`, made of
:class:`LogSegment` files with :class:`OffsetIndex` and :class:`TimeIndex`, owned per broker by
:class:`LogManager`. Record batches stay opaque bytes; only their v2 headers are read.
"""

from sluice.log.append import AppendOrigin, LogAppendInfo
from sluice.log.config import LogConfig
from sluice.log.errors import (
    ConfigException,
    CorruptIndexException,
    CorruptRecordException,
    InvalidRecordException,
    InvalidTopicException,
    KafkaStorageException,
    LogError,
    OffsetOutOfRangeException,
    OffsetsOutOfOrderException,
    RecordBatchTooLargeException,
    RecordTooLargeException,
    UnexpectedAppendOffsetException,
    UnsupportedForMessageFormatException,
)
from sluice.log.file_records import (
    FetchDataInfo,
    FileRecords,
    FileSlice,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from sluice.log.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from sluice.log.local_log import LocalLog
from sluice.log.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
)
from sluice.log.log_dir_failure_channel import LogDirFailureChannel
from sluice.log.manager import LogManager, TopicPartition
from sluice.log.segment import LogSegment
from sluice.protocol.records.batch import BatchHeader, CompressionType, TimestampType

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendOrigin",
    "BatchHeader",
    "CompressionType",
    "ConfigException",
    "CorruptIndexException",
    "CorruptRecordException",
    "FetchDataInfo",
    "FileRecords",
    "FileSlice",
    "InvalidRecordException",
    "InvalidTopicException",
    "KafkaStorageException",
    "LocalLog",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogDirFailureChannel",
    "LogError",
    "LogManager",
    "LogOffsetMetadata",
    "LogSegment",
    "OffsetIndex",
    "OffsetOutOfRangeException",
    "OffsetPosition",
    "OffsetsOutOfOrderException",
    "RecordBatchTooLargeException",
    "RecordTooLargeException",
    "TimeIndex",
    "TimestampAndOffset",
    "TimestampOffset",
    "TimestampType",
    "TopicPartition",
    "UnexpectedAppendOffsetException",
    "UnsupportedForMessageFormatException",
]
