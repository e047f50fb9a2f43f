"""The ``sluice`` sink on a real local Spark session: tasks write their rows in their own
transactions and the driver commits them. Partitioning by murmur2 of the key, headers,
the topic option overriding the column; and the failure matrix — a task failing mid-write,
a task's producer fenced, a replayed micro-batch, the driver killed between prepare and
commit — after which read_committed readers (Sluice's consumer, confluent-kafka,
kafka-python) see every row exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import sluice
from sluice.client import Admin, Consumer, ConsumerRecord, NewTopic, Producer, TopicPartition
from sluice.client.producer.partitioner import murmur2
from support.clients import committed_values_confluent, committed_values_kafka_python

pytestmark = pytest.mark.timeout(300)

HERE = Path(__file__).resolve().parent


def _create(broker: sluice.EmbeddedBroker, topic: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def _read_all(
    broker: sluice.EmbeddedBroker, topic: str, partitions: int, committed: bool = True
) -> list[ConsumerRecord]:
    """Every record of ``topic`` with Sluice's consumer (read_committed by default), up to
    the end offsets of now."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: list[ConsumerRecord] = []
    config = {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest",
              "isolation.level": "read_committed" if committed else "read_uncommitted"}  # fmt: skip
    with Consumer(config) as consumer:
        ends = consumer.end_offsets(tps)
        consumer.assign(tps)
        while any(consumer.position(tp) < (ends[tp] or 0) for tp in tps):
            out.extend(consumer.poll(1.0))
    return out


def _exactly_once(broker: sluice.EmbeddedBroker, topic: str, partitions: int) -> list[bytes]:
    """The values read_committed readers see; the same for all three clients."""
    ours = sorted(r.value for r in _read_all(broker, topic, partitions) if r.value is not None)
    servers = broker.bootstrap_servers
    assert sorted(committed_values_confluent(servers, topic, partitions)) == ours
    assert sorted(committed_values_kafka_python(servers, topic, partitions)) == ours
    return ours


def _expected_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def _feed(servers: str, topic: str, values: list[str], partitions: int) -> None:
    with Producer({"bootstrap.servers": servers}) as producer:
        for i, value in enumerate(values):
            producer.send(topic, value.encode(), key=f"k{i}".encode(), partition=i % partitions)
        producer.flush(30)


def test_batch_write_partitions_by_key_with_headers(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str
) -> None:
    _create(broker, topic, 3)
    rows = [
        (f"user-{i}".encode(), f"event {i}", [("source", b"spark"), ("i", str(i).encode())])
        for i in range(60)
    ]
    df = spark.createDataFrame(
        rows, "key binary, value string, headers array<struct<key:string,value:binary>>"
    ).repartition(2)
    df.write.format("sluice").option("kafka.bootstrap.servers", broker.bootstrap_servers).option(
        "topic", topic
    ).mode("append").save()
    # a topic column and an explicit partition column
    spark.createDataFrame(
        [(topic, 2, "pinned")], "topic string, partition int, value string"
    ).write.format("sluice").option("kafka.bootstrap.servers", broker.bootstrap_servers).mode(
        "append"
    ).save()
    # the topic option overrides the column, as in Spark's Kafka sink
    spark.createDataFrame([("elsewhere", "overridden")], "topic string, value string").write.format(
        "sluice"
    ).option("kafka.bootstrap.servers", broker.bootstrap_servers).option("topic", topic).mode(
        "append"
    ).save()

    records = _read_all(broker, topic, 3)
    assert len(records) == 62
    keyed = [r for r in records if r.key is not None]
    assert sorted(r.value for r in keyed) == sorted(f"event {i}".encode() for i in range(60))
    for r in keyed:
        assert r.partition == _expected_partition(r.key, 3), r
        i = r.key.decode().split("-")[1]
        assert r.headers == [("source", b"spark"), ("i", i.encode())]
    (pinned,) = [r for r in records if r.value == b"pinned"]
    assert pinned.partition == 2
    assert len(_exactly_once(broker, topic, 3)) == 62


