"""confluent-kafka (librdkafka) against a real broker process, with default settings."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.brokers import BrokerProcess
from support.waiting import wait_until


def create(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs)])
    futures[name].result(30)


def produce(bootstrap: str, topic: str, records: list[dict], **conf: object) -> list:
    producer = Producer({"bootstrap.servers": bootstrap, **conf})
    reports: list = []
    for r in records:
        producer.produce(topic, on_delivery=lambda err, msg: reports.append((err, msg)), **r)
    assert producer.flush(30) == 0
    assert [err for err, _ in reports if err is not None] == []
    return [msg for _, msg in reports]


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list = []
    deadline = time.monotonic() + 30
    while len(out) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        out.append(msg)
    consumer.close()
    return out


def test_round_trip_keys_headers_timestamps(broker: BrokerProcess, topic: str) -> None:
    create(broker.bootstrap, topic, 3)
    records = [
        {"key": f"k{i}".encode(), "value": f"v{i}".encode(), "headers": [("h", f"{i}".encode())],
         "timestamp": 1_700_000_000_000 + i}
        for i in range(60)
    ]  # fmt: skip
    delivered = produce(broker.bootstrap, topic, records)
    assert len(delivered) == 60
    got = consume_all(broker.bootstrap, topic, 3, 60)
    assert sorted(m.value() for m in got) == sorted(r["value"] for r in records)
    by_value = {m.value(): m for m in got}
    for r in records:
        m = by_value[r["value"]]
        assert m.key() == r["key"] and m.headers() == r["headers"]
        assert m.timestamp() == (1, r["timestamp"])  # (CreateTime, ms)
    # Keyed records land on one partition per key, in offset order.
    for p in range(3):
        offsets = [m.offset() for m in got if m.partition() == p]
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_codecs(broker: BrokerProcess, topic: str, codec: str) -> None:
    create(broker.bootstrap, topic)
    records = [{"value": (f"{codec}-{i}-" * 20).encode()} for i in range(200)]
    produce(broker.bootstrap, topic, records, **{"compression.type": codec, "linger.ms": 20})
    got = consume_all(broker.bootstrap, topic, 1, 200)
    assert [m.value() for m in got] == [r["value"] for r in records]


@pytest.mark.parametrize("partitions", [1, 8, 64])
def test_partition_counts(broker: BrokerProcess, topic: str, partitions: int) -> None:
    create(broker.bootstrap, topic, partitions)
    records = [
        {"value": f"{i}".encode(), "partition": i % partitions} for i in range(partitions * 5)
    ]
    produce(broker.bootstrap, topic, records)
    got = consume_all(broker.bootstrap, topic, partitions, len(records))
    assert len(got) == len(records)
    assert {m.partition() for m in got} == set(range(partitions))


def test_large_batches_are_served_intact(broker: BrokerProcess, topic: str) -> None:
    # Slices of 64 KiB and more leave the broker with sendfile, straight from the log.
    create(broker.bootstrap, topic)
    records = [{"value": (b"%06d" % i) * 170} for i in range(3000)]  # about 1 KiB each
    produce(broker.bootstrap, topic, records, **{"linger.ms": 50, "batch.size": 1 << 20})
    got = consume_all(broker.bootstrap, topic, 1, 3000)
    assert [m.value() for m in got] == [r["value"] for r in records]
    assert [m.offset() for m in got] == list(range(3000))


def test_list_offsets(broker: BrokerProcess, topic: str) -> None:
    create(broker.bootstrap, topic)
    base = 1_800_000_000_000
    produce(
        broker.bootstrap, topic, [{"value": b"x", "timestamp": base + 10 * i} for i in range(10)]
    )
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lo"})
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
    found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 35)], timeout=10)
    assert found[0].offset == 4  # first record with timestamp >= base + 35
    later = consumer.offsets_for_times([TopicPartition(topic, 0, base + 10_000)], timeout=10)
    assert later[0].offset == -1  # none that late: the end
    consumer.close()


def test_admin_create_describe_delete(broker: BrokerProcess, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1, config={"retention.ms": "60000"})])[topic].result(30)
    again = admin.create_topics([NewTopic(topic, 1, 1)])[topic]
    with pytest.raises(Exception) as info:
        again.result(30)
    assert info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    meta = admin.list_topics(timeout=10)
    assert len(meta.topics[topic].partitions) == 4
    assert all(p.leader == 0 and p.isrs == [0] for p in meta.topics[topic].partitions.values())
    admin.delete_topics([topic])[topic].result(30)
    wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, 10, "deletion")


def test_invalid_topic_names_are_rejected(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for bad in ["bad name", "a" * 250, "..", "no/slash"]:
        with pytest.raises(Exception) as info:
            admin.create_topics([NewTopic(bad, 1, 1)])[bad].result(30)
        assert info.value.args[0].code() == KafkaError.TOPIC_EXCEPTION


def test_long_poll_blocks_then_returns_early(broker: BrokerProcess, topic: str) -> None:
    create(broker.bootstrap, topic)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "lp", "fetch.wait.max.ms": 10_000,
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    # Let the consumer reach its steady state of long-poll fetches on the empty partition.
    assert consumer.poll(1.0) is None
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    sent = time.monotonic()
    producer.produce(topic, b"wake")
    producer.flush(10)
    msg = None
    while msg is None and time.monotonic() - sent < 10:
        msg = consumer.poll(0.05)
    received = time.monotonic() - sent
    consumer.close()
    assert msg is not None and msg.value() == b"wake"
    # Woken by the append rather than the 10-s timeout (half of it: a shared, loaded CI box
    # can stall any process for a few hundred milliseconds).
    assert received < 5, f"record took {received:.3f}s: fetch was not woken early"
