"""Protected internal topics on a 3-broker cluster (in process): DeleteTopics,
CreatePartitions and configs that would let retention delete ``__consumer_offsets`` are
refused by the topic admin that writes ZooKeeper, and committed offsets stay. A
``__consumer_offsets`` deleted anyway, below the protection (its deletion queued in
ZooKeeper), is made again by the next FindCoordinator and its new leader coordinates it:
commits carry on without a restart."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from sluice.testing import EmbeddedCluster
from support.waiting import wait_until

OFFSETS = "__consumer_offsets"
TIMEOUT_S = 30.0


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    overrides = {"offsets.topic.num.partitions": 3, "zookeeper.session.timeout.ms": 4000}
    with EmbeddedCluster(brokers=3, broker_ids=[1, 2, 3], overrides=overrides) as c:
        yield c


def commit(bootstrap: str, group: str, tp: TopicPartition) -> KafkaError | None:
    """One commit with a new consumer: its error for ``tp``, None once committed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "log_level": 0})  # fmt: skip
    try:
        (result,) = consumer.commit(offsets=[tp], asynchronous=False)
        error: KafkaError | None = result.error
        return error
    except KafkaException as exc:
        raised: KafkaError = exc.args[0]
        return raised
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    try:
        (found,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        offset: int = found.offset
        return offset
    finally:
        consumer.close()


def refusal(future: Future[Any]) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=TIMEOUT_S)
    error: KafkaError = info.value.args[0]
    return error


def test_internal_topics_are_protected_and_made_again(cluster: EmbeddedCluster) -> None:
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("t", 1, 3)])["t"].result(TIMEOUT_S)
    wait_until(lambda: commit(bootstrap, "g", TopicPartition("t", 0, 5)) is None,
               TIMEOUT_S, "the first commit")  # fmt: skip

    error = refusal(admin.delete_topics([OFFSETS], operation_timeout=10)[OFFSETS])
    assert error.code() == KafkaError.TOPIC_EXCEPTION
    error = refusal(admin.create_partitions([NewPartitions(OFFSETS, 6)])[OFFSETS])
    assert error.code() == KafkaError.TOPIC_EXCEPTION
    entry = ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS, incremental_configs=[entry])
    error = refusal(admin.incremental_alter_configs([resource])[resource])
    assert error.code() == KafkaError.POLICY_VIOLATION
    assert "must keep cleanup.policy=compact" in error.str()
    resource = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS)
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    assert configs["cleanup.policy"].value == "compact"
    assert len(admin.list_topics(timeout=10).topics[OFFSETS].partitions) == 3
    assert committed(bootstrap, "g", "t") == 5

    # Below the protection: the deletion queued in ZooKeeper, as another tool could.
    embedded = cluster.embedded[1]
    inner = embedded.broker
    assert inner is not None
    zk = inner.topic_admin.zk

    def topic_id() -> object:
        found = embedded.call(zk.get_topic_assignment, OFFSETS)
        return None if found is None else found[0]

    before = topic_id()
    embedded.call(inner.topic_admin.admin.delete_topic, OFFSETS)
    wait_until(
        lambda: topic_id() != before and commit(bootstrap, "g", TopicPartition("t", 0, 7)) is None,
        TIMEOUT_S, "a commit once __consumer_offsets is made again",
    )  # fmt: skip
    assert topic_id() not in (None, before)
    assert committed(bootstrap, "g", "t") == 7
    topics = admin.list_topics(timeout=10).topics
    assert len(topics[OFFSETS].partitions) == 3
