"""The ``sluice`` sink: ``df.write`` and ``df.writeStream`` into Sluice topics.

Tasks publish their own rows from the executors; the driver only finishes what they
did. With ``transactional=true`` (the default) it is a two-phase commit, the technique
of Flink's exactly-once Kafka sink:

1. **Prepare** (each task): a producer with its own ``transactional.id`` runs
   ``init_transactions`` (fencing any earlier attempt of the same task), sends the
   task's rows in one transaction and :meth:`~sluice.client.Producer.prepare_transaction`
   flushes them without committing. The task's commit message carries the
   :class:`~sluice.client.PreparedTxnState` (id, producer id, epoch), a few dozen bytes
   whatever the row count.
2. **Record** (driver, streaming only): the prepared transactions are written under
   the query id, with the batch id, to the compacted commit-log topic (acks=all).
3. **Commit** (driver): every prepared transaction is resumed and committed, all in
   parallel; then the batch is recorded as committed.

A failed task aborts its own transaction; a failed job or micro-batch aborts the
prepared ones (and fences the transactional ids of tasks that died). When a driver
dies after step 2, Spark replays the batch after the restart: the replayed tasks
prepare again under new ids (a streaming task's id holds the query run), and the
driver, finding the batch recorded, commits the recorded transactions and aborts the
replay's, so each batch becomes visible exactly once. Transactional ids a dead run's
tasks used (each task records its id in the commit log the first time it uses it)
are fenced, which aborts what they left open.

With ``transactional=false`` tasks publish with the idempotent producer and the
driver does nothing: at-least-once, as Spark's own Kafka sink.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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

from sluice.client import Admin, Consumer, NewTopic, PreparedTxnState, Producer, TopicPartition
from sluice.client.errors import ApiException, KafkaException, ProducerFencedException
from sluice.client.security import SECURITY_CONFIG_DEFAULTS

from .options import SluiceOptionError, WriterOptions

__all__ = [
    "SluiceBatchWriter",
    "SluiceStreamWriter",
    "TaskTransaction",
    "check_sink_schema",
]

log = logging.getLogger("sluice.spark")

_COLUMNS = ("key", "value", "topic", "partition", "headers")
# the coordinator's default transaction.max.timeout.ms: a prepared transaction must
# outlive the slowest task of its batch and a driver restart
_TRANSACTION_TIMEOUT_MS = "900000"
_PARALLEL_ENDS = 8


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
    for field_ in schema.fields:
        if not isinstance(field_.dataType, kinds[field_.name]):
            raise SluiceOptionError(
                f"sink column {field_.name!r} has type {field_.dataType.simpleString()}; "
                f"expected {' or '.join(k.__name__ for k in kinds[field_.name])}"
            )


class TaskTransaction(WriterCommitMessage):
    """What one task wrote: its prepared transaction (None when it wrote no rows or the
    sink is not transactional), the row count, and where the task ran."""

    def __init__(
        self, prepared: PreparedTxnState | None, rows: int, partition: int, attempt: int,
        query_id: str | None = None, run_id: str | None = None,
    ) -> None:  # fmt: skip
        self.prepared, self.rows = prepared, rows
        self.partition, self.attempt = partition, attempt
        self.query_id, self.run_id = query_id, run_id


# -- configs -----------------------------------------------------------------------------


def _producer_config(options: WriterOptions) -> dict[str, str]:
    """The tasks' producer settings (the ``kafka.transactional.id`` option is the prefix
    of the sink's transactional ids, not one producer's id)."""
    config = {k: v for k, v in options.producer_config.items() if k != "transactional.id"}
    if options.transactional:
        config.setdefault("transaction.timeout.ms", _TRANSACTION_TIMEOUT_MS)
    return config


def _connection_config(options: WriterOptions) -> dict[str, str]:
    """Servers and security settings, for the driver's consumer and admin client."""
    return {
        k: v
        for k, v in options.producer_config.items()
        if k in SECURITY_CONFIG_DEFAULTS or k in ("bootstrap.servers", "client.dns.lookup")
    }


