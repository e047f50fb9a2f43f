"""flush.messages=1 with group commit (sluice.log.group_flush), proven with real clients:
every record a producer has been told is written is below the log's recovery point (on
disk) when the acknowledgement arrives, and the broker syncs in rounds, off its loop."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

import sluice

TOPIC = "durable"
PARTITIONS = 2
RECORDS = 150


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"log.flush.interval.messages": 1}


@pytest.fixture(scope="module", autouse=True)
def durable_topic(broker: sluice.EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(15)


def flushed_to(broker: sluice.EmbeddedBroker, partition: int) -> tuple[int, int]:
    """The partition's (recovery point, log end offset), read on the broker's loop."""

    def read() -> tuple[int, int]:
        log = broker.broker.log_manager.get_log(TOPIC, partition)
        assert log is not None
        return log.recovery_point, log.log_end_offset

    result: tuple[int, int] = broker.call(read)
    return result


def rounds(broker: sluice.EmbeddedBroker) -> int:
    count: int = broker.call(lambda: broker.broker.log_manager.flush_group.rounds)
    return count


@pytest.mark.parametrize("acks", ["1", "all"])
def test_confluent_kafka_acknowledged_records_are_flushed(
    broker: sluice.EmbeddedBroker, acks: str
) -> None:
    before = rounds(broker)
    producer = Producer({
        "bootstrap.servers": broker.bootstrap_servers, "acks": acks, "linger.ms": 1,
        "log_level": 0,
    })  # fmt: skip
    unflushed: list[Any] = []
    delivered: list[tuple[int, int]] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        assert err is None, err
        recovery_point, _ = flushed_to(broker, msg.partition())
        delivered.append((msg.partition(), msg.offset()))
        if recovery_point <= msg.offset():
            unflushed.append((msg.partition(), msg.offset(), recovery_point))

    for i in range(RECORDS):
        producer.produce(TOPIC, f"r{i}".encode(), partition=i % PARTITIONS, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert len(delivered) == RECORDS and unflushed == []
    for partition in range(PARTITIONS):
        recovery_point, end = flushed_to(broker, partition)
        assert recovery_point == end
    assert rounds(broker) > before


def test_kafka_python_acknowledged_records_are_flushed(broker: sluice.EmbeddedBroker) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1, linger_ms=1)
    futures = [
        producer.send(TOPIC, f"k{i}".encode(), partition=i % PARTITIONS) for i in range(RECORDS)
    ]
    for future in futures:
        metadata = future.get(timeout=30)
        recovery_point, _ = flushed_to(broker, metadata.partition)
        assert recovery_point > metadata.offset
    producer.close()
