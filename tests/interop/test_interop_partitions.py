"""Many partitions on one ``sluice broker`` process: thousands of them cost next to no
open files (each segment file is opened when used, and at most ``log.open.files.max``
stay open), a creation that cannot be served leaves nothing registered, and a late
partition works with confluent-kafka and kafka-python, before and after a restart."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from support.brokers import BrokerProcess
from support.clients import consume_confluent, consume_kafka_python
from support.waiting import wait_until

PARTITIONS = 3000
CACHED = 64  # log.open.files.max of these brokers


def open_files(broker: BrokerProcess) -> int:
    assert broker.proc is not None
    return len(os.listdir(f"/proc/{broker.proc.pid}/fd"))


def create(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30) -> KafkaError | None:
    """CreateTopics through confluent-kafka's admin client: None, or the error answered."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics(
        [NewTopic(topic, partitions, 1)], operation_timeout=timeout_s, request_timeout=60
    )[topic]
    try:
        future.result(90)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error
    return None


def partition_count(bootstrap: str, topic: str) -> int | None:
    """The topic's partitions in a Metadata answer for all topics (one naming the topic
    could create it: auto.create.topics.enable)."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    found = metadata.topics.get(topic)
    return None if found is None or found.error is not None else len(found.partitions)


def produce_to(bootstrap: str, topic: str, records: list[tuple[int, bytes]]) -> None:
    """Produce ``(partition, value)`` records with confluent-kafka, acks=all."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition, value in records:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(30) == 0


def produce_kafka_python(bootstrap: str, topic: str, partition: int, value: bytes) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    producer.send(topic, value, partition=partition).get(30)
    producer.close()


def values(consumed: list[tuple[object, bytes | None, object, object]]) -> list[bytes | None]:
    return [value for _, value, _, _ in consumed]


def test_thousands_of_partitions_cost_few_files_and_survive_a_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", log_open_files_max=str(CACHED)).start()
    try:
        before = open_files(broker)
        assert create(broker.bootstrap, "many", PARTITIONS) is None
        assert partition_count(broker.bootstrap, "many") == PARTITIONS
        assert open_files(broker) - before < 10  # a new partition is a directory alone
        late = PARTITIONS - 1
        produce_to(broker.bootstrap, "many", [(late, b"c1"), (late, b"c2")])
        produce_kafka_python(broker.bootstrap, "many", late, b"k1")
        assert values(consume_confluent(broker.bootstrap, "many", 3, late)) == [b"c1", b"c2", b"k1"]
        assert values(consume_kafka_python(broker.bootstrap, "many", 3, late)) == [
            b"c1",
            b"c2",
            b"k1",
        ]
        # Far more partitions written than descriptors cached: each reopened when read.
        spread = list(range(0, PARTITIONS, PARTITIONS // (3 * CACHED)))
        produce_to(broker.bootstrap, "many", [(p, b"p%d" % p) for p in spread])
        assert open_files(broker) - before <= CACHED + 10
        assert late not in spread
        for p in spread[:: len(spread) // 8]:
            assert values(consume_confluent(broker.bootstrap, "many", 1, p)) == [b"p%d" % p]
        assert broker.stop() == 0

        broker.start()
        assert partition_count(broker.bootstrap, "many") == PARTITIONS
        after_restart = open_files(broker)
        assert after_restart <= before + 10 and after_restart / PARTITIONS <= 1.1
        assert values(consume_kafka_python(broker.bootstrap, "many", 3, late)) == [
            b"c1",
            b"c2",
            b"k1",
        ]
        produce_to(broker.bootstrap, "many", [(late, b"after")])
        got = values(consume_confluent(broker.bootstrap, "many", 4, late))
        assert got == [b"c1", b"c2", b"k1", b"after"]
    finally:
        broker.stop()


def test_what_cannot_be_served_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, max_broker_partitions="2000").start()
    try:
        error = create(broker.bootstrap, "too-many", 2500)
        assert error is not None and error.code() == KafkaError.POLICY_VIOLATION
        assert "max.broker.partitions=2000" in error.str()
        assert create(broker.bootstrap, "fits", 900) is None  # what was refused took no room
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        more = admin.create_partitions([NewPartitions("fits", 2100)])["fits"]
        with pytest.raises(KafkaException) as refused:
            more.result(30)
        assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION
        # A file where a partition's directory goes: the creation fails part way (the
        # batches before it were made), is rolled back and answered; the failure takes
        # the log dir offline, as any I/O error does, until the broker restarts.
        (data / "blocked-700").write_bytes(b"")
        error = create(broker.bootstrap, "blocked", 900)
        assert error is not None and error.code() == KafkaError.KAFKA_STORAGE_ERROR
        assert "Nothing was created" in error.str()
        for topic in ("too-many", "blocked"):
            assert partition_count(broker.bootstrap, topic) is None
        made = [p.name for p in data.iterdir() if p.name.startswith(("too-many-", "blocked-"))]
        assert made == ["blocked-700"]
        assert broker.stop() == 0
        (data / "blocked-700").unlink()
        (data / "ghost-3").mkdir()  # a partition log of no topic (a creation cut short)
        broker.start()  # nothing of the refused is found at the next start, nor the ghost
        assert partition_count(broker.bootstrap, "blocked") is None
        assert partition_count(broker.bootstrap, "fits") == 900
        assert not (data / "ghost-3").exists()
        assert create(broker.bootstrap, "blocked", 900) is None
    finally:
        broker.stop()


def test_a_creation_past_its_timeout_goes_on(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        started = time.monotonic()
        error = create(broker.bootstrap, "slow", 5000, timeout_s=0.001)
        assert error is not None and error.code() == KafkaError.REQUEST_TIMED_OUT
        assert time.monotonic() - started < 5
        wait_until(lambda: partition_count(broker.bootstrap, "slow") == 5000, 60, "created")
        produce_to(broker.bootstrap, "slow", [(4999, b"late")])
        assert values(consume_confluent(broker.bootstrap, "slow", 1, 4999)) == [b"late"]
        error = create(broker.bootstrap, "slow", 10)
        assert error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS
    finally:
        broker.stop()


def test_the_pure_python_client_sees_the_policy_violation(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.admin import KafkaAdminClient
        from kafka.admin import NewTopic as PyNewTopic
        from kafka.errors import PolicyViolationError

    broker = BrokerProcess(tmp_path / "data", max_broker_partitions="100").start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        with pytest.raises(PolicyViolationError):
            admin.create_topics([PyNewTopic("big", 500, 1)])
        admin.create_topics([PyNewTopic("small", 10, 1)])
        admin.close()
        assert partition_count(broker.bootstrap, "big") is None
        assert partition_count(broker.bootstrap, "small") == 10
    finally:
        broker.stop()
