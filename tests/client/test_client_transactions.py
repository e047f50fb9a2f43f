"""Sluice's own transactional producer against an embedded broker: commit, abort,
send_offsets_to_transaction, fencing, and read_committed reads with Sluice's consumer."""

from __future__ import annotations

import uuid

import pytest

import sluice
from sluice.base import TopicPartition
from sluice.client import Consumer, Producer
from sluice.client.errors import KafkaException, ProducerFencedException

CONFIG = {"transaction.state.log.num.partitions": "4", "offsets.topic.num.partitions": "4",
          "num.partitions": "2"}  # fmt: skip


@pytest.fixture(scope="module")
def broker_config() -> dict[str, str]:
    return CONFIG


def _producer(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 1, "max.block.ms": 20000})  # fmt: skip
    producer.init_transactions()
    return producer


def _read(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "isolation.level": isolation,
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.assign([TopicPartition(topic, p) for p in range(2)])
    values: list[bytes] = []
    for _ in range(100):
        values += [r.value for r in consumer.poll(0.1) if r.value is not None]
        if len(values) >= expected:
            break
    values += [r.value for r in consumer.poll(0.3) if r.value is not None]
    consumer.close()
    return sorted(values)


def test_commit_abort_and_read_committed(broker: sluice.EmbeddedBroker) -> None:
    bootstrap, topic = broker.bootstrap_servers, f"t-{uuid.uuid4().hex[:8]}"
    producer = _producer(bootstrap, f"tx-{uuid.uuid4().hex[:8]}")
    with pytest.raises(KafkaException):
        producer.send(topic, b"outside")  # not in a transaction
    producer.begin_transaction()
    for i in range(4):
        producer.send(topic, f"c{i}".encode(), key=f"k{i}".encode())
    producer.commit_transaction(20)
    producer.begin_transaction()
    producer.send(topic, b"a0")
    producer.abort_transaction(20)
    producer.begin_transaction()
    producer.commit_transaction(20)  # empty: nothing to end on the broker
    producer.close()
    assert _read(bootstrap, topic, "read_committed", 4) == [b"c0", b"c1", b"c2", b"c3"]
    assert _read(bootstrap, topic, "read_uncommitted", 5) == [b"a0", b"c0", b"c1", b"c2", b"c3"]


def test_send_offsets_and_fencing(broker: sluice.EmbeddedBroker) -> None:
    bootstrap, topic = broker.bootstrap_servers, f"t-{uuid.uuid4().hex[:8]}"
    group, txn_id = f"g-{uuid.uuid4().hex[:8]}", f"tx-{uuid.uuid4().hex[:8]}"
    first = _producer(bootstrap, txn_id)
    first.begin_transaction()
    first.send(topic, b"x", partition=0)
    first.send_offsets_to_transaction({TopicPartition(topic, 0): 17}, group)
    first.commit_transaction(20)
    admin = sluice.client.Admin({"bootstrap.servers": bootstrap})
    offsets = admin.list_group_offsets(group)
    assert offsets[TopicPartition(topic, 0)].offset == 17
    first.begin_transaction()
    first.send(topic, b"zombie", partition=0)
    first.flush(20)
    second = _producer(bootstrap, txn_id)  # fences the first and aborts its transaction
    with pytest.raises(ProducerFencedException):
        first.send_offsets_to_transaction({TopicPartition(topic, 0): 99}, group)
    second.begin_transaction()
    second.send_offsets_to_transaction({TopicPartition(topic, 0): 20}, group)
    second.abort_transaction(20)
    assert admin.list_group_offsets(group)[TopicPartition(topic, 0)].offset == 17
    admin.close()
    first.close()
    second.close()
    assert _read(bootstrap, topic, "read_committed", 1) == [b"x"]
