"""The ``sluice`` sink on a real local Spark session: partitioning by murmur2 of the key,
headers, a replayed micro-batch published once, and an aborted write publishing nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import sluice
from sluice.client import Admin, Consumer, ConsumerRecord, NewTopic, Producer, TopicPartition
from sluice.client.producer.partitioner import murmur2

pytestmark = pytest.mark.timeout(240)


def _create(broker: sluice.EmbeddedBroker, topic: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def _read_all(broker: sluice.EmbeddedBroker, topic: str, partitions: int) -> list[ConsumerRecord]:
    """Every record of ``topic`` with Sluice's consumer, up to the end offsets of now."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: list[ConsumerRecord] = []
    config = {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        ends = consumer.end_offsets(tps)
        consumer.assign(tps)
        while any(consumer.position(tp) < (ends[tp] or 0) for tp in tps):
            out.extend(consumer.poll(1.0))
    return out


def _expected_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


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
    # a topic column and an explicit partition column win over the defaults
    spark.createDataFrame(
        [(topic, 2, "pinned")], "topic string, partition int, value string"
    ).write.format("sluice").option("kafka.bootstrap.servers", broker.bootstrap_servers).mode(
        "append"
    ).save()

    records = _read_all(broker, topic, 3)
    assert len(records) == 61
    keyed = [r for r in records if r.key is not None]
    assert sorted(r.value for r in keyed) == sorted(f"event {i}".encode() for i in range(60))
    for r in keyed:
        assert r.partition == _expected_partition(r.key, 3), r
        i = r.key.decode().split("-")[1]
        assert r.headers == [("source", b"spark"), ("i", i.encode())]
    (pinned,) = [r for r in records if r.key is None]
    assert (pinned.partition, pinned.value) == (2, b"pinned")


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

    def run() -> Any:
        query = (
            spark.readStream.format("sluice")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .load()
            .selectExpr("key", "value", "headers")
            .writeStream.format("sluice")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("topic", sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180)
        assert query.exception() is None
        return query

    first = run()
    assert [p["batchId"] for p in first.recentProgress if p["numInputRows"]] == [0]
    assert len(_read_all(broker, sink, 2)) == 30
    # Force Spark to replay batch 0: forget that it committed it (as after a crash
    # between the sink's commit and Spark's own commit log write).
    (checkpoint / "commits" / "0").unlink()
    (checkpoint / "commits" / ".0.crc").unlink(missing_ok=True)
    second = run()
    assert [p["batchId"] for p in second.recentProgress if p["numInputRows"]] == [0]
    records = _read_all(broker, sink, 2)
    assert len(records) == 30
    assert sorted(r.value for r in records) == sorted(f"m{i}".encode() for i in range(30))
    assert all(r.headers == [("h", b"1")] for r in records)
    for r in records:
        assert r.key is not None and r.partition == _expected_partition(r.key, 2)


def test_failed_task_aborts_and_publishes_nothing(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    _create(broker, topic, 1)
    good = [(topic, f"ok {i}") for i in range(20)]
    bad = [(None, "no topic")]  # a null topic and no topic option: that task fails
    df = spark.createDataFrame(good + bad, "topic string, value string").repartition(2)
    with pytest.raises(Exception, match="null topic and the sink has no topic option"):
        df.write.format("sluice").option("kafka.bootstrap.servers", broker.bootstrap_servers).mode(
            "append"
        ).save()
    assert _read_all(broker, topic, 1) == []

    # the same in a streaming micro-batch: the batch aborts, the query fails, nothing lands
    source = f"{topic}-in"
    _create(broker, source, 2)
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for i in range(10):
            producer.send(source, b"bad" if i == 7 else b"ok", partition=i % 2)
        producer.flush(30)
    query = (
        spark.readStream.format("sluice")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr(
            f"CASE WHEN CAST(value AS STRING) = 'bad' THEN NULL ELSE '{topic}' END AS topic",
            "value",
        )
        .writeStream.format("sluice")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="null topic"):
        query.awaitTermination(180)
    assert _read_all(broker, topic, 1) == []

    with pytest.raises(Exception, match="needs a 'value' column"):
        spark.createDataFrame([(topic,)], "topic string").write.format("sluice").option(
            "kafka.bootstrap.servers", broker.bootstrap_servers
        ).mode("append").save()


def test_streaming_write_aborts_a_dead_drivers_partial_publish(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    """A driver that died while publishing a micro-batch left an open transaction; the
    next driver's producer (same transactional.id, sluice-spark-<query id>) fences it
    and aborts it, so read_committed readers see every row once and none of the partial
    publish, which read_uncommitted readers do see."""
    source, sink = f"{topic}-in", f"{topic}-out"
    _create(broker, source, 1)
    _create(broker, sink, 1)
    servers = broker.bootstrap_servers

    def feed(lo: int, hi: int) -> None:
        with Producer({"bootstrap.servers": servers}) as producer:
            for i in range(lo, hi):
                producer.send(source, f"m{i}".encode())
            producer.flush(30)

    checkpoint = tmp_path / "checkpoint"

    def run() -> Any:
        query = (
            spark.readStream.format("sluice")
            .option("kafka.bootstrap.servers", servers)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("value")
            .writeStream.format("sluice")
            .option("kafka.bootstrap.servers", servers)
            .option("topic", sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180)
        assert query.exception() is None
        return query

    feed(0, 10)
    query_id = run().id
    zombie = Producer(
        {"bootstrap.servers": servers, "transactional.id": f"sluice-spark-{query_id}"}
    )
    zombie.init_transactions()
    zombie.begin_transaction()
    for i in range(5):
        zombie.send(sink, f"partial{i}".encode())
    zombie.flush(30)  # written, never committed: the driver "died" here
    feed(10, 20)
    run()  # batch 1: fences the zombie, aborts its transaction, publishes once
    zombie.close(0)

    committed = (
        spark.read.format("sluice")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", sink)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .selectExpr("CAST(value AS STRING) AS v")
        .collect()
    )
    assert sorted(r.v for r in committed) == sorted(f"m{i}" for i in range(20))
    everything = [r.value for r in _read_all(broker, sink, 1)]
    assert sorted(v for v in everything if v.startswith(b"partial")) == [
        f"partial{i}".encode() for i in range(5)
    ]
