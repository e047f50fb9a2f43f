"""kafka-python and aiokafka (pure-Python clients) against a real broker process."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTP
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTP
from kafka.admin import NewTopic

from support.brokers import BrokerProcess


def kp_create(bootstrap: str, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_round_trip(broker: BrokerProcess, topic: str, codec: str | None) -> None:
    kp_create(broker.bootstrap, topic, 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec)
    futures = [
        producer.send(
            topic, key=b"k%d" % (i % 4), value=b"v%d" % i, headers=[("n", b"%d" % i)],
            timestamp_ms=1_700_000_000_000 + i,
        )
        for i in range(40)
    ]  # fmt: skip
    producer.flush(30)
    metas = [f.get(timeout=30) for f in futures]
    producer.close()
    assert all(m.offset >= 0 for m in metas)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    consumer.assign([KpTP(topic, 0), KpTP(topic, 1)])
    got = []
    for msg in consumer:
        got.append(msg)
        if len(got) == 40:
            break
    end = consumer.end_offsets([KpTP(topic, 0), KpTP(topic, 1)])
    found = consumer.offsets_for_times({KpTP(topic, metas[5].partition): 1_700_000_000_005})
    consumer.close()
    assert sorted(m.value for m in got) == sorted(b"v%d" % i for i in range(40))
    assert all(m.headers == [("n", m.value[1:])] for m in got)
    assert all(m.timestamp == 1_700_000_000_000 + int(m.value[1:]) for m in got)
    assert sum(end.values()) == 40
    assert found[KpTP(topic, metas[5].partition)].offset == metas[5].offset


async def _aiokafka_round_trip(bootstrap: str, topic: str, codec: str | None) -> list:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec)
    await producer.start()
    try:
        for i in range(30):
            await producer.send(topic, value=b"a%d" % i, key=b"k", headers=[("x", b"y")])
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([AioTP(topic, 0)])
        await consumer.seek_to_beginning()
        got: list = []
        async with asyncio.timeout(30):
            while len(got) < 30:
                batch = await consumer.getmany(timeout_ms=1000)
                for records in batch.values():
                    got.extend(records)
        return got
    finally:
        await consumer.stop()


@pytest.mark.parametrize("codec", [None, "gzip", "lz4", "zstd"])
def test_aiokafka_round_trip(broker: BrokerProcess, topic: str, codec: str | None) -> None:
    kp_create(broker.bootstrap, topic, 1)
    got = asyncio.run(_aiokafka_round_trip(broker.bootstrap, topic, codec))
    assert [m.value for m in got] == [b"a%d" % i for i in range(30)]
    assert [m.offset for m in got] == list(range(30))
    assert all(m.key == b"k" and list(m.headers) == [("x", b"y")] for m in got)
