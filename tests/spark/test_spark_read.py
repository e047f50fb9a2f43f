"""The ``sluice`` source on a real local Spark session: batch reads, streaming reads with
a checkpoint, maxOffsetsPerTrigger, availableNow, new partitions and failOnDataLoss."""

from __future__ import annotations

import datetime
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import sluice
from sluice.client import Admin, NewTopic, Producer

pytestmark = pytest.mark.timeout(240)


def _create(broker: sluice.EmbeddedBroker, topic: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def _produce(
    broker: sluice.EmbeddedBroker, topic: str, count: int, partition: int | None = None,
    first: int = 0,
) -> None:  # fmt: skip
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for i in range(first, first + count):
            producer.send(
                topic, f"v{i}".encode(), key=f"k{i}".encode(), partition=partition,
                headers=[("n", str(i).encode()), ("empty", None)],
            )  # fmt: skip
        producer.flush(30)


def _reader(spark: Any, broker: sluice.EmbeddedBroker, topic: str, **options: str) -> Any:
    reader = spark.read.format("sluice").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    reader = reader.option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_offsets_columns_and_headers(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str
) -> None:
    _create(broker, topic, 2)
    _produce(broker, topic, 6, partition=0)
    _produce(broker, topic, 4, partition=1, first=6)

    df = _reader(spark, broker, topic, includeHeaders="true")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"),
        ("offset", "bigint"), ("timestamp", "timestamp"), ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
    ]  # fmt: skip
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset) for r in rows] == [(0, i) for i in range(6)] + [
        (1, i) for i in range(4)
    ]
    first = rows[0]
    assert (first.key, first.value, first.topic, first.timestampType) == (b"k0", b"v0", topic, 0)
    assert isinstance(first.timestamp, datetime.datetime)
    assert [(h.key, h.value) for h in first.headers] == [("n", b"0"), ("empty", None)]
    assert [r.value for r in rows if r.partition == 1] == [b"v6", b"v7", b"v8", b"v9"]

    # JSON offsets: -2 is earliest, -1 latest; endingOffsets is exclusive
    ranged = _reader(
        spark, broker, topic,
        startingOffsets=json.dumps({topic: {"0": 2, "1": -2}}),
        endingOffsets=json.dumps({topic: {"0": 5, "1": -1}}),
    ).select("partition", "offset").collect()  # fmt: skip
    assert sorted((r.partition, r.offset) for r in ranged) == [(0, 2), (0, 3), (0, 4)] + [
        (1, i) for i in range(4)
    ]
    # assign reads only the named partitions; no headers column unless asked
    assigned = (
        spark.read.format("sluice")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("assign", json.dumps({topic: [1]}))
        .option("endingOffsets", "latest")
        .load()
    )
    assert "headers" not in assigned.columns
    # a pattern must match the whole topic name
    pattern = (
        spark.read.format("sluice")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribePattern", re.escape(topic[:-1]) + ".")
        .load()
    )
    assert pattern.count() == 10
    assert (
        spark.read.format("sluice")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribePattern", re.escape(topic[:-1]))
        .load()
        .count()
        == 0
    )
    assert sorted(r.offset for r in assigned.select("offset").collect()) == [0, 1, 2, 3]

    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("sluice").schema("value binary").option(
            "kafka.bootstrap.servers", broker.bootstrap_servers
        ).option("subscribe", topic).load().collect()
    with pytest.raises(Exception, match="startingOffsets=latest is for streaming"):
        _reader(spark, broker, topic, startingOffsets="latest").collect()


def _stream(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str, out: Path, checkpoint: Path,
    **options: str,
) -> Any:  # fmt: skip
    reader = (
        spark.readStream.format("sluice")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "availableNow query did not stop by itself"
    if query.exception() is not None:
        raise query.exception()
    return query


def test_stream_restart_from_checkpoint_reads_every_record_once(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    _create(broker, topic, 2)
    _produce(broker, topic, 40)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    _stream(spark, broker, topic, out, checkpoint)
    assert spark.read.parquet(str(out)).count() == 40

    # more records, and a partition added while the query was down
    _produce(broker, topic, 30, first=40)
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_partitions({topic: 3})
    _produce(broker, topic, 5, partition=2, first=70)
    query = _stream(spark, broker, topic, out, checkpoint, maxOffsetsPerTrigger="10")

    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 35 and max(sizes) <= 10 and len(sizes) == 4
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == 75
    assert len({(r.partition, r.offset) for r in rows}) == 75
    assert sorted(int(r.value[1:]) for r in rows) == list(range(75))
    assert sorted(r.offset for r in rows if r.partition == 2) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("fail", [True, False])
def test_fail_on_data_loss_after_delete_records(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str, tmp_path: Path, fail: bool
) -> None:
    _create(broker, topic, 1)
    _produce(broker, topic, 5)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    _stream(spark, broker, topic, out, checkpoint)
    _produce(broker, topic, 15, first=5)
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        assert admin.delete_records({(topic, 0): 12}) == {(topic, 0): 12}

    if fail:
        with pytest.raises(Exception, match="failOnDataLoss") as info:
            _stream(spark, broker, topic, out, checkpoint)
        assert "log now starts at 12" in str(info.value)
        assert spark.read.parquet(str(out)).count() == 5
        shutil.rmtree(checkpoint)
    else:
        _stream(spark, broker, topic, out, checkpoint, failOnDataLoss="false")
        offsets = sorted(r.offset for r in spark.read.parquet(str(out)).collect())
        assert offsets == [0, 1, 2, 3, 4, *range(12, 20)]


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_batch_read_of_compressed_transactions(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str, codec: str
) -> None:
    """confluent-kafka writes compressed batches in a committed and an aborted
    transaction; read_committed gets the committed ones only, read_uncommitted both."""
    import confluent_kafka

    _create(broker, topic, 1)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "compression.type": codec,
            "transactional.id": f"tx-{topic}",
            "linger.ms": 5,
        }
    )
    producer.init_transactions(30)
    for commit in (True, False, True):
        producer.begin_transaction()
        for i in range(50):
            producer.produce(topic, b"%s-%d" % (b"c" if commit else b"a", i), b"k%d" % i,
                             headers=[("i", b"%d" % i)])  # fmt: skip
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    committed = _reader(spark, broker, topic, **{"kafka.isolation.level": "read_committed"})
    values = [r.value for r in committed.orderBy("offset").collect()]
    assert values == [b"c-%d" % i for i in range(50)] * 2
    everything = _reader(spark, broker, topic, includeHeaders="true").orderBy("offset").collect()
    assert [r.value[:1] for r in everything] == [b"c"] * 50 + [b"a"] * 50 + [b"c"] * 50
    assert [(h.key, h.value) for h in everything[7].headers] == [("i", b"7")]
