"""Protected internal topics against a real broker, driven by confluent-kafka and
kafka-python: deleting ``__consumer_offsets`` or ``__transaction_state``, deleting their
records, adding partitions, configs that would let retention delete them and producing
into them are refused with Kafka's error codes and a message, and committed offsets stay.
A ``__consumer_offsets`` that goes missing anyway is made again at the next
FindCoordinator, and commits carry on without a restart.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kafka import KafkaAdminClient, KafkaConsumer, OffsetAndMetadata
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType
from kafka.admin import NewPartitions as KNewPartitions
from kafka.errors import InvalidTopicError
from kafka.structs import TopicPartition as KTopicPartition

import sluice
from support.waiting import wait_until

TIMEOUT_S = 15.0
OFFSETS = "__consumer_offsets"
TXN_STATE = "__transaction_state"
INTERNAL = (OFFSETS, TXN_STATE)


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"offsets.topic.num.partitions": 4, "transaction.state.log.num.partitions": 2}


@pytest.fixture(scope="module")
def admin(broker: sluice.EmbeddedBroker) -> AdminClient:
    """An admin client, once both internal topics exist (a transactional producer made
    ``__transaction_state``)."""
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "internal-topics"}
    )
    producer.init_transactions(TIMEOUT_S)
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


@pytest.fixture(scope="module")
def kadmin(broker: sluice.EmbeddedBroker, admin: AdminClient) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=15000)
    yield client
    client.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def kafka_error(future: Future[Any]) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=TIMEOUT_S)
    error: KafkaError = info.value.args[0]
    return error


def commit(broker: sluice.EmbeddedBroker, group: str, tp: TopicPartition) -> list[TopicPartition]:
    """Commit ``tp``'s offset for ``group`` once, with a new consumer; the per-partition
    results (an error on each, or None)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False, "log_level": 0})  # fmt: skip
    try:
        committed: list[TopicPartition] = consumer.commit(offsets=[tp], asynchronous=False)
        return committed
    finally:
        consumer.close()


def committed_offset(broker: sluice.EmbeddedBroker, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        (found,) = consumer.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        offset: int = found.offset
        return offset
    finally:
        consumer.close()


def internal_state(admin: AdminClient) -> dict[str, tuple[int, str]]:
    """Each internal topic's partition count and cleanup.policy."""
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    state = {}
    for name in INTERNAL:
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        configs = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
        state[name] = (len(topics[name].partitions), configs["cleanup.policy"].value)
    return state


@pytest.fixture
def committed_group(broker: sluice.EmbeddedBroker, admin: AdminClient) -> Iterator[str]:
    """A group with offset 5 committed for a new topic's partition 0; checked intact, and
    the internal topics unchanged, after the test."""
    topic, group = unique("t"), unique("g")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
    assert commit(broker, group, TopicPartition(topic, 0, 5))[0].error is None
    before = internal_state(admin)
    assert before == {OFFSETS: (4, "compact"), TXN_STATE: (2, "compact")}
    yield group
    assert committed_offset(broker, group, topic) == 5
    assert internal_state(admin) == before


def test_deleting_internal_topics_is_refused(
    admin: AdminClient, kadmin: KafkaAdminClient, committed_group: str
) -> None:
    for name in INTERNAL:
        error = kafka_error(admin.delete_topics([name], operation_timeout=10)[name])
        assert error.code() == KafkaError.TOPIC_EXCEPTION
        with pytest.raises(InvalidTopicError, match=f"Cannot delete internal topic {name}"):
            kadmin.delete_topics([name])


def test_deleting_records_of_internal_topics_is_refused(
    admin: AdminClient, kadmin: KafkaAdminClient, committed_group: str
) -> None:
    for name in INTERNAL:
        for offset in (-1, 0):
            futures = admin.delete_records([TopicPartition(name, 0, offset)])
            error = kafka_error(futures[TopicPartition(name, 0)])
            assert error.code() == KafkaError.TOPIC_EXCEPTION
        with pytest.raises(InvalidTopicError):
            kadmin.delete_records({KTopicPartition(name, 0): -1})


def test_adding_partitions_to_internal_topics_is_refused(
    admin: AdminClient, kadmin: KafkaAdminClient, committed_group: str
) -> None:
    for name in INTERNAL:
        for validate_only in (True, False):
            futures = admin.create_partitions([NewPartitions(name, 8)], validate_only=validate_only)
            error = kafka_error(futures[name])
            assert error.code() == KafkaError.TOPIC_EXCEPTION
            assert f"Cannot add partitions to internal topic {name}" in error.str()
        with pytest.raises(InvalidTopicError, match=r"num\.partitions"):
            kadmin.create_partitions({name: KNewPartitions(8)})


@pytest.mark.parametrize(
    "entry",
    [
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE),
    ],
    ids=["set-delete", "append-delete", "back-to-the-broker-default"],
)
def test_configs_that_delete_records_are_refused_confluent(
    admin: AdminClient, committed_group: str, entry: ConfigEntry
) -> None:
    for name in INTERNAL:
        for validate_only in (True, False):
            resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[entry])
            futures = admin.incremental_alter_configs([resource], validate_only=validate_only)
            error = kafka_error(futures[resource])
            assert error.code() == KafkaError.POLICY_VIOLATION
            assert f"{name} must keep cleanup.policy=compact" in error.str()
    # The legacy AlterConfigs replaces every override: without cleanup.policy=compact
    # among them, the broker default (delete) would apply.
    resource = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS, set_config={"retention.ms": "1"})
    with pytest.warns(DeprecationWarning):
        error = kafka_error(admin.alter_configs([resource])[resource])
    assert error.code() == KafkaError.POLICY_VIOLATION


