"""Dynamic broker configs on a 3-broker cluster with a real ZooKeeper: written where
Kafka's ZooKeeper mode writes them (``/config/brokers/<id>``,
``/config/brokers/<default>``, a ``/config/changes`` notification each), and taken by
every broker (the cluster default) or by the one named (a per-broker config)."""

from __future__ import annotations

import json

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
from sluice.testing import EmbeddedCluster
from support.waiting import wait_until

TIMEOUT_S = 20.0


def broker_config(admin: AdminClient, broker_id: int, key: str) -> tuple[str, ConfigSource]:
    resource = ConfigResource("broker", str(broker_id))
    entry = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)[key]
    return entry.value, ConfigSource(entry.source)


def test_default_reaches_every_broker_and_per_broker_one_only(cluster3: EmbeddedCluster) -> None:
    bootstrap = cluster3.bootstrap_of(1)
    assert main(["configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type",
                 "brokers", "--entity-default", "--add-config",
                 "log.cleaner.min.cleanable.ratio=0.25"]) == 0  # fmt: skip
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
