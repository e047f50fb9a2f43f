"""Partition reassignment on a 3-broker cluster with a real ZooKeeper: an RF=2 partition
moves from brokers [1, 2] to [2, 3] with no acknowledged record lost, broker 1's log
is deleted, and bad requests get Kafka's errors while the cluster keeps serving.

confluent-kafka 2.16's AdminClient has no reassignment calls, so the
AlterPartitionReassignments / ListPartitionReassignments requests go through
kafka-python's KafkaAdminClient; confluent-kafka creates the topic (explicit replica
assignment), produces with acks=all, reads metadata and consumes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTP
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from sluice.testing import EmbeddedCluster
from support.cluster import partition_metadata, read_partitions
from support.waiting import wait_until

TOPIC = "reassigned"
RECORDS = 500


@pytest.fixture
def kafka_admin(cluster3: EmbeddedCluster) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=cluster3.bootstrap_servers)
    try:
        yield admin
    finally:
        admin.close()


def _create_on(cluster: EmbeddedCluster, topic: str, replicas: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas])])[topic].result(15)


def _producer(bootstrap: str) -> Producer:
    return Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
         "log_level": 0}
    )  # fmt: skip


def _produce(producer: Producer, topic: str, values: list[bytes]) -> None:
    errors: list[Any] = []
    acked: list[bytes] = []

    def delivered(err: Any, msg: Any) -> None:
        (errors if err is not None else acked).append(err or msg.value())

    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []
    assert sorted(acked) == sorted(values)


def _high_watermark(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw", "log_level": 0})
    try:
        return int(consumer.get_watermark_offsets(CTP(topic, 0), timeout=5)[1])
    finally:
        consumer.close()


def _settled(bootstrap: str, topic: str, replicas: list[int]) -> Any:
    p = partition_metadata(bootstrap, topic)
    if p is None or p.leader not in replicas:
        return None
    return p if list(p.replicas) == replicas and sorted(p.isrs) == sorted(replicas) else None


def test_reassignment_moves_replicas_without_losing_records(
    cluster3: EmbeddedCluster, kafka_admin: KafkaAdminClient
) -> None:
    bootstrap = cluster3.bootstrap_servers
    _create_on(cluster3, TOPIC, [1, 2])
    wait_until(lambda: _settled(bootstrap, TOPIC, [1, 2]), 30, "ISR [1, 2]")
    # One idempotent producer throughout: its sequence numbers continue on the new leader.
    producer = _producer(bootstrap)
    first = [f"record-{i}".encode() for i in range(RECORDS)]
    _produce(producer, TOPIC, first)
    log_dir = {b: cluster3.data_dir / f"data-{b}" / f"{TOPIC}-0" for b in (1, 2, 3)}
    assert log_dir[1].is_dir() and log_dir[2].is_dir() and not log_dir[3].exists()

    tp = KTP(TOPIC, 0)
    assert kafka_admin.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}

    wait_until(lambda: kafka_admin.list_partition_reassignments() == {}, 60, "reassignment done")
    md = wait_until(lambda: _settled(bootstrap, TOPIC, [2, 3]), 30, "replicas and ISR [2, 3]")
    assert md.leader == 2  # broker 1 left: the first target replica in the ISR leads
    wait_until(lambda: not log_dir[1].exists(), 30, "broker 1's log directory deleted")
    assert log_dir[2].is_dir() and log_dir[3].is_dir()
    # The new leader's high watermark catches up once broker 3 fetched from it (it may
    # lag what broker 1 acknowledged for a moment, as in Kafka).
    wait_until(lambda: _high_watermark(bootstrap, TOPIC) >= RECORDS, 30, "the high watermark")
    assert read_partitions(bootstrap, TOPIC, 1)[0] == first

    # The moved partition takes writes on its new leader.
    more = [f"more-{i}".encode() for i in range(50)]
    _produce(producer, TOPIC, more)
    assert read_partitions(bootstrap, TOPIC, 1)[0] == first + more


def test_bad_reassignments_get_kafka_errors(
    cluster3: EmbeddedCluster, kafka_admin: KafkaAdminClient
) -> None:
    bootstrap = cluster3.bootstrap_servers
    _create_on(cluster3, TOPIC, [1, 2])
    wait_until(lambda: _settled(bootstrap, TOPIC, [1, 2]), 30, "ISR [1, 2]")
    tp, missing = KTP(TOPIC, 0), KTP("no-such-topic", 0)

    result = kafka_admin.alter_partition_reassignments(
        {tp: [2, 9], missing: [1, 2], KTP(TOPIC, 3): [1]}
    )
    assert result == {
        tp: InvalidReplicationAssignmentError,
        missing: UnknownTopicOrPartitionError,
        KTP(TOPIC, 3): UnknownTopicOrPartitionError,
    }
    assert kafka_admin.alter_partition_reassignments({tp: [2, 2]}) == {
        tp: InvalidReplicationAssignmentError
    }
    assert kafka_admin.alter_partition_reassignments({tp: None}) == {
        tp: NoReassignmentInProgressError
    }
    assert kafka_admin.list_partition_reassignments([tp]) == {}

    # Nothing moved, and the cluster still serves.
    assert _settled(bootstrap, TOPIC, [1, 2]) is not None
    _produce(_producer(bootstrap), TOPIC, [b"still-here"])
    assert read_partitions(bootstrap, TOPIC, 1)[0] == [b"still-here"]


def test_a_single_node_answers_as_a_one_broker_cluster() -> None:
    import sluice

    with sluice.EmbeddedBroker() as embedded:
        bootstrap = embedded.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("solo", 1, 1)])["solo"].result(15)
        me = wait_until(lambda: partition_metadata(bootstrap, "solo"), 30, "solo's metadata").leader
        kafka_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            tp = KTP("solo", 0)
            assert kafka_admin.alter_partition_reassignments({tp: [me]}) == {tp: None}
            assert kafka_admin.alter_partition_reassignments(
                {tp: [me, me + 1], KTP("solo", 1): [me]}
            ) == {
                tp: InvalidReplicationAssignmentError,
                KTP("solo", 1): UnknownTopicOrPartitionError,
            }
            assert kafka_admin.alter_partition_reassignments({tp: None}) == {
                tp: NoReassignmentInProgressError
            }
            assert kafka_admin.list_partition_reassignments() == {}
        finally:
            kafka_admin.close()
