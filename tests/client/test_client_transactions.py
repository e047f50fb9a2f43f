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


def test_prepared_transaction_resumed_by_another_producer(broker: sluice.EmbeddedBroker) -> None:
    """Two-phase commit: producers prepare (flush, no EndTxn) and close; other producers
    with the same transactional.id resume the prepared state and commit or abort it, as
    a Spark driver does with its tasks' transactions. A resume after a newer producer
    took the id over is fenced. Readers: confluent-kafka and kafka-python, read_committed."""
    from support.clients import committed_values_confluent, committed_values_kafka_python

    bootstrap, topic = broker.bootstrap_servers, f"t-{uuid.uuid4().hex[:8]}"
    ids = [f"tx-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    prepared = []
    for n, txn_id in enumerate(ids):
        producer = _producer(bootstrap, txn_id)
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, f"p{n}-{i}".encode(), partition=i % 2)
        state = producer.prepare_transaction(20)
        assert (state.transactional_id, state.producer_id) == (txn_id, state.producer_id)
        with pytest.raises(KafkaException, match="PREPARED"):
            producer.send(topic, b"after prepare")
        producer.close()  # leaves the transaction open
        prepared.append(state)
    assert _read(bootstrap, topic, "read_committed", 0) == []

    committer = Producer({"bootstrap.servers": bootstrap, "transactional.id": ids[0]})
    committer.resume_transaction(prepared[0])
    committer.commit_transaction(20)
    committer.resume_transaction(prepared[0])
    committer.commit_transaction(20)  # committing again is a retry: no error
    with pytest.raises(KafkaException, match="UNINITIALIZED"):
        committer.begin_transaction()  # a borrowed epoch: init_transactions first
    committer.close()
    with Producer({"bootstrap.servers": bootstrap, "transactional.id": ids[1]}) as aborter:
        aborter.resume_transaction(prepared[1])
        aborter.abort_transaction(20)
    _producer(bootstrap, ids[2]).close()  # a newer producer: aborts and fences the third
    with Producer({"bootstrap.servers": bootstrap, "transactional.id": ids[2]}) as late:
        late.resume_transaction(prepared[2])
        with pytest.raises(ProducerFencedException):
            late.commit_transaction(20)
    other = Producer({"bootstrap.servers": bootstrap, "transactional.id": "other"})
    with other, pytest.raises(KafkaException, match=r"transactional\.id"):
        other.resume_transaction(prepared[0])

    expected = [b"p0-0", b"p0-1", b"p0-2"]
    assert _read(bootstrap, topic, "read_committed", 3) == expected
    assert sorted(committed_values_confluent(bootstrap, topic, 2)) == expected
    assert sorted(committed_values_kafka_python(bootstrap, topic, 2)) == expected
    assert len(_read(bootstrap, topic, "read_uncommitted", 9)) == 9


def test_a_failed_record_makes_the_transaction_uncommittable(
    broker: sluice.EmbeddedBroker,
) -> None:
    """The broker rejects the transaction's batch (too large for the topic), or send()
    refuses a record (larger than max.request.size): commit and prepare refuse, abort
    works, and the same producer goes on: the abort bumped its epoch (KIP-360), so the
    rejected batch's sequence leaves no gap."""
    from sluice.client import Admin, NewTopic

    bootstrap, topic = broker.bootstrap_servers, f"t-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, {"max.message.bytes": "2000"})])
    txn_id = f"tx-{uuid.uuid4().hex[:8]}"
    producer = _producer(bootstrap, txn_id)
    epochs = []
    for finish, size in (("commit", 5000), ("prepare", 5000), ("commit", 2_000_000)):
        producer.begin_transaction()
        producer.send(topic, b"ok-before")
        producer.send(topic, b"x" * size)
        with pytest.raises(KafkaException, match=r"Cannot (commit|prepare)"):
            if finish == "commit":
                producer.commit_transaction(20)
            else:
                producer.prepare_transaction(20)
        producer.abort_transaction(20)
        assert producer._transaction_manager is not None
        epochs.append(producer._transaction_manager.producer_id_and_epoch.epoch)
    # Rejected by the broker: the epoch went up; refused by send() (never sent): it stays.
    assert epochs[1] == epochs[0] + 1 and epochs[2] == epochs[1]
    producer.begin_transaction()
    producer.send(topic, b"after")
    producer.send(topic, b"and-more")
    producer.commit_transaction(20)
    producer.close()
    assert _read(bootstrap, topic, "read_committed", 2) == [b"after", b"and-more"]