def test_configs_that_delete_records_are_refused_kafka_python(
    kadmin: KafkaAdminClient, committed_group: str
) -> None:
    for incremental in (False, True):
        resources = [
            KConfigResource(ConfigResourceType.TOPIC, name, configs={"cleanup.policy": "delete"})
            for name in INTERNAL
        ]
        outcome = kadmin.alter_configs(resources, incremental=incremental)
        for name in INTERNAL:
            assert "PolicyViolationError" in outcome["topic"][name]
            assert "must keep cleanup.policy=compact" in outcome["topic"][name]


def test_configs_that_keep_records_are_accepted(admin: AdminClient) -> None:
    entry = ConfigEntry("min.cleanable.dirty.ratio", "0.2",
                        incremental_operation=AlterConfigOpType.SET)  # fmt: skip
    resource = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    described = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    assert described["min.cleanable.dirty.ratio"].value == "0.2"
    assert described["cleanup.policy"].value == "compact"


def test_producing_to_internal_topics_is_refused(
    broker: sluice.EmbeddedBroker, committed_group: str
) -> None:
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "retries": 0})
    for name in INTERNAL:
        producer.produce(name, b"not a record of the coordinator", key=b"k", partition=0,
                         on_delivery=lambda error, _m: errors.append(error))  # fmt: skip
    assert producer.flush(TIMEOUT_S) == 0
    assert [e.code() if e else None for e in errors] == [KafkaError.TOPIC_EXCEPTION] * 2


def test_a_missing_offsets_topic_is_made_again_without_a_restart(
    broker: sluice.EmbeddedBroker, admin: AdminClient
) -> None:
    topic, group = unique("t"), unique("g")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
    assert commit(broker, group, TopicPartition(topic, 0, 5))[0].error is None
    inner = broker.broker
    assert inner is not None
    broker.call(inner.topic_admin._delete_topic, OFFSETS)  # below the protection
    assert OFFSETS not in admin.list_topics(timeout=TIMEOUT_S).topics

    wait_until(
        lambda: commit(broker, group, TopicPartition(topic, 0, 7))[0].error is None,
        TIMEOUT_S, "a commit once __consumer_offsets is made again",
    )  # fmt: skip
    assert committed_offset(broker, group, topic) == 7
    assert internal_state(admin)[OFFSETS] == (4, "compact")
    # A pure-Python client commits and reads back as well.
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             enable_auto_commit=False)  # fmt: skip
    try:
        tp = KTopicPartition(topic, 0)
        consumer.commit({tp: OffsetAndMetadata(9, "", -1)})
        assert consumer.committed(tp) == 9
    finally:
        consumer.close()
