"""The ``sluice`` sink: ``df.write`` and ``df.writeStream`` into Sluice topics.

Tasks only stage: :meth:`write` packs its rows into an Arrow IPC buffer and returns
it in the commit message. Nothing reaches a topic until Spark commits the job or
micro-batch; then :func:`publish` sends the staged rows on the driver through
Sluice's producer and waits for every acknowledgement. For a streaming query
``(query id, batch id)`` is recorded in a small compacted commit-log topic, and a
micro-batch whose id is already recorded for the query (Spark replays the last
batch when it restarts before writing its own commit) is not published again.

With ``transactional=true`` (the default) a micro-batch's rows and its commit-log
record go out in one transaction of a producer whose ``transactional.id`` is
``sluice-spark-<query id>``: a driver that dies while publishing leaves an open
transaction, which the next driver's ``init_transactions`` aborts (fencing the
old one), so read_committed consumers see every micro-batch exactly once. A batch
``df.write`` is one transaction too (atomic, but a job run twice publishes twice).
A failed task or job aborts: staged rows are dropped.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from sluice.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from sluice.client.errors import ApiException

from .options import SluiceOptionError, WriterOptions

__all__ = ["SluiceBatchWriter", "SluiceStreamWriter", "StagedRows", "check_sink_schema"]

log = logging.getLogger("sluice.spark")

_COLUMNS = ("key", "value", "topic", "partition", "headers")


def check_sink_schema(schema: StructType, options: WriterOptions) -> None:
    """Reject input the sink cannot write, naming the column."""
    names = schema.fieldNames()
    if "value" not in names:
        raise SluiceOptionError("the sluice sink needs a 'value' column (binary or string)")
    extra = [n for n in names if n not in _COLUMNS]
    if extra:
        raise SluiceOptionError(
            f"the sluice sink does not know the column(s) {extra}; it writes {list(_COLUMNS)}"
        )
    if "topic" not in names and options.topic is None:
        raise SluiceOptionError("give the sink a 'topic' column or the option topic")
    kinds: dict[str, tuple[type[DataType], ...]] = {
        "key": (BinaryType, StringType), "value": (BinaryType, StringType),
        "topic": (StringType,), "partition": (IntegerType,), "headers": (ArrayType,),
    }  # fmt: skip
    for field in schema.fields:
        if not isinstance(field.dataType, kinds[field.name]):
            raise SluiceOptionError(
                f"sink column {field.name!r} has type {field.dataType.simpleString()}; "
                f"expected {' or '.join(k.__name__ for k in kinds[field.name])}"
            )


class StagedRows(WriterCommitMessage):
    """One task's rows as an Arrow IPC stream, with the micro-batch they belong to."""

    def __init__(self, ipc: bytes, rows: int, query_id: str | None, batch_id: int | None):
        self.ipc, self.rows, self.query_id, self.batch_id = ipc, rows, query_id, batch_id


def _as_bytes(value: Any) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _stage(options: WriterOptions, batches: Iterator[pa.RecordBatch]) -> StagedRows:
    sink = pa.BufferOutputStream()
    writer: pa.ipc.RecordBatchStreamWriter | None = None
    rows = 0
    for batch in batches:
        if options.topic is None:
            nulls = batch.column("topic").null_count
            if nulls:
                raise SluiceOptionError(
                    f"{nulls} row(s) have a null topic and the sink has no topic option"
                )
        if writer is None:
            writer = pa.ipc.new_stream(sink, batch.schema)
        writer.write_batch(batch)
        rows += batch.num_rows
    if writer is not None:
        writer.close()
    ctx = TaskContext.get()
    query_id = batch_id = None
    if ctx is not None:
        query_id = ctx.getLocalProperty("sql.streaming.queryId")
        raw_batch = ctx.getLocalProperty("streaming.sql.batchId")
        batch_id = int(raw_batch) if raw_batch is not None else None
    return StagedRows(sink.getvalue().to_pybytes() if rows else b"", rows, query_id, batch_id)


def _rows(ipc: bytes) -> Iterator[dict[str, list[Any]]]:
    if not ipc:
        return
    reader = pa.ipc.open_stream(ipc)
    for batch in reader:
        yield {name: batch.column(name).to_pylist() for name in batch.schema.names}


def _check_partitions(
    producer: Producer, staged: Sequence[StagedRows], default: str | None
) -> None:
    """Fail before sending anything if a row names a partition that does not exist."""
    counts: dict[str, int] = {}
    for message in staged:
        for cols in _rows(message.ipc):
            if "partition" not in cols:
                break
            topics = cols.get("topic") or [default] * len(cols["partition"])
            for topic, part in zip(topics, cols["partition"], strict=True):
                topic = topic or default
                if part is None or topic is None:
                    continue
                if topic not in counts:
                    counts[topic] = len(producer.partitions_for(topic))
                if not 0 <= part < counts[topic]:
                    raise SluiceOptionError(
                        f"row for {topic} names partition {part}; the topic has {counts[topic]}"
                    )


