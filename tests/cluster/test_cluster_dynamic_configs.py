"""Dynamic broker configs on a 3-broker cluster with a real ZooKeeper: written where
Kafka's ZooKeeper mode writes them (``/config/brokers/<id>``,
``/config/brokers/<default>``, a ``/config/changes`` notification each), and taken by
every broker (the cluster default) or by the one named (a per-broker config), which
applies it at once: a retention default set through one broker deletes old segments on
another."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType
from kazoo.client import KazooClient

from sluice.cli import main
from sluice.client import Admin, NewTopic
from sluice.testing import EmbeddedCluster
from support.waiting import wait_until

TIMEOUT_S = 20.0


@pytest.fixture
def cluster3(cluster_prerequisites: None) -> Iterator[EmbeddedCluster]:
    overrides = {"log.retention.check.interval.ms": 200, "log.segment.delete.delay.ms": 0}
    with EmbeddedCluster(brokers=3, broker_ids=[1, 2, 3], zookeeper=True,
                         overrides=overrides) as cluster:  # fmt: skip
        yield cluster


def set_default(bootstrap: str, config: str) -> None:
    """The cluster default, through one broker (confluent-kafka and kafka-python refuse a
    BROKER resource with an empty name)."""
    assert main(["configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type",
                 "brokers", "--entity-default", "--add-config", config]) == 0  # fmt: skip


def broker_config(admin: AdminClient, broker_id: int, key: str) -> tuple[str, ConfigSource]:
    resource = ConfigResource("broker", str(broker_id))
    entry = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)[key]
    return entry.value, ConfigSource(entry.source)


def test_default_reaches_every_broker_and_per_broker_one_only(cluster3: EmbeddedCluster) -> None:
    bootstrap = cluster3.bootstrap_of(1)
    set_default(bootstrap, "log.cleaner.min.cleanable.ratio=0.25")
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    for broker_id in cluster3.broker_ids:
        wait_until(
            lambda b=broker_id: broker_config(admin, b, "log.cleaner.min.cleanable.ratio")
            == ("0.25", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            TIMEOUT_S, f"broker {broker_id} takes the cluster default",
        )  # fmt: skip

    resource = ConfigResource("broker", "2", incremental_configs=[
        ConfigEntry("log.retention.bytes", "1048576",
                    incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert broker_config(admin, 2, "log.retention.bytes") == (
        "1048576", ConfigSource.DYNAMIC_BROKER_CONFIG)  # fmt: skip
    assert broker_config(admin, 3, "log.retention.bytes") == ("-1", ConfigSource.DEFAULT_CONFIG)

    kadmin = KafkaAdminClient(bootstrap_servers=cluster3.bootstrap_servers)
    try:  # kafka-python sends a broker's resource to that broker
        kadmin.alter_configs([KConfigResource(ConfigResourceType.BROKER, "3",
                                              configs={"max.connections": ("SET", "500")})],
                             incremental=True)  # fmt: skip
        described = kadmin.describe_configs(
            [KConfigResource(ConfigResourceType.BROKER, "3")], config_filter="all"
        )["broker"]["3"]
        assert described["max.connections"]["value"] == "500"
    finally:
        kadmin.close()

    zk = KazooClient(hosts=cluster3.zookeeper_connect)
    zk.start(timeout=15)
    try:
        stored = {
            path: json.loads(zk.get(f"/config/brokers/{path}")[0])
            for path in ("<default>", "2", "3")
        }
        assert stored == {
            "<default>": {"version": 1, "config": {"log.cleaner.min.cleanable.ratio": "0.25"}},
            "2": {"version": 1, "config": {"log.retention.bytes": "1048576"}},
            "3": {"version": 1, "config": {"max.connections": "500"}},
        }
        changes = [
            json.loads(zk.get(f"/config/changes/{child}")[0])["entity_path"]
            for child in zk.get_children("/config/changes")
        ]
        assert {"brokers/<default>", "brokers/2", "brokers/3"} <= set(changes)
    finally:
        zk.stop()
        zk.close()
    retention_default_reaches_the_logs(cluster3)


def retention_default_reaches_the_logs(cluster3: EmbeddedCluster) -> None:
    """A retention default set through broker 2 deletes old segments on broker 3."""
    with Admin({"bootstrap.servers": cluster3.bootstrap_of(1)}) as admin:
        admin.create_topics([NewTopic("aging", replica_assignment={0: [3]})])
    set_default(cluster3.bootstrap_of(1), "log.segment.bytes=2000")
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    wait_until(lambda: broker_config(admin, 3, "log.segment.bytes")[0] == "2000", TIMEOUT_S,
               "broker 3 takes the smaller segments")  # fmt: skip
    producer = Producer({"bootstrap.servers": cluster3.bootstrap_servers, "linger.ms": 0})
    for i in range(30):
        producer.produce("aging", b"v" * 200, key=b"%d" % i, partition=0)
        producer.flush(TIMEOUT_S)
    consumer = Consumer({"bootstrap.servers": cluster3.bootstrap_servers, "group.id": "wm"})
    try:

        def low_watermark() -> int:
            low, _ = consumer.get_watermark_offsets(CTopicPartition("aging", 0), TIMEOUT_S)
            return int(low)

        assert low_watermark() == 0
        set_default(cluster3.bootstrap_of(2), "log.segment.bytes=2000,log.retention.ms=1")
        wait_until(lambda: low_watermark() > 0, TIMEOUT_S, "broker 3 deletes old segments")
    finally:
        consumer.close()
