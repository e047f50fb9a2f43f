"""The ``sluice`` source's readers: batch (``spark.read``) and streaming (``spark.readStream``).

Planning runs on the driver (:class:`SluiceBatchReader.partitions`,
:class:`SluiceStreamReader.latestOffset`); each Spark input partition is one
topic-partition offset range that :func:`read_range` fetches in a Python worker
with Sluice's consumer and hands to Spark as Arrow record batches.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sluice.client.consumer.consumer import Consumer, TopicPartition
from sluice.client.errors import KafkaException

from .offsets import (
    OffsetReader,
    Range,
    TriggerDelay,
    check_progress,
    data_loss,
    resolve,
    split_ranges,
    spread_limit,
)
from .options import (
    ByTimestamp,
    OffsetMap,
    ReaderOptions,
    offsets_from_json_dict,
    offsets_to_json_dict,
)
from .task_log import fetch_counts, log_task_read

__all__ = [
    "OffsetRange",
    "SluiceBatchReader",
    "SluiceStreamReader",
    "read_range",
    "source_schema",
]

log = logging.getLogger("sluice.spark")

_HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
_ARROW_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_BATCH_ROWS = 16_384


def source_schema(include_headers: bool) -> StructType:
    """The source's fixed columns (Spark's Kafka source's, in the same order)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", _HEADERS))
    return StructType(fields)


def _arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
        ("partition", pa.int32()), ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
    ]  # fmt: skip
    if include_headers:
        fields.append(("headers", _ARROW_HEADERS))
    return pa.schema(fields)


class OffsetRange(InputPartition):
    """One Spark input partition: records ``[start, end)`` of one topic-partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


class _Columns:
    """Column lists for one Arrow batch of records."""

    def __init__(self, include_headers: bool) -> None:
        self.schema = _arrow_schema(include_headers)
        self.include_headers = include_headers
        self.clear()

    def clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.types: list[int] = []
        self.headers: list[list[dict[str, Any]]] = []

    def batch(self, topic: str, partition: int) -> pa.RecordBatch:
        n = len(self.offsets)
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([topic] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array([t * 1000 for t in self.timestamps], pa.int64()).cast(
                pa.timestamp("us", tz="UTC")
            ),
            pa.array(self.types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, _ARROW_HEADERS))
        self.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _log_start(consumer: Consumer, tp: TopicPartition) -> int:
    start = consumer.beginning_offsets([tp]).get(tp)
    if start is None:
        raise KafkaException(f"cannot get the log start offset of {tp}")
    return start


def read_range(options: ReaderOptions, part: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Fetch exactly the records ``[part.start, part.end)`` of one partition."""
    if part.start >= part.end:
        return
    # "earliest": an offset that vanished mid-read is seen as a jump past it, checked below
    config = {
        # a range is read to its end and the consumer closed: large fetches, and short
        # long-polls so closing does not wait out a pending fetch (both can be overridden)
        "max.partition.fetch.bytes": str(8 * 1024 * 1024),
        "fetch.max.wait.ms": "100",
        **options.consumer_config,
        "enable.auto.commit": "false",
        "auto.offset.reset": "earliest",
        "max.poll.records": str(_BATCH_ROWS),
    }
    tp = TopicPartition(part.topic, part.partition)
    where = f"{part.topic}-{part.partition}"
    cols = _Columns(options.include_headers)
    with Consumer(config) as consumer:
        position = _skip_lost(consumer, tp, part.start, part.end, options, where)
        consumer.assign([tp])
        consumer.seek(tp, position)
        fetched_before = fetch_counts(consumer, part.topic, part.partition)
        deadline = time.monotonic() + options.poll_timeout_s
        while position < part.end:
            records = consumer.poll(min(1.0, options.poll_timeout_s))
            if records and records[0].offset > position:
                # a gap: compaction or transaction markers, or records deleted under us
                _skip_lost(consumer, tp, position, records[0].offset, options, where)
            for r in records:
                if r.offset < position:  # never twice, even if the consumer reset backwards
                    continue
                if r.offset >= part.end:
                    break
                cols.keys.append(r.key)
                cols.values.append(r.value)
                cols.offsets.append(r.offset)
                cols.timestamps.append(r.timestamp)
                cols.types.append(0 if r.timestamp_type <= 1 else 1)
                if options.include_headers:
                    cols.headers.append([{"key": k, "value": v} for k, v in r.headers])
            if records:
                deadline = time.monotonic() + options.poll_timeout_s
            position = max(position, consumer.position(tp))
            if len(cols.offsets) >= _BATCH_ROWS:
                yield cols.batch(part.topic, part.partition)
            if position < part.end and time.monotonic() > deadline:
                raise TimeoutError(
                    f"no records of {where} arrived for {options.poll_timeout_s:.0f} s at offset "
                    f"{position} (range ends at {part.end}); see kafkaConsumer.pollTimeoutMs"
                )
        if cols.offsets:
            yield cols.batch(part.topic, part.partition)
        log_task_read(part.topic, part.partition, part.start, part.end, consumer, fetched_before)


