"""The ``sluice`` source's timestamp, splitting and micro-batch options on a real local
Spark session: startingTimestamp / endingTimestamp and their per-partition forms with
startingOffsetsByTimestampStrategy, minPartitions and maxRecordsPerPartition in batch
reads; in streams, minOffsetsPerTrigger holding micro-batches back (capped by
maxOffsetsPerTrigger, split by maxRecordsPerPartition) until enough records arrive or
maxTriggerDelay passes, and the latest offset in the progress from which the
offsets-behind-latest metrics are computed."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import sluice
from sluice.client import Admin, NewTopic, Producer
from sluice.spark import source_metrics

pytestmark = pytest.mark.timeout(240)

STEP_MS = 1000


def _create(broker: sluice.EmbeddedBroker, topic: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def _produce(
    broker: sluice.EmbeddedBroker, topic: str, partition: int, count: int, base_ms: int | None
) -> None:
    """``count`` records; with ``base_ms`` the i-th has timestamp base_ms + i * STEP_MS."""
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for i in range(count):
            ts = None if base_ms is None else base_ms + i * STEP_MS
            producer.send(topic, f"{partition}:{i}".encode(), partition=partition, timestamp=ts)
        producer.flush(30)


def _read(spark: Any, broker: sluice.EmbeddedBroker, topic: str, **options: str) -> Any:
    reader = (
        spark.read.format("sluice")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _offsets(df: Any) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_batch_read_by_timestamp_and_split_ranges(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str
) -> None:
    _create(broker, topic, 2)
    base = int(time.time() * 1000) - 60_000  # recent, so retention keeps them
    for partition in (0, 1):
        _produce(broker, topic, partition, 10, base)
    at = lambda i: str(base + i * STEP_MS)  # noqa: E731

    # one time for every partition: the first offset at or after it (the end exclusive)
    assert _offsets(
        _read(spark, broker, topic, startingTimestamp=at(5), endingTimestamp=at(8))
    ) == [(p, o) for p in (0, 1) for o in range(5, 8)]
    # per partition; an end no record reaches is the latest offset
    per = _read(
        spark, broker, topic,
        startingOffsetsByTimestamp=json.dumps({topic: {"0": base + 1500, "1": base + 8000}}),
        endingOffsetsByTimestamp=json.dumps({topic: {"0": base + 4000, "1": base + 99_000}}),
    )  # fmt: skip
    assert _offsets(per) == [(0, 2), (0, 3), (1, 8), (1, 9)]
    # a start no record reaches fails, unless the strategy says latest
    with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
        _read(spark, broker, topic, startingTimestamp=at(99)).collect()
    none = _read(
        spark, broker, topic, startingTimestamp=at(99), startingOffsetsByTimestampStrategy="latest"
    )
    assert none.count() == 0

    # minPartitions: 2 partitions of 10 records become 6 tasks; every record read once
    six = _read(spark, broker, topic, minPartitions="6")
    assert six.rdd.getNumPartitions() == 6
    assert _offsets(six) == [(p, o) for p in (0, 1) for o in range(10)]
    # maxRecordsPerPartition: ceil(10 / 3) = 4 tasks a partition
    small = _read(spark, broker, topic, maxRecordsPerPartition="3", startingTimestamp=at(0))
    assert small.rdd.getNumPartitions() == 8
    assert small.count() == 20


def _rows(spark: Any, name: str) -> int:
    return int(spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0].n)


def _stream(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str, name: str, **options: str
) -> Any:
    reader = (
        spark.readStream.format("sluice")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .select("offset")
        .writeStream.format("memory")
        .queryName(name)
        .trigger(processingTime="300 milliseconds")
        .start()
    )


def test_stream_min_offsets_per_trigger_and_lag_metrics(
    spark: Any, broker: sluice.EmbeddedBroker, topic: str
) -> None:
    _create(broker, topic, 1)
    _produce(broker, topic, 0, 4, None)
    name = f"min_{topic.replace('-', '_')}"
    query = _stream(
        spark, broker, topic, name, minOffsetsPerTrigger="5", maxOffsetsPerTrigger="8",
        maxTriggerDelay="1h", maxRecordsPerPartition="3",
    )  # fmt: skip
    try:
        # the first trigger always runs (as in Spark): 4 records, fewer than the minimum
        query.processAllAvailable()
        assert _rows(spark, name) == 4
        # 2 more: held back, fewer than minOffsetsPerTrigger; 3 more make 5 and go
        _produce(broker, topic, 0, 2, None)
        query.processAllAvailable()
        assert _rows(spark, name) == 4
        _produce(broker, topic, 0, 3, None)
        query.processAllAvailable()
        assert _rows(spark, name) == 9
        # 10 more: capped at maxOffsetsPerTrigger, the last 2 held back again
        _produce(broker, topic, 0, 10, None)
        query.processAllAvailable()
        assert _rows(spark, name) == 17
        sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        assert sizes == [4, 5, 8]
        # micro-batches split into tasks of at most 3 offsets still read each record once
        read = [r.offset for r in spark.sql(f"SELECT offset FROM {name}").collect()]
        assert sorted(read) == list(range(17))
        capped = next(p for p in query.recentProgress if p["numInputRows"] == 8)
        source = capped["sources"][0]
        assert json.loads(source["latestOffset"]) == {topic: {"0": 19}}
        assert json.loads(source["endOffset"]) == {topic: {"0": 17}}
        assert source_metrics(source) == {
            "minOffsetsBehindLatest": "2", "maxOffsetsBehindLatest": "2",
            "avgOffsetsBehindLatest": "2.0",
        }  # fmt: skip
    finally:
        query.stop()

    # maxTriggerDelay lets a micro-batch below the minimum go once it has passed
    name = f"delay_{topic.replace('-', '_')}"
    query = _stream(spark, broker, topic, name, minOffsetsPerTrigger="100", maxTriggerDelay="1s")
    try:
        query.processAllAvailable()
        assert _rows(spark, name) == 19
        _produce(broker, topic, 0, 1, None)
        deadline = time.monotonic() + 60
        while _rows(spark, name) < 20:
            assert time.monotonic() < deadline, "maxTriggerDelay did not release the batch"
            time.sleep(0.2)
    finally:
        query.stop()
