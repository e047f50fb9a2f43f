"""Sluice's admin client against an embedded broker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest

import sluice
from sluice.client.admin import Admin, NewTopic
from sluice.client.consumer.consumer import Consumer, TopicPartition
from sluice.client.errors import ApiException, ConfigException


@pytest.fixture
def admin(broker: sluice.EmbeddedBroker) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as client:
        yield client


def produce(broker: sluice.EmbeddedBroker, topic: str, n: int, partitions: int = 1) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(n):
        producer.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert producer.flush(15) == 0


def test_describe_cluster(admin: Admin, broker: sluice.EmbeddedBroker) -> None:
    cluster = admin.describe_cluster()
    assert [b.port for b in cluster.brokers] == [broker.port]
    assert cluster.controller_id == cluster.brokers[0].node_id
    assert cluster.cluster_id


def test_create_describe_add_partitions_delete(admin: Admin, topic: str) -> None:
    assert admin.create_topics([NewTopic(topic, 2, 1, {"retention.ms": "3600000"})]) == {topic: 2}
    assert topic in admin.list_topics()
    described = admin.describe_topics([topic])[topic]
    assert [p.partition for p in described.partitions] == [0, 1]
    assert all(p.leader >= 0 for p in described.partitions)
    with pytest.raises(ApiException) as info:
        admin.create_topics([NewTopic(topic, 1, 1)])
    assert info.value.code.name == "topic_already_exists"
    admin.create_partitions({topic: 4})
    assert len(admin.describe_topics([topic])[topic].partitions) == 4
    admin.delete_topics([topic])
    assert topic not in admin.list_topics()


def test_describe_and_alter_configs(admin: Admin, topic: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 1, {"retention.ms": "3600000"})])
    configs = admin.describe_configs(topics=[topic])[(2, topic)]
    assert configs["retention.ms"].value == "3600000"
    assert not configs["retention.ms"].is_default
    admin.alter_configs({topic: {"cleanup.policy": "compact"}})
    configs = admin.describe_configs(topics=[topic])[(2, topic)]
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "3600000"  # incremental: kept
    admin.alter_configs({topic: {"retention.ms": None}})  # delete the override
    configs = admin.describe_configs(topics=[topic])[(2, topic)]
    assert configs["retention.ms"].value != "3600000"
    broker_configs = admin.describe_configs(brokers=[admin.describe_cluster().controller_id])
    assert len(next(iter(broker_configs.values()))) > 0


def test_delete_records_and_list_offsets(
    admin: Admin, broker: sluice.EmbeddedBroker, topic: str
) -> None:
    admin.create_topics([NewTopic(topic, 1, 1)])
    produce(broker, topic, 20)
    tp = TopicPartition(topic, 0)
    assert admin.list_offsets([tp], "latest") == {tp: 20}
    assert admin.delete_records({tp: 12}) == {tp: 12}
    assert admin.list_offsets([tp], "earliest") == {tp: 12}
    with Consumer({"bootstrap.servers": broker.bootstrap_servers,
                   "auto.offset.reset": "earliest"}) as c:  # fmt: skip
        c.assign([tp])
        assert c.position(tp) == 12


def test_groups_offsets_lag_and_delete(
    admin: Admin, broker: sluice.EmbeddedBroker, topic: str
) -> None:
    admin.create_topics([NewTopic(topic, 2, 1)])
    produce(broker, topic, 20, partitions=2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    config = {"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
              "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "client.id": "lag-test"}  # fmt: skip
    with Consumer(config) as c:
        c.subscribe([topic])
        got = 0
        while got < 20:
            got += len(c.poll(0.5))
        c.commit({TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 4})
        assert group in {g.group_id for g in admin.list_groups()}
        description = admin.describe_groups([group])[group]
        assert description.state == "Stable"
        assert description.protocol_type == "consumer"
        assert description.protocol == "range"
        assert len(description.members) == 1
        assert description.members[0].client_id == "lag-test"
        assert sorted(description.members[0].assignment) == [
            TopicPartition(topic, 0), TopicPartition(topic, 1),
        ]  # fmt: skip
        with pytest.raises(ApiException):  # a group with members cannot be deleted
            admin.delete_groups([group])
    offsets = admin.list_group_offsets(group)
    assert {tp: om.offset for tp, om in offsets.items()} == {
        TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 4,
    }  # fmt: skip
    assert admin.group_lag(group) == {TopicPartition(topic, 0): 0, TopicPartition(topic, 1): 6}
    assert admin.describe_groups([group])[group].state == "Empty"
    admin.delete_groups([group])
    assert group not in {g.group_id for g in admin.list_groups()}


def test_bad_admin_config() -> None:
    with pytest.raises(ConfigException):
        Admin({"bootstrap.servers": "127.0.0.1:1", "nope": 1})
    with pytest.raises(ConfigException):
        Admin({})