def _id_prefix(options: WriterOptions, default: str) -> str:
    return options.producer_config.get("transactional.id") or default


# -- sending rows (tasks) ------------------------------------------------------------------


def _as_binary(column: pa.Array | pa.ChunkedArray) -> list[Any]:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    values: list[Any] = column.to_pylist()
    return values


class _PartitionCheck:
    """Fails a row naming a partition its topic does not have (the producer would wait
    ``max.block.ms`` for it)."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.counts: dict[str, int] = {}

    def __call__(self, topic: str, partition: int) -> None:
        count = self.counts.get(topic)
        if count is None:
            count = self.counts[topic] = len(self.producer.partitions_for(topic))
        if not 0 <= partition < count:
            raise SluiceOptionError(
                f"row for {topic} names partition {partition}; the topic has {count}"
            )


def _send_rows(
    producer: Producer, options: WriterOptions, first: pa.RecordBatch,
    rest: Iterator[pa.RecordBatch], callback: Any = None,
) -> int:  # fmt: skip
    """Send every row; the ``topic`` option overrides the column, as in Spark's sink."""
    send = producer.send
    check = _PartitionCheck(producer)
    rows = 0
    batch: pa.RecordBatch | None = first
    while batch is not None:
        names = batch.schema.names
        n = batch.num_rows
        values = _as_binary(batch.column("value"))
        keys = _as_binary(batch.column("key")) if "key" in names else [None] * n
        if options.topic is not None:
            topics: list[Any] = [options.topic] * n
        else:
            topics = batch.column("topic").to_pylist()
            if None in topics:
                raise SluiceOptionError(
                    f"{topics.count(None)} row(s) have a null topic and the sink has no "
                    "topic option"
                )
        parts = batch.column("partition").to_pylist() if "partition" in names else None
        headers = batch.column("headers").to_pylist() if "headers" in names else None
        if parts is None and headers is None and callback is None:
            for topic, key, value in zip(topics, keys, values, strict=True):
                send(topic, value, key)
        else:
            for i in range(n):
                part = parts[i] if parts is not None else None
                if part is not None:
                    check(topics[i], part)
                hs = headers[i] if headers is not None else None
                send(
                    topics[i], values[i], key=keys[i], partition=part,
                    headers=[(h["key"], h["value"]) for h in hs] if hs else None,
                    callback=callback,
                )  # fmt: skip
        rows += n
        batch = next(rest, None)
    return rows


def _first_rows(batches: Iterator[pa.RecordBatch]) -> pa.RecordBatch | None:
    for batch in batches:
        if batch.num_rows:
            return batch
    return None


def _task_position() -> tuple[int, int]:
    ctx = TaskContext.get()
    return (ctx.partitionId(), ctx.attemptNumber()) if ctx is not None else (0, 0)


def _write_at_least_once(
    options: WriterOptions, first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]
) -> int:
    errors: list[BaseException] = []

    def on_completion(_metadata: Any, exception: BaseException | None) -> None:
        if exception is not None and not errors:
            errors.append(exception)

    with Producer(_producer_config(options)) as producer:
        rows = _send_rows(producer, options, first, rest, on_completion)
        producer.flush()
    if errors:
        raise errors[0]
    return rows


def _prepare(
    options: WriterOptions, transactional_id: str, first: pa.RecordBatch,
    rest: Iterator[pa.RecordBatch], on_new_id: Any = None,
) -> tuple[PreparedTxnState, int]:  # fmt: skip
    """Write the rows in one transaction of ``transactional_id`` and prepare it."""
    config = {**_producer_config(options), "transactional.id": transactional_id}
    producer = Producer(config)
    try:
        producer.init_transactions()  # fences (and aborts) an earlier attempt's
        if on_new_id is not None:
            tm = producer.transaction_manager
            on_new_id(tm is not None and tm.producer_id_and_epoch.epoch == 0)
        producer.begin_transaction()
        rows = _send_rows(producer, options, first, rest)
        prepared = producer.prepare_transaction()
    except BaseException:
        try:
            producer.abort_transaction(30)
        except Exception as exc:  # fenced, or never begun: nothing of ours to abort
            log.debug("sluice sink: abort of %s after a failure: %s", transactional_id, exc)
        producer.close(0)
        raise
    producer.close()
    return prepared, rows


