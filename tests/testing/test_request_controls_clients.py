"""Request controls over the wire, with confluent-kafka and kafka-python: a Produce
answered NOT_LEADER_OR_FOLLOWER once is retried and appended once, a connection dropped
on the first Fetch is reconnected, a delayed Metadata answers late, and a FindCoordinator
answered COORDINATOR_NOT_AVAILABLE once is retried; and controls outlive a restart."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPartition

import sluice
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.testing import DropConnection, respond
from support.clients import create_topic, produce
from support.waiting import wait_until

DELAY_S = 0.5


@pytest.fixture(autouse=True)
def no_controls_left(broker: sluice.EmbeddedBroker) -> Iterator[None]:
    """Each test starts and ends with no controls on the module's broker."""
    broker.controls.clear()
    yield
    broker.controls.clear()


def not_leader(request: Request) -> Any:
    """Every partition of a Produce answered NOT_LEADER_OR_FOLLOWER, nothing appended."""
    return respond(
        request,
        responses=[
            {"name": t.name, "partition_responses": [
                {"index": p.index, "error_code": ErrorCode.not_leader_or_follower,
                 "base_offset": -1}
                for p in t.partition_data
            ]}
            for t in request.body.topic_data
        ],
    )  # fmt: skip


def drop(_request: Request) -> None:
    raise DropConnection


def names_topic(request: Request, topic: str) -> bool:
    return any(t.name == topic for t in request.body.topics or ())


def coordinator_not_available(group: str) -> Any:
    """A control answering the FindCoordinator for ``group`` COORDINATOR_NOT_AVAILABLE."""

    def control(request: Request) -> Any:
        body = request.body
        keys = getattr(body, "coordinator_keys", None) or (getattr(body, "key", None),)
        if group not in keys:
            return None
        code = ErrorCode.coordinator_not_available
        return respond(
            request, error_code=code, node_id=-1, host="", port=-1,
            coordinators=[
                {"key": k, "node_id": -1, "host": "", "port": -1, "error_code": code}
                for k in keys
            ],
        )  # fmt: skip

    return control


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        low, high = consumer.get_watermark_offsets(ConfluentPartition(topic, 0), timeout=10)
        return int(low), int(high)
    finally:
        consumer.close()


# -- Produce ---------------------------------------------------------------------------


def test_confluent_producer_retries_a_not_leader_answer(
    broker: sluice.EmbeddedBroker, topic: str
) -> None:
    create_topic(broker.bootstrap_servers, topic, 1)
    control = broker.control(ApiKey.PRODUCE, not_leader)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "retry.backoff.ms": 50}
    )
    errors: list[object] = []
    producer.produce(topic, b"once", on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(30) == 0
    assert errors == [None]
    assert (control.acted, control.active) == (1, False)
    assert watermarks(broker.bootstrap_servers, topic) == (0, 1)  # appended once


def test_kafka_python_producer_retries_a_not_leader_answer(
    broker: sluice.EmbeddedBroker, topic: str
) -> None:
    create_topic(broker.bootstrap_servers, topic, 1)
    control = broker.control(ApiKey.PRODUCE, not_leader)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, acks="all", retries=5, retry_backoff_ms=50
    )
    try:
        metadata = producer.send(topic, b"once").get(timeout=30)
    finally:
        producer.close()
    assert metadata.offset == 0  # the controlled answer appended nothing
    assert control.acted == 1
    assert watermarks(broker.bootstrap_servers, topic) == (0, 1)


# -- Fetch -----------------------------------------------------------------------------


def test_confluent_consumer_recovers_from_a_dropped_fetch(
    broker: sluice.EmbeddedBroker, topic: str
) -> None:
    values = [b"a", b"b", b"c"]
    produce(broker.bootstrap_servers, topic, values, 1)
    control = broker.control(ApiKey.FETCH, drop)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused",
         "enable.auto.commit": False, "reconnect.backoff.ms": 50, "log_level": 0}
    )  # fmt: skip
    got: list[bytes] = []
    try:
        consumer.assign([ConfluentPartition(topic, 0, 0)])

        def all_read() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
            return len(got) == len(values)

        wait_until(all_read, 30, "the records after the dropped fetch")
    finally:
        consumer.close()
    assert got == values
    assert control.acted == 1