def _skip_lost(
    consumer: Consumer, tp: TopicPartition, position: int, end: int,
    options: ReaderOptions, where: str,
) -> int:  # fmt: skip
    """``position``, or the log start when records before it were deleted (data loss)."""
    log_start = _log_start(consumer, tp)
    if position >= log_start:
        return position
    data_loss(
        options.fail_on_data_loss,
        f"cannot read {where} from offset {position}: the log now starts at {log_start} "
        f"({min(log_start, end) - position} records of the planned range are gone)",
    )
    return min(log_start, end)


class SluiceBatchReader(DataSourceReader):
    """``spark.read.format("sluice")``: one input partition per topic-partition range."""

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        reader = OffsetReader(self.options)
        try:
            tps = reader.partitions()
            start = resolve(self.options.starting, tps, reader, "startingOffsets")
            end = resolve(self.options.ending, tps, reader, "endingOffsets")
            latest = reader.latest(tps)
        finally:
            reader.close()
        # a start found by timestamp may lie past the end: nothing to read there
        by_time = isinstance(self.options.starting, ByTimestamp) or isinstance(
            self.options.ending, ByTimestamp
        )
        ranges: list[Range] = []
        for tp in tps:
            if end[tp] > latest[tp]:
                raise ValueError(
                    f"endingOffsets {end[tp]} of {tp[0]}-{tp[1]} is beyond the log end {latest[tp]}"
                )
            if start[tp] > end[tp] and not by_time:
                raise ValueError(
                    f"startingOffsets {start[tp]} of {tp[0]}-{tp[1]} is after its ending offset "
                    f"{end[tp]}"
                )
            ranges.append((tp[0], tp[1], start[tp], end[tp]))
        return _plan(ranges, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, OffsetRange):
            yield from read_range(self.options, partition)


def _plan(ranges: list[Range], options: ReaderOptions) -> list[InputPartition]:
    """The input partitions for ``ranges``, split for minPartitions and
    maxRecordsPerPartition."""
    pieces = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    return [OffsetRange(*piece) for piece in pieces]


class SluiceStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("sluice")``: offsets are ``{"topic": {"partition": next}}``,
    kept in the query's checkpoint; new partitions are read from offset 0."""

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._offsets = OffsetReader(options)
        self._initial: dict[str, dict[str, int]] | None = None
        self._target: OffsetMap | None = None
        self._latest: OffsetMap = {}
        self._delay: TriggerDelay | None = None
        if options.min_offsets_per_trigger is not None:
            self._delay = TriggerDelay(
                options.min_offsets_per_trigger, options.max_trigger_delay_ms
            )

    def initialOffset(self) -> dict[str, dict[str, int]]:
        # Spark may ask twice on a fresh query: resolve "latest" only once.
        if self._initial is None:
            tps = self._offsets.partitions()
            start = resolve(self.options.starting, tps, self._offsets, "startingOffsets")
            self._initial = offsets_to_json_dict(start)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        # Python sources have no composite limit: with both options the minimum goes to
        # Spark and latestOffset applies maxOffsetsPerTrigger itself
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        """The latest offsets seen by the last ``latestOffset`` (the progress's
        ``latestOffset``), from which :func:`sluice.spark.source_metrics` computes the
        offsets-behind-latest metrics."""
        return offsets_to_json_dict(self._latest) if self._latest else None

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._offsets.partitions()
        self._target = self._offsets.latest(tps)
        log.info("availableNow: reading up to %s", json.dumps(offsets_to_json_dict(self._target)))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        begin = offsets_from_json_dict(start)
        tps = self._offsets.partitions()
        latest = self._offsets.latest(tps)
        begin = check_progress(begin, latest, self.options.fail_on_data_loss)
        for tp in tps:
            if tp not in begin:
                log.info("new partition %s-%d: reading it from offset 0", *tp)
                begin[tp] = 0
        if self._target is not None:
            latest = {tp: min(off, self._target.get(tp, begin[tp])) for tp, off in latest.items()}
        latest = {tp: max(off, begin[tp]) for tp, off in latest.items()}
        self._latest = dict(latest)
        if isinstance(limit, ReadAllAvailable):
            return offsets_to_json_dict(latest)
        # availableNow must reach its target, so it never waits for minOffsetsPerTrigger
        if self._delay is not None and self._target is None:
            available = sum(off - begin[tp] for tp, off in latest.items())
            if self._delay.delay(available):
                log.debug("%d offsets available, fewer than minOffsetsPerTrigger", available)
                return dict(start)
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        cap = cap or self.options.max_offsets_per_trigger
        if cap is not None:
            latest = spread_limit(begin, latest, cap)
        return offsets_to_json_dict(latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = offsets_from_json_dict(start)
        ranges = [
            (tp[0], tp[1], begin.get(tp, 0), stop)
            for tp, stop in sorted(offsets_from_json_dict(end).items())
        ]
        return _plan(ranges, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # an empty plan reaches here as a single InputPartition(None)
        if isinstance(partition, OffsetRange):
            yield from read_range(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Progress lives in Spark's checkpoint; nothing to commit to Sluice."""

    def stop(self) -> None:
        self._offsets.close()