# -- ending prepared transactions (driver) ----------------------------------------------


def _end(options: WriterOptions, prepared: PreparedTxnState, commit: bool) -> None:
    config = {**_producer_config(options), "transactional.id": prepared.transactional_id}
    with Producer(config) as producer:
        producer.resume_transaction(prepared)
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()


def _end_all(
    options: WriterOptions, prepared: Sequence[PreparedTxnState], commit: bool
) -> list[tuple[PreparedTxnState, BaseException | None]]:
    """Commit or abort every transaction, in parallel; each one's error (or None)."""

    def one(state: PreparedTxnState) -> tuple[PreparedTxnState, BaseException | None]:
        try:
            _end(options, state, commit)
        except Exception as exc:
            return state, exc
        return state, None

    if not prepared:
        return []
    with ThreadPoolExecutor(min(_PARALLEL_ENDS, len(prepared))) as pool:
        return list(pool.map(one, prepared))


def _commit_all(options: WriterOptions, prepared: Sequence[PreparedTxnState]) -> None:
    failed = [(s, e) for s, e in _end_all(options, prepared, True) if e is not None]
    if failed:
        raise KafkaException(
            f"the sluice sink could not commit {len(failed)} of {len(prepared)} prepared "
            f"transaction(s): " + "; ".join(f"{s.transactional_id}: {e}" for s, e in failed)
        ) from failed[0][1]


def _abort_all(options: WriterOptions, prepared: Sequence[PreparedTxnState]) -> None:
    for state, exc in _end_all(options, prepared, False):
        if exc is not None and not isinstance(exc, ProducerFencedException):
            log.warning("sluice sink: could not abort %s: %s", state.transactional_id, exc)


def _fence(options: WriterOptions, transactional_ids: Iterable[str]) -> None:
    """InitProducerId on each id: aborts whatever transaction it left open."""

    def one(transactional_id: str) -> None:
        config = {**_producer_config(options), "transactional.id": transactional_id}
        try:
            with Producer(config) as producer:
                producer.init_transactions()
        except Exception as exc:
            log.warning("sluice sink: could not fence %s: %s", transactional_id, exc)

    ids = sorted(set(transactional_ids))
    if ids:
        with ThreadPoolExecutor(min(_PARALLEL_ENDS, len(ids))) as pool:
            list(pool.map(one, ids))


def _tasks(messages: Sequence[WriterCommitMessage | None]) -> list[TaskTransaction]:
    return [m for m in messages if isinstance(m, TaskTransaction)]


# -- batch writes ----------------------------------------------------------------------------


class SluiceBatchWriter(DataSourceArrowWriter):
    """``df.write.format("sluice")``: tasks prepare, the driver commits them all."""

    def __init__(self, options: WriterOptions) -> None:
        self.options = options
        self.prefix = f"{_id_prefix(options, 'sluice-spark')}-{uuid.uuid4()}"

    def _transactional_id(self, partition: int, attempt: int) -> str:
        return f"{self.prefix}-{partition}-{attempt}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskTransaction:
        partition, attempt = _task_position()
        first = _first_rows(iterator)
        if first is None:
            return TaskTransaction(None, 0, partition, attempt)
        if not self.options.transactional:
            rows = _write_at_least_once(self.options, first, iterator)
            return TaskTransaction(None, rows, partition, attempt)
        txn_id = self._transactional_id(partition, attempt)
        prepared, rows = _prepare(self.options, txn_id, first, iterator)
        return TaskTransaction(prepared, rows, partition, attempt)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        tasks = _tasks(messages)
        _commit_all(self.options, [t.prepared for t in tasks if t.prepared is not None])
        self._fence_other_attempts(tasks)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        tasks = _tasks(messages)
        rows = sum(t.rows for t in tasks)
        if not self.options.transactional:
            log.warning("sluice sink: write aborted; %d row(s) were published already", rows)
            return
        _abort_all(self.options, [t.prepared for t in tasks if t.prepared is not None])
        failed = [i for i, m in enumerate(messages) if not isinstance(m, TaskTransaction)]
        self._fence_open(failed, set())
        log.warning("sluice sink: write aborted, %d prepared row(s) aborted", rows)

    def _fence_other_attempts(self, tasks: Sequence[TaskTransaction]) -> None:
        """A task whose attempt n succeeded may have left attempts < n open (killed)."""
        retried = [t.partition for t in tasks if t.attempt > 0]
        if retried:
            used = {t.prepared.transactional_id for t in tasks if t.prepared is not None}
            self._fence_open(retried, used)

    def _fence_open(self, partitions: Sequence[int], keep: set[str]) -> None:
        if not partitions or not self.options.transactional:
            return
        open_ids = []
        with Admin(_connection_config(self.options)) as admin:
            for partition in partitions:
                for attempt in range(8):
                    txn_id = self._transactional_id(partition, attempt)
                    if txn_id in keep:
                        continue
                    try:
                        state = admin.describe_transaction(txn_id).state
                    except ApiException:
                        break  # attempts are numbered from 0: no later one either
                    if state == "Ongoing":
                        open_ids.append(txn_id)
        _fence(self.options, open_ids)


