"""Kafka's ZooKeeper layout: paths and the JSON Kafka 3.x writes and reads."""

from __future__ import annotations

import json

from sluice.base import TopicPartition
from sluice.controller import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    assign_replicas_to_brokers,
)
from sluice.controller.zk_data import (
    BrokerIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    IsrChangeNotificationSequenceZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
    TopicPartitionStateZNode,
    TopicZNode,
    new_topic_id,
)
from sluice.metastore import Stat

TP = TopicPartition("orders", 3)


def stat(version: int) -> Stat:
    return Stat(1, 2, 0, 0, version, 0, 0, 0, 0)


def test_paths() -> None:
    assert ControllerZNode.path == "/controller"
    assert ControllerEpochZNode.path == "/controller_epoch"
    assert BrokerIdZNode.path(7) == "/brokers/ids/7"
    assert TopicZNode.path("orders") == "/brokers/topics/orders"
    assert TopicPartitionStateZNode.path(TP) == "/brokers/topics/orders/partitions/3/state"
    assert DeleteTopicsTopicZNode.path("orders") == "/admin/delete_topics/orders"
    assert ReassignPartitionsZNode.path == "/admin/reassign_partitions"
    assert PreferredReplicaElectionZNode.path == "/admin/preferred_replica_election"
    assert IsrChangeNotificationSequenceZNode.path() == "/isr_change_notification/isr_change_"
    assert (
        IsrChangeNotificationSequenceZNode.sequence_number("isr_change_0000000012") == "0000000012"
    )


def test_controller_znodes() -> None:
    data = ControllerZNode.encode(2, 1529210278988)
    assert data == b'{"version":1,"brokerid":2,"timestamp":"1529210278988"}'
    assert ControllerZNode.decode(data) == 2
    assert ControllerZNode.decode(b"3") == 3  # very old format
    assert ControllerZNode.decode(b"garbage") is None
    assert ControllerEpochZNode.encode(5) == b"5" and ControllerEpochZNode.decode(b"5") == 5


def test_broker_registration_matches_kafka() -> None:
    broker = Broker(
        1,
        (EndPoint("h1", 9092), EndPoint("h1", 9093, "SSL", "SSL")),
        rack="r1",
    )
    value = json.loads(BrokerIdZNode.encode(broker, 1700000000000))
    assert value == {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
        "endpoints": ["PLAINTEXT://h1:9092", "SSL://h1:9093"],
        "jmx_port": -1,
        "port": 9092,
        "host": "h1",
        "version": 5,
        "timestamp": "1700000000000",
        "rack": "r1",
    }
    kafka_written = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,'
        b'"host":"localhost","version":5,"timestamp":"1680000000000"}'
    )
    assert BrokerIdZNode.decode(0, kafka_written) == Broker.plaintext(0, "localhost", 9092)
    assert BrokerIdZNode.decode(1, BrokerIdZNode.encode(broker, 0)) == broker


def test_topic_assignment_matches_kafka() -> None:
    topic_id = new_topic_id()
    assert len(topic_id) == 22
    assignment = {
        1: ReplicaAssignment((2, 3)),
        0: ReplicaAssignment((1, 2, 4), adding_replicas=(4,), removing_replicas=(1,)),
    }
    value = json.loads(TopicZNode.encode(topic_id, assignment))
    assert value == {
        "version": 3,
        "topic_id": topic_id,
        "partitions": {"0": [1, 2, 4], "1": [2, 3]},
        "adding_replicas": {"0": [4]},
        "removing_replicas": {"0": [1]},
    }
    assert TopicZNode.decode(TopicZNode.encode(topic_id, assignment)) == (topic_id, assignment)
    # What Kafka 2.x (no topic id, no reassignment fields) wrote.
    old = b'{"version":1,"partitions":{"0":[1,2],"1":[2,1]}}'
    assert TopicZNode.decode(old) == (
        None,
        {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 1))},
    )
    assert assignment[0].target_replicas == (2, 4) and assignment[0].is_being_reassigned


def test_partition_state_matches_kafka() -> None:
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1, 2), leader_epoch=4), controller_epoch=7)
    data = TopicPartitionStateZNode.encode(state)
    assert data == b'{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":4,"isr":[1,2]}'
    decoded = TopicPartitionStateZNode.decode(data, stat(9))
    assert decoded == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1, 2), 4, zk_version=9), 7)


def test_admin_znodes() -> None:
    partitions = [TopicPartition("b", 1), TopicPartition("a", 0)]
    data = PreferredReplicaElectionZNode.encode(partitions)
    assert json.loads(data) == {
        "version": 1,
        "partitions": [{"topic": "a", "partition": 0}, {"topic": "b", "partition": 1}],
    }
    assert PreferredReplicaElectionZNode.decode(data) == set(partitions)
    assert IsrChangeNotificationSequenceZNode.decode(
        IsrChangeNotificationSequenceZNode.encode(partitions)
    ) == set(partitions)
    reassignment = {TP: (4, 5)}
    assert json.loads(ReassignPartitionsZNode.encode(reassignment)) == {
        "version": 1,
        "partitions": [{"topic": "orders", "partition": 3, "replicas": [4, 5]}],
    }
    assert (
        ReassignPartitionsZNode.decode(ReassignPartitionsZNode.encode(reassignment)) == reassignment
    )


def test_replica_assignment_follows_kafkas_algorithm() -> None:
    # Kafka's AdminUtils example: 5 brokers, 10 partitions, 3 replicas, fixed start 0.
    assignment = assign_replicas_to_brokers([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0)
    assert assignment == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