def test_kafka_python_consumer_recovers_from_a_dropped_fetch(
    broker: sluice.EmbeddedBroker, topic: str
) -> None:
    values = [b"a", b"b", b"c"]
    produce(broker.bootstrap_servers, topic, values, 1)
    control = broker.control(ApiKey.FETCH, drop)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False,
        reconnect_backoff_ms=50,
    )  # fmt: skip
    got: list[bytes] = []
    try:
        partition = KafkaPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)

        def all_read() -> bool:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for records in consumer.poll(timeout_ms=200).values():
                    got.extend(r.value for r in records)
            return len(got) == len(values)

        wait_until(all_read, 30, "the records after the dropped fetch")
    finally:
        consumer.close()
    assert got == values
    assert control.acted == 1


# -- Metadata --------------------------------------------------------------------------


def test_confluent_admin_waits_for_a_delayed_metadata(
    broker: sluice.EmbeddedBroker, topic: str
) -> None:
    create_topic(broker.bootstrap_servers, topic, 2)
    control = broker.control(
        ApiKey.METADATA,
        lambda request: asyncio.sleep(DELAY_S) if names_topic(request, topic) else None,
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    started = time.monotonic()
    metadata = admin.list_topics(topic, timeout=10)
    assert time.monotonic() - started >= DELAY_S * 0.9
    assert sorted(metadata.topics[topic].partitions) == [0, 1]  # the real answer
    assert control.acted == 1


def test_kafka_python_producer_waits_for_a_delayed_metadata(
    broker: sluice.EmbeddedBroker, topic: str
) -> None:
    create_topic(broker.bootstrap_servers, topic, 2)
    control = broker.control(
        ApiKey.METADATA,
        lambda request: asyncio.sleep(DELAY_S) if names_topic(request, topic) else None,
    )
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        started = time.monotonic()
        partitions = producer.partitions_for(topic)
        elapsed = time.monotonic() - started
    finally:
        producer.close()
    assert elapsed >= DELAY_S * 0.9
    assert partitions == {0, 1}
    assert control.acted == 1


# -- FindCoordinator -------------------------------------------------------------------


def test_confluent_consumer_retries_coordinator_not_available(
    broker: sluice.EmbeddedBroker, topic: str, group: str
) -> None:
    produce(broker.bootstrap_servers, topic, [b"x"], 1)
    control = broker.control(ApiKey.FIND_COORDINATOR, coordinator_not_available(group))
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
         "auto.offset.reset": "earliest", "log_level": 0}
    )  # fmt: skip
    try:
        consumer.subscribe([topic])

        def read() -> bytes | None:
            message = consumer.poll(0.2)
            return message.value() if message is not None and message.error() is None else None

        assert wait_until(read, 30, "a record through the group") == b"x"
    finally:
        consumer.close()
    assert control.acted == 1


def test_kafka_python_consumer_retries_coordinator_not_available(
    broker: sluice.EmbeddedBroker, topic: str, group: str
) -> None:
    produce(broker.bootstrap_servers, topic, [b"x"], 1)
    control = broker.control(ApiKey.FIND_COORDINATOR, coordinator_not_available(group))
    consumer = KafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
        auto_offset_reset="earliest", consumer_timeout_ms=30_000, retry_backoff_ms=50,
    )  # fmt: skip
    try:
        first = next(iter(consumer))
    finally:
        consumer.close()
    assert first.value == b"x"
    assert control.acted == 1


def test_controls_carry_over_a_restart(tmp_path: Path) -> None:
    """A kept control stays with the EmbeddedBroker when it is killed and started again."""
    embedded = sluice.EmbeddedBroker(log_dir=tmp_path).start()
    try:
        control = embedded.control(ApiKey.METADATA, drop, keep=True)
        embedded.kill()
        embedded.start()
        admin = AdminClient({"bootstrap.servers": embedded.bootstrap_servers, "log_level": 0})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=2)  # every Metadata is dropped
        assert control.acted >= 1
        control.remove()
        assert admin.list_topics(timeout=10).brokers  # answered again
    finally:
        embedded.stop()