# -- streaming writes: the commit log ---------------------------------------------------------


@dataclass
class _QueryLog:
    """What the commit log holds for one query."""

    batch_id: int = -1
    state: str = "committed"
    prepared: list[PreparedTxnState] = field(default_factory=list)
    # transactional ids the query's tasks used: id -> (run, partition, attempt)
    ids: dict[str, tuple[str, int, int]] = field(default_factory=dict)


# (servers, topic) -> (next offset to read, latest value per key); the commit runs in a
# Python worker that Spark may reuse, so later batches read only what is new
_LOG_CACHE: dict[tuple[str, str], tuple[int, dict[bytes, bytes]]] = {}


class _CommitLog:
    """The compacted topic (one partition) where the sink keeps, per streaming query,
    its last micro-batch (``"prepared"`` with the transactions, or ``"committed"``) under
    the key ``<query id>``, and each transactional id its tasks used under
    ``<query id>/txn/<transactional id>`` (removed with a tombstone once fenced)."""

    def __init__(self, options: WriterOptions) -> None:
        self.options = options
        self.topic = options.commit_log_topic
        self.connection = _connection_config(options)

    def _ensure_topic(self) -> None:
        with Admin(self.connection) as admin:
            if self.topic in admin.list_topics():
                return
            try:
                admin.create_topics([NewTopic(self.topic, 1, -1, {"cleanup.policy": "compact"})])
            except ApiException as exc:  # created meanwhile by another writer
                if exc.code != 36:
                    raise

    def _records(self) -> dict[bytes, bytes]:
        cache_key = (self.connection["bootstrap.servers"], self.topic)
        cached = _LOG_CACHE.get(cache_key)
        if cached is None:
            self._ensure_topic()
        position, latest = cached if cached is not None else (0, {})
        latest = dict(latest)
        tp = TopicPartition(self.topic, 0)
        config = {**self.connection, "enable.auto.commit": "false"}
        with Consumer(config) as consumer:
            end = consumer.end_offsets([tp]).get(tp) or 0
            if end < position:  # the topic was recreated
                position, latest = 0, {}
            consumer.assign([tp])
            consumer.seek(tp, position if position else -2)
            while consumer.position(tp) < end:
                for r in consumer.poll(1.0):
                    if r.key is None:
                        continue
                    if r.value is None:
                        latest.pop(r.key, None)
                    else:
                        latest[r.key] = r.value
        _LOG_CACHE[cache_key] = (end, latest)
        return latest

    def read(self, query_id: str) -> _QueryLog:
        records = self._records()
        out = _QueryLog()
        raw = records.get(query_id.encode())
        if raw is not None:
            value = json.loads(raw)
            out.batch_id = int(value["batchId"])
            out.state = value.get("state", "committed")
            out.prepared = [PreparedTxnState(*t) for t in value.get("transactions", [])]
        prefix = f"{query_id}/txn/".encode()
        for key, raw in records.items():
            if key.startswith(prefix):
                value = json.loads(raw)
                out.ids[key[len(prefix) :].decode()] = (
                    value["run"], int(value["partition"]), int(value["attempt"])
                )  # fmt: skip
        return out

    def _send(self, entries: Sequence[tuple[str, Any]]) -> None:
        config = {**_producer_config(self.options), "linger.ms": "0"}
        config.pop("transaction.timeout.ms", None)
        with Producer(config) as producer:
            futures = []
            for key, value in entries:
                data = None if value is None else json.dumps(value).encode()
                futures.append(producer.send(self.topic, data, key=key.encode(), partition=0))
            for future in futures:
                future.get(60)

    def record_batch(
        self, query_id: str, batch_id: int, state: str, prepared: Sequence[PreparedTxnState],
        rows: int,
    ) -> None:  # fmt: skip
        value = {"batchId": batch_id, "state": state, "rows": rows,
                 "transactions": [list(p) for p in prepared]}  # fmt: skip
        self._send([(query_id, value)])

    def record_id(
        self, query_id: str, transactional_id: str, run_id: str, partition: int, attempt: int
    ) -> None:
        value = {"run": run_id, "partition": partition, "attempt": attempt}
        self._ensure_topic()  # a task of a new query may come first: create it compacted
        self._send([(f"{query_id}/txn/{transactional_id}", value)])

    def forget_ids(self, query_id: str, transactional_ids: Iterable[str]) -> None:
        self._send([(f"{query_id}/txn/{t}", None) for t in transactional_ids])


class SluiceStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("sluice")``: each micro-batch becomes visible once."""

    def __init__(self, options: WriterOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskTransaction:
        partition, attempt = _task_position()
        ctx = TaskContext.get()
        query_id = run_id = None
        if ctx is not None:
            query_id = ctx.getLocalProperty("sql.streaming.queryId")
            run_id = ctx.getLocalProperty("spark.jobGroup.id")  # the query's run id
        first = _first_rows(iterator)
        if first is None:
            return TaskTransaction(None, 0, partition, attempt, query_id, run_id)
        if not self.options.transactional:
            rows = _write_at_least_once(self.options, first, iterator)
            return TaskTransaction(None, rows, partition, attempt, query_id, run_id)
        if query_id is None or run_id is None:
            raise SluiceOptionError("the sluice stream writer runs only in a streaming query")
        prefix = _id_prefix(self.options, f"sluice-spark-{query_id}")
        txn_id = f"{prefix}-{run_id}-{partition}-{attempt}"

        def on_new_id(first_use: bool) -> None:
            # a dead driver's successor must find the ids its tasks used: record each one
            # before it holds anything (a retried attempt's too, which may be used once)
            if first_use or attempt > 0:
                _CommitLog(self.options).record_id(query_id, txn_id, run_id, partition, attempt)

        prepared, rows = _prepare(self.options, txn_id, first, iterator, on_new_id)
        return TaskTransaction(prepared, rows, partition, attempt, query_id, run_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        tasks = _tasks(messages)
        if not self.options.transactional or not tasks:
            return
        query_id, run_id = tasks[0].query_id, tasks[0].run_id
        assert query_id is not None and run_id is not None
        prepared = [t.prepared for t in tasks if t.prepared is not None]
        rows = sum(t.rows for t in tasks)
        commit_log = _CommitLog(self.options)
        recorded = commit_log.read(query_id)
        published = recorded.batch_id >= batchId
        if recorded.state == "prepared":
            # a previous driver recorded this batch (or, had it failed after recording,
            # an earlier one) and died before Spark noted the commit: finish it
            replay = prepared if recorded.batch_id == batchId else []
            if self._finish_recorded(commit_log, query_id, recorded, replay):
                prepared = []
        if published:
            log.info("sluice sink: batch %d of query %s was published already; the "
                     "replay's %d row(s) are aborted", batchId, query_id, rows)  # fmt: skip
            _abort_all(self.options, prepared)
        elif prepared:  # a batch without rows has nothing to record or commit
            commit_log.record_batch(query_id, batchId, "prepared", prepared, rows)
            _commit_all(self.options, prepared)
            commit_log.record_batch(query_id, batchId, "committed", [], rows)
        self._fence_stale_ids(commit_log, query_id, run_id, recorded, tasks)

    def _finish_recorded(
        self, commit_log: _CommitLog, query_id: str, recorded: _QueryLog,
        replay: Sequence[PreparedTxnState],
    ) -> bool:  # fmt: skip
        """Commit the recorded transactions; True if the replay's were committed instead."""
        results = _end_all(self.options, recorded.prepared, True)
        used_replay = False
        lost = [(s, e) for s, e in results if e is not None]
        if lost and len(lost) == len(results) and replay:
            # every recorded transaction was aborted (they outlived transaction.timeout.ms
            # while no driver ran): the replay's transactions hold the same batch
            log.warning("sluice sink: the recorded transactions of batch %d of query %s "
                        "were aborted (%s); committing the replay's instead",
                        recorded.batch_id, query_id, lost[0][1])  # fmt: skip
            commit_log.record_batch(query_id, recorded.batch_id, "prepared", replay, 0)
            _commit_all(self.options, replay)
            used_replay = True
        elif lost:
            raise KafkaException(
                f"batch {recorded.batch_id} of query {query_id}: {len(lost)} of its "
                f"{len(results)} prepared transactions could not be committed and are lost "
                "(aborted: the driver was away longer than transaction.timeout.ms?): "
                + "; ".join(f"{s.transactional_id}: {e}" for s, e in lost)
            )
        commit_log.record_batch(query_id, recorded.batch_id, "committed", [], 0)
        recorded.state = "committed"
        return used_replay

    def _fence_stale_ids(
        self, commit_log: _CommitLog, query_id: str, run_id: str, recorded: _QueryLog,
        tasks: Sequence[TaskTransaction],
    ) -> None:  # fmt: skip
        """Fence the ids that may hold an open transaction nobody will finish: those of
        an earlier run of the query (its driver died), and attempts of this run that lost
        to another attempt of the same task. Records of retried attempts' ids and of
        earlier runs' are removed; this run's first attempts' ids are used again."""
        used = {t.prepared.transactional_id for t in tasks if t.prepared is not None}
        winners = {t.partition: t.attempt for t in tasks if t.prepared is not None}
        stale, forget = [], []
        for txn_id, (run, partition, attempt) in recorded.ids.items():
            if txn_id in used:
                continue
            if run != run_id:
                stale.append(txn_id)
                forget.append(txn_id)
            elif winners.get(partition, attempt) != attempt:
                stale.append(txn_id)
                if attempt > 0:
                    forget.append(txn_id)
        if stale:
            log.info("sluice sink: fencing %d transactional id(s) of query %s that may "
                     "hold open transactions", len(stale), query_id)  # fmt: skip
            _fence(self.options, stale)
        if forget:
            commit_log.forget_ids(query_id, forget)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        tasks = _tasks(messages)
        rows = sum(t.rows for t in tasks)
        if not self.options.transactional:
            log.warning("sluice sink: batch %d aborted; %d row(s) were published already",
                        batchId, rows)  # fmt: skip
            return
        if not tasks:
            log.warning("sluice sink: batch %d aborted; the transactions its tasks left "
                        "open are fenced when the query runs again", batchId)  # fmt: skip
            return
        query_id, run_id = tasks[0].query_id, tasks[0].run_id
        assert query_id is not None and run_id is not None
        commit_log = _CommitLog(self.options)
        recorded = commit_log.read(query_id)
        keep = set(recorded.prepared) if recorded.state == "prepared" else set()
        _abort_all(
            self.options, [t.prepared for t in tasks if t.prepared and t.prepared not in keep]
        )
        failed = {i for i, m in enumerate(messages) if not isinstance(m, TaskTransaction)}
        _fence(
            self.options,
            [t for t, (run, p, _a) in recorded.ids.items() if run == run_id and p in failed],
        )
        log.warning("sluice sink: batch %d aborted, %d prepared row(s) aborted", batchId, rows)