def test_batch_write_with_a_failing_task_publishes_nothing(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str
) -> None:
    """One task fails after it sent rows (its second Arrow batch has a null topic): it
    aborts its own transaction, the driver aborts the other task's prepared one."""
    _create(broker, topic, 1)
    good = [(topic, f"ok {i}") for i in range(20)]
    bad = [(None, "no topic")]  # a null topic and no topic option: that task fails
    df = spark.createDataFrame(good + bad, "topic string, value string").coalesce(2)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "4")
    try:
        with pytest.raises(Exception, match="null topic and the sink has no topic option"):
            df.write.format("sluice").option(
                "kafka.bootstrap.servers", broker.bootstrap_servers
            ).mode("append").save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert _exactly_once(broker, topic, 1) == []
    assert _read_all(broker, topic, 1, committed=False) != []  # written, then aborted

    with pytest.raises(Exception, match="needs a 'value' column"):
        spark.createDataFrame([(topic,)], "topic string").write.format("sluice").option(
            "kafka.bootstrap.servers", broker.bootstrap_servers
        ).mode("append").save()


def _stream(spark: Any, servers: str, source: str, sink: str, checkpoint: Path) -> Any:
    return (
        spark.readStream.format("sluice")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .selectExpr("key", "value", "headers")
        .writeStream.format("sluice")
        .option("kafka.bootstrap.servers", servers)
        .option("topic", sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def _run_ok(query: Any) -> Any:
    assert query.awaitTermination(180)
    assert query.exception() is None
    return query


def test_streaming_write_replayed_batch_is_not_duplicated(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    source, sink = f"{topic}-in", f"{topic}-out"
    _create(broker, source, 2)
    _create(broker, sink, 2)
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for i in range(30):
            producer.send(source, f"m{i}".encode(), key=f"k{i}".encode(), headers=[("h", b"1")])
        producer.flush(30)
    checkpoint = tmp_path / "checkpoint"
    servers = broker.bootstrap_servers

    first = _run_ok(_stream(spark, servers, source, sink, checkpoint))
    assert [p["batchId"] for p in first.recentProgress if p["numInputRows"]] == [0]
    assert len(_read_all(broker, sink, 2)) == 30
    # Force Spark to replay batch 0: forget that it committed it (as after a crash
    # between the sink's commit and Spark's own commit log write).
    (checkpoint / "commits" / "0").unlink()
    (checkpoint / "commits" / ".0.crc").unlink(missing_ok=True)
    second = _run_ok(_stream(spark, servers, source, sink, checkpoint))
    assert [p["batchId"] for p in second.recentProgress if p["numInputRows"]] == [0]
    records = _read_all(broker, sink, 2)
    assert sorted(r.value for r in records) == sorted(f"m{i}".encode() for i in range(30))
    assert all(r.headers == [("h", b"1")] for r in records)
    for r in records:
        assert r.key is not None and r.partition == _expected_partition(r.key, 2)
    assert len(_exactly_once(broker, sink, 2)) == 30
    # the replay wrote its rows again, in transactions the driver aborted
    assert len(_read_all(broker, sink, 2, committed=False)) == 60


def test_streaming_task_failure_then_restart_fencing_a_zombie(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    """Micro-batch 0 fails: a task raises after it sent rows, its transaction and the
    other task's are aborted, the query fails. Meanwhile a zombie task of an earlier run
    of the query (recorded in the commit log, as every task's transactional id is) holds
    an open transaction. The next run publishes every row once and fences the zombie:
    its rows are aborted and its producer gets ProducerFencedException."""
    from pyspark.sql.functions import udf

    from sluice.client.errors import KafkaException
    from sluice.spark.options import WriterOptions
    from sluice.spark.writer import _CommitLog

    source, sink = f"{topic}-in", f"{topic}-out"
    _create(broker, source, 2)
    _create(broker, sink, 2)
    servers = broker.bootstrap_servers
    _feed(servers, source, [f"m{i}" for i in range(40)], 2)
    fail_file = tmp_path / "fail"
    fail_file.touch()

    @udf("binary")
    def failing(value: bytes) -> bytes:
        if value == b"m15" and fail_file.exists():  # partition 1's 8th row
            raise RuntimeError("injected task failure")
        return value

    checkpoint = tmp_path / "checkpoint"

    def start() -> Any:
        return (
            spark.readStream.format("sluice")
            .option("kafka.bootstrap.servers", servers)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .select("key", failing("value").alias("value"))
            .writeStream.format("sluice")
            .option("kafka.bootstrap.servers", servers)
            .option("topic", sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "4")
    try:
        query = start()
        with pytest.raises(Exception, match="injected task failure"):
            query.awaitTermination(180)
        assert _exactly_once(broker, sink, 2) == []

        zombie_id = f"sluice-spark-{query.id}-an-earlier-run-0-0"
        options = WriterOptions.parse({"kafka.bootstrap.servers": servers, "topic": sink})
        _CommitLog(options).record_id(str(query.id), zombie_id, "an-earlier-run", 0, 0)
        zombie = Producer({"bootstrap.servers": servers, "transactional.id": zombie_id})
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(sink, b"zombie", partition=0).get(30)

        fail_file.unlink()
        _run_ok(start())
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    with pytest.raises(KafkaException):
        zombie.send(sink, b"zombie again", partition=0)
        zombie.commit_transaction(30)
    zombie.close(0)
    assert _exactly_once(broker, sink, 2) == sorted(f"m{i}".encode() for i in range(40))


_CRASH_HOOK = '''
"""Kills the Spark driver (its process group) and this worker at a point of the sink's
commit, for tests/spark/test_spark_write.py."""
import os
import signal

_point = os.environ.get("SLUICE_SINK_CRASH")
if _point:
    from sluice.spark import writer as _writer

    _record_batch = _writer._CommitLog.record_batch

    def _crash():
        os.killpg(int(os.environ["SLUICE_SINK_CRASH_PGID"]), signal.SIGKILL)
        os.killpg(0, signal.SIGKILL)

    def record_batch(self, query_id, batch_id, state, prepared, rows):
        if state == "prepared" and _point == "before-record":
            _crash()
        _record_batch(self, query_id, batch_id, state, prepared, rows)
        if state == "prepared" and _point == "after-record":
            _crash()

    _writer._CommitLog.record_batch = record_batch
'''

_DRIVER = """
import sys
from sluice.spark import local_session

servers, source, sink, checkpoint = sys.argv[1:5]
spark = local_session("sluice-crashing-driver", cores=2)
query = (
    spark.readStream.format("sluice").option("kafka.bootstrap.servers", servers)
    .option("subscribe", source).option("startingOffsets", "earliest").load()
    .selectExpr("key", "value").writeStream.format("sluice")
    .option("kafka.bootstrap.servers", servers).option("topic", sink)
    .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
)
query.awaitTermination()
print("the driver was not killed", flush=True)
"""


def _run_crashing_driver(point: str, servers: str, source: str, sink: str, checkpoint: Path) -> str:
    """Run the query in a driver process of its own, SIGKILLed (its whole process group
    and the Python worker's) at ``point`` of the sink's commit; its output."""
    hook = checkpoint.parent / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(textwrap.dedent(_CRASH_HOOK))
    launcher = (
        "import os, sys; os.environ['SLUICE_SINK_CRASH_PGID'] = str(os.getpgid(0)); "
        f"exec(compile({_DRIVER!r}, 'driver', 'exec'))"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(hook), *sys.path]),
        "SLUICE_SINK_CRASH": point,
        "PYSPARK_PYTHON": sys.executable,
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", launcher, servers, source, sink, str(checkpoint)],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, out
    return out


@pytest.mark.slow  # a second Spark driver process: 20-60 s
@pytest.mark.parametrize("point", ["after-record", "before-record"])
def test_driver_killed_between_prepare_and_commit(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str, tmp_path: Path, point: str
) -> None:
    """The driver dies with every task's transaction prepared: before the sink recorded
    them (the restarted query's driver fences the dead run's transactional ids, which
    aborts them, and publishes the replay) or after (it commits the recorded ones and
    aborts the replay's). Either way, once the query ran again, read_committed readers
    see the micro-batch once; before, they see nothing of it."""
    source, sink = f"{topic}-in", f"{topic}-out"
    _create(broker, source, 2)
    _create(broker, sink, 2)
    servers = broker.bootstrap_servers
    _feed(servers, source, [f"m{i}" for i in range(30)], 2)
    checkpoint = tmp_path / "checkpoint"

    _run_crashing_driver(point, servers, source, sink, checkpoint)
    assert _exactly_once(broker, sink, 2) == []  # prepared, not committed
    assert len(_read_all(broker, sink, 2, committed=False)) == 30
    query = _run_ok(
        spark.readStream.format("sluice")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("sluice")
        .option("kafka.bootstrap.servers", servers)
        .option("topic", sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert [p["batchId"] for p in query.recentProgress if p["numInputRows"]] == [0]
    assert _exactly_once(broker, sink, 2) == sorted(f"m{i}".encode() for i in range(30))


def test_driver_commit_dies_after_recording_the_batch(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    """The default suite's driver crash, in the shared session: the Python process that
    runs the sink's commit on the driver exits (os._exit) right after recording the
    prepared transactions, before committing any. The query fails with the micro-batch
    invisible; run again, it replays the batch, and the driver commits the recorded
    transactions and aborts the replay's. (The slow test above SIGKILLs a whole driver.)"""
    from sluice.spark import SluiceDataSource
    from sluice.spark.writer import SluiceStreamWriter, _CommitLog

    class DyingCommit(SluiceStreamWriter):
        def commit(self, messages: Any, batchId: int) -> None:
            record_batch = _CommitLog.record_batch

            def record_then_die(log: Any, query_id: str, batch_id: int, state: str,
                                prepared: Any, rows: int) -> None:  # fmt: skip
                record_batch(log, query_id, batch_id, state, prepared, rows)
                if state == "prepared":
                    os._exit(1)

            _CommitLog.record_batch = record_then_die  # type: ignore[method-assign]
            super().commit(messages, batchId)

    class DyingSink(SluiceDataSource):
        @classmethod
        def name(cls) -> str:
            return "sluice_dying_commit"

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:
            return DyingCommit(super().streamWriter(schema, overwrite).options)

    spark.dataSource.register(DyingSink)
    source, sink = f"{topic}-in", f"{topic}-out"
    _create(broker, source, 2)
    _create(broker, sink, 2)
    servers = broker.bootstrap_servers
    _feed(servers, source, [f"m{i}" for i in range(30)], 2)
    checkpoint = tmp_path / "checkpoint"

    def start(sink_format: str) -> Any:
        return (
            spark.readStream.format("sluice")
            .option("kafka.bootstrap.servers", servers)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value")
            .writeStream.format(sink_format)
            .option("kafka.bootstrap.servers", servers)
            .option("topic", sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )

    query = start("sluice_dying_commit")
    with pytest.raises(Exception):  # noqa: B017 - Spark reports the dead worker its own way
        query.awaitTermination(180)
    assert _exactly_once(broker, sink, 2) == []  # prepared and recorded, not committed
    assert len(_read_all(broker, sink, 2, committed=False)) == 30
    again = _run_ok(start("sluice"))
    assert [p["batchId"] for p in again.recentProgress if p["numInputRows"]] == [0]
    assert _exactly_once(broker, sink, 2) == sorted(f"m{i}".encode() for i in range(30))
    assert len(_read_all(broker, sink, 2, committed=False)) == 60  # the replay's, aborted
