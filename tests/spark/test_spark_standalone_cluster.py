"""The ``sluice`` source and sink on a real multi-process Spark cluster and a 3-broker
Sluice cluster: a Spark standalone master and two workers (one core each) started from
the PySpark installation (:class:`sluice.spark.standalone.StandaloneSparkCluster`),
executors in JVMs of their own with their own Python workers, and three ``sluice broker``
processes on a real ZooKeeper.

- Each read task connects to its partition's leader itself: the task lines in the
  executors' logs (:mod:`sluice.spark.task_log`) name the broker each task fetched from,
  and the three partitions, led by three different brokers, were each read from their
  own leader, in processes under the workers, not the driver.
- A broker killed with SIGKILL in the middle of a streaming copy (input topic -> output
  topic through the transactional sink) loses and duplicates nothing for
  ``read_committed`` readers: confluent-kafka, kafka-python and the source itself each
  read every input record exactly once from the output.

Slow (a minute or two of JVM start-up alone on a small machine): marked ``slow``, run by
``scripts/run-spark-cluster.sh``. It prints its figures (times, rows, which broker each
task read from, the kill's outcome).
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.spark.standalone import StandaloneSparkCluster
from sluice.spark.task_log import TaskRead
from sluice.testing import EmbeddedCluster
from support.cluster import audit, leaders_and_isrs, numbered_producer
from support.exactly_once import check_exactly_once
from support.waiting import wait_until
from support.zookeeper import require_zookeeper

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

BROKERS = [1, 2, 3]
PARTITIONS = 3


def say(message: str) -> None:
    print(f"[spark-cluster] {message}", flush=True)


@pytest.fixture(scope="module")
def sluice_cluster() -> Iterator[EmbeddedCluster]:
    require_zookeeper()
    overrides = {
        "default.replication.factor": 3,
        "min.insync.replicas": 2,
        "transaction.state.log.num.partitions": 1,
    }
    began = time.monotonic()
    with EmbeddedCluster(brokers=3, broker_ids=BROKERS, overrides=overrides,
                         zookeeper=True) as cluster:  # fmt: skip
        say(f"3 Sluice brokers on ZooKeeper in {time.monotonic() - began:.1f} s: "
            f"{cluster.bootstrap_servers}")  # fmt: skip
        yield cluster


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneSparkCluster]:
    began = time.monotonic()
    work = tmp_path_factory.mktemp("spark-standalone")
    with StandaloneSparkCluster(workers=2, cores_per_worker=1, work_dir=work) as cluster:
        say(f"Spark master and 2 workers in {time.monotonic() - began:.1f} s: "
            f"{cluster.master_url} {cluster.pids()}")  # fmt: skip
        yield cluster


@pytest.fixture(scope="module")
def spark(spark_cluster: StandaloneSparkCluster) -> Iterator[Any]:
    began = time.monotonic()
    session = spark_cluster.session("sluice-standalone-test")
    say(f"Spark session on {spark_cluster.master_url} in {time.monotonic() - began:.1f} s")
    yield session
    session.stop()


def _create(bootstrap: str, topic: str, assignment: dict[int, list[int]] | None = None) -> None:
    from sluice.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        if assignment is None:
            admin.create_topics([NewTopic(topic, PARTITIONS, 3)])
        else:
            admin.create_topics([NewTopic(topic, replica_assignment=assignment)])
    wait_until(lambda: all(leader in BROKERS and len(isr) == 3
                           for leader, isr in leaders_and_isrs(bootstrap, topic).values()),
               30, f"{topic} led and replicated")  # fmt: skip


def _executor_of(pid: int, worker_pids: set[int]) -> Any:
    """The process under a Spark worker that ``pid`` descends from (its executor)."""
    import psutil

    process = psutil.Process(pid)
    chain = [process, *process.parents()]
    for child, parent in itertools.pairwise(chain):
        if parent.pid in worker_pids:
            return child
    return None


def test_each_task_reads_from_its_partitions_leader_in_an_executor(
    sluice_cluster: EmbeddedCluster, spark_cluster: StandaloneSparkCluster, spark: Any
) -> None:
    from confluent_kafka import Producer

    bootstrap = sluice_cluster.bootstrap_servers
    topic = "leaders"
    # partition p is led by broker p + 1: three partitions, three different leaders
    _create(bootstrap, topic, {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    leaders = {p: leader for p, (leader, _) in leaders_and_isrs(bootstrap, topic).items()}
    assert leaders == {0: 1, 1: 2, 2: 3}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "log_level": 0})  # fmt: skip
    for i in range(3_000):
        producer.produce(topic, f"{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0

    began = time.monotonic()
    rows = (
        spark.read.format("sluice").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic).load().groupBy("partition").count().collect()
    )  # fmt: skip
    took = time.monotonic() - began
    assert {r["partition"]: r["count"] for r in rows} == {0: 1000, 1: 1000, 2: 1000}
    say(f"batch read of 3,000 rows in 3 partitions: {took:.1f} s")

    reads: dict[Path, list[TaskRead]] = {}
    for path, lines in spark_cluster.task_reads().items():
        mine = [r for r in lines if r.topic == topic]
        if mine:
            reads[path] = mine
    executors = {path.parent for path in reads}
    worker_pids = set(spark_cluster.pids().values()) - {spark_cluster.pids()["master"]}
    by_partition: dict[int, list[TaskRead]] = {}
    for path, lines in sorted(reads.items()):
        for r in lines:
            by_partition.setdefault(r.partition, []).append(r)
            served = ", ".join(f"broker {b.broker_id} at {b.host}:{b.port} ({b.fetches} "
                               f"fetches)" for b in r.brokers)  # fmt: skip
            say(
                f"task {topic}-{r.partition} [{r.start}, {r.end}) in pid {r.pid} "
                f"({path.parent.parent.name}/{path.parent.name} of {path.parts[-4]}): {served}"
            )
    assert sorted(by_partition) == [0, 1, 2]
    for partition, lines in by_partition.items():
        leader = leaders[partition]
        for r in lines:
            assert r.broker_ids == {leader}, f"{topic}-{partition} read from {r.brokers}"
            assert {(b.host, b.port) for b in r.brokers} == {
                ("127.0.0.1", sluice_cluster.ports[leader])
            }
    assert {leaders[p] for p in by_partition} == {1, 2, 3}
    # the tasks ran in the executors' Python workers: under an executor JVM that a worker
    # started, not in the driver's process
    task_pids = {r.pid for lines in reads.values() for r in lines}
    assert os.getpid() not in task_pids
    executor_pids = set()
    for pid in task_pids:
        executor = _executor_of(pid, worker_pids)
        assert executor is not None, f"task process {pid} is not under a Spark worker"
        assert "CoarseGrainedExecutorBackend" in " ".join(executor.cmdline())
        executor_pids.add(executor.pid)
    assert len(executors) == 2 and len(executor_pids) == 2, sorted(map(str, executors))
    say(
        f"task processes {sorted(task_pids)} under executor JVMs {sorted(executor_pids)} "
        f"under workers {sorted(worker_pids)}; driver pid {os.getpid()}"
    )


def _read_committed_confluent(bootstrap: str, topic: str, expected: int) -> list[tuple[int, bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "log_level": 0})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 120
    idle_until = time.monotonic() + 5
    while time.monotonic() < deadline and (len(out) < expected or time.monotonic() < idle_until):
        for msg in consumer.consume(500, 0.5):
            if msg.error() is None:
                out.append((int(msg.partition() or 0), msg.value() or b""))
                idle_until = time.monotonic() + 3
    consumer.close()
    return out


def _read_committed_kafka_python(
    bootstrap: str, topic: str, expected: int
) -> list[tuple[int, bytes]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None,
                             isolation_level="read_committed", enable_auto_commit=False,
                             auto_offset_reset="earliest")  # fmt: skip
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 120
    idle_until = time.monotonic() + 5
    while time.monotonic() < deadline and (len(out) < expected or time.monotonic() < idle_until):
        for tp, records in consumer.poll(500).items():
            out += [(tp.partition, r.value) for r in records]
            if records:
                idle_until = time.monotonic() + 3
    consumer.close()
    return out


def _progress_rows(query: Any) -> list[tuple[int, int]]:
    return [(int(p["batchId"]), int(p["numInputRows"])) for p in query.recentProgress]


def test_a_broker_killed_during_a_streaming_copy_loses_and_duplicates_nothing(
    sluice_cluster: EmbeddedCluster, spark_cluster: StandaloneSparkCluster, spark: Any,
    tmp_path: Path,
) -> None:  # fmt: skip
    bootstrap = sluice_cluster.bootstrap_servers
    source, sink = "copy-in", "copy-out"
    _create(bootstrap, source)
    _create(bootstrap, sink)
    history, writer = numbered_producer(bootstrap, source, PARTITIONS, rate_per_s=200)
    began = time.monotonic()
    query = (
        spark.readStream.format("sluice").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source).option("startingOffsets", "earliest").load()
        .select("key", "value", "partition")
        .writeStream.format("sluice").option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink).option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="2 seconds").start()
    )  # fmt: skip
    victim = -1
    try:
        wait_until(lambda: sum(1 for _, n in _progress_rows(query) if n > 0) >= 2, 180,
                   "two micro-batches with rows")  # fmt: skip
        victim = leaders_and_isrs(bootstrap, source)[0][0]
        led = {t: sorted(p for p, (leader, _) in leaders_and_isrs(bootstrap, t).items()
                         if leader == victim) for t in (source, sink)}  # fmt: skip
        batches_before = len(query.recentProgress)
        sluice_cluster.kill_broker(victim)
        killed_at = time.monotonic()
        say(f"killed -9 broker {victim} (leader of {source} {led[source]}, {sink} "
            f"{led[sink]}) after micro-batch {batches_before - 1}, "
            f"{history.acked_count} records acknowledged so far")  # fmt: skip
        wait_until(lambda: sum(1 for b, n in _progress_rows(query)
                               if b >= batches_before and n > 0) >= 2,
                   180, "two micro-batches with rows after the kill")  # fmt: skip
        say(f"the query went on: 2 micro-batches with rows within "
            f"{time.monotonic() - killed_at:.1f} s of the kill")  # fmt: skip
        pending = writer.stop()
        assert pending == 0, f"{pending} sends never completed"
        input_audit = audit(history, bootstrap, source, PARTITIONS)
        assert input_audit.ok, input_audit.anomalies[:5]
        inputs = [(r.partition, r.value or b"") for r in history.reads if r.final]
        total = len(inputs)

        def caught_up() -> bool:
            assert query.isActive, f"the query stopped: {query.exception()}"
            progress = query.lastProgress
            ends = (progress or {}).get("sources", [{}])[0].get("endOffset") or {}
            if isinstance(ends, str):
                import json

                ends = json.loads(ends)
            return sum(int(v) for v in ends.get(source, {}).values()) >= total

        wait_until(caught_up, 240, f"the query to read all {total} input records")
        copied = time.monotonic() - began
    finally:
        writer.stop()
        query.stop()
    assert query.exception() is None
    batches = _progress_rows(query)
    say(f"{total} records copied in {len(batches)} micro-batches in {copied:.1f} s "
        f"(input audit: {input_audit.acked} acknowledged, {input_audit.failed} failed sends, "
        f"nothing lost, duplicated or reordered)")  # fmt: skip

    moved = [r for lines in spark_cluster.task_reads().values() for r in lines
             if r.topic == source and len(r.brokers) > 1]  # fmt: skip
    for r in moved:
        say(
            f"task {source}-{r.partition} [{r.start}, {r.end}) fetched from brokers "
            f"{sorted(r.broker_ids)} (the leadership moved during the read)"
        )

    readers = {
        "confluent-kafka": _read_committed_confluent(bootstrap, sink, total),
        "kafka-python": _read_committed_kafka_python(bootstrap, sink, total),
    }
    rows = (
        spark.read.format("sluice").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", sink).option("kafka.isolation.level", "read_committed").load()
        .select("partition", "value").collect()
    )  # fmt: skip
    readers["sluice source"] = [(int(r["partition"]), bytes(r["value"])) for r in rows]
    for name, outputs in readers.items():
        result = check_exactly_once(inputs, outputs)
        say(f"read_committed with {name}: {result.summary()}")
        assert result.ok, (name, result.summary(), result.missing[:5],
                           list(result.duplicated.items())[:5])  # fmt: skip
    assert victim in BROKERS