def publish(options: WriterOptions, staged: Sequence[StagedRows]) -> int:
    """Send every staged row with the idempotent producer (in one transaction when the
    sink is transactional); returns the record count."""
    if not options.transactional:
        with Producer(options.producer_config) as producer:
            return _send(producer, options, staged)
    config = {**options.producer_config, "transactional.id": f"sluice-spark-{uuid.uuid4()}"}
    with Producer(config) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        try:
            sent = _send(producer, options, staged)
        except BaseException:
            producer.abort_transaction()
            raise
        producer.commit_transaction()
        return sent


def _send(producer: Producer, options: WriterOptions, staged: Sequence[StagedRows]) -> int:
    """Send the staged rows and wait for every acknowledgement; returns the count."""
    sent = 0
    _check_partitions(producer, staged, options.topic)
    futures = []
    for message in staged:
        for cols in _rows(message.ipc):
            n = len(cols["value"])
            keys = cols.get("key") or [None] * n
            topics = cols.get("topic") or [None] * n
            parts = cols.get("partition") or [None] * n
            headers = cols.get("headers") or [None] * n
            for i in range(n):
                hs = headers[i]
                futures.append(
                    producer.send(
                        topics[i] or options.topic or "",
                        _as_bytes(cols["value"][i]),
                        key=_as_bytes(keys[i]),
                        partition=parts[i],
                        headers=[(h["key"], h["value"]) for h in hs] if hs else None,
                    )
                )
            sent += n
    producer.flush()
    for future in futures:
        future.get(timeout=0)
    return sent


class _CommitLog:
    """The compacted topic that remembers, per query, the last published micro-batch."""

    def __init__(self, options: WriterOptions) -> None:
        self.options = options
        self.servers = options.producer_config["bootstrap.servers"]

    def _ensure_topic(self) -> None:
        with Admin({"bootstrap.servers": self.servers}) as admin:
            if self.options.commit_log_topic in admin.list_topics():
                return
            topic = NewTopic(self.options.commit_log_topic, 1, -1, {"cleanup.policy": "compact"})
            try:
                admin.create_topics([topic])
            except ApiException as exc:  # created meanwhile by another writer
                if "already exists" not in str(exc).lower() and exc.code != 36:
                    raise

    def last_batch(self, query_id: str) -> int:
        """The last batch id published for ``query_id`` (-1 if none)."""
        self._ensure_topic()
        tp = TopicPartition(self.options.commit_log_topic, 0)
        config = {"bootstrap.servers": self.servers, "enable.auto.commit": "false"}
        if self.options.transactional:  # an aborted publish recorded nothing
            config["isolation.level"] = "read_committed"
        last = -1
        with Consumer(config) as consumer:
            end = consumer.end_offsets([tp]).get(tp) or 0
            consumer.assign([tp])
            consumer.seek(tp, -2)
            while consumer.position(tp) < end:
                for r in consumer.poll(1.0):
                    if r.key == query_id.encode() and r.value is not None:
                        last = max(last, int(json.loads(r.value)["batchId"]))
        return last

    def record(self, producer: Producer, query_id: str, batch_id: int, rows: int) -> None:
        value = json.dumps({"batchId": batch_id, "rows": rows}).encode()
        producer.send(self.options.commit_log_topic, value, key=query_id.encode()).get(30)


class SluiceBatchWriter(DataSourceArrowWriter):
    """``df.write.format("sluice")``: publishes when every task has staged its rows."""

    def __init__(self, options: WriterOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedRows:
        return _stage(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        publish(self.options, [m for m in messages if isinstance(m, StagedRows)])

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        rows = sum(m.rows for m in messages if isinstance(m, StagedRows))
        log.warning("sluice sink: write aborted, %d staged row(s) dropped", rows)


class SluiceStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("sluice")``: each micro-batch is published once per query."""

    def __init__(self, options: WriterOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedRows:
        return _stage(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        staged = [m for m in messages if isinstance(m, StagedRows) and m.rows]
        if not staged:
            return
        query_ids = {m.query_id for m in staged if m.query_id is not None}
        if not query_ids:
            publish(self.options, staged)
            return
        (query_id,) = query_ids
        options = self.options
        commit_log = _CommitLog(options)
        config = dict(options.producer_config)
        if options.transactional:
            config.setdefault("transactional.id", f"sluice-spark-{query_id}")
        with Producer(config) as producer:
            if options.transactional:
                producer.init_transactions()  # aborts a dead driver's open publish
            if batchId <= commit_log.last_batch(query_id):
                log.info("sluice sink: batch %d of query %s was published already",
                         batchId, query_id)  # fmt: skip
                return
            if not options.transactional:
                rows = _send(producer, options, staged)
                commit_log.record(producer, query_id, batchId, rows)
                return
            producer.begin_transaction()
            try:
                rows = _send(producer, options, staged)
                commit_log.record(producer, query_id, batchId, rows)
            except BaseException:
                producer.abort_transaction()
                raise
            producer.commit_transaction()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        rows = sum(m.rows for m in messages if isinstance(m, StagedRows))
        log.warning("sluice sink: batch %d aborted, %d staged row(s) dropped", batchId, rows)
