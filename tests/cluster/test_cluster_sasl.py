"""SASL in a 3-broker cluster on a real ZooKeeper: the brokers replicate and take the
controller's requests over a SASL_PLAINTEXT inter-broker listener (PLAIN), and a SCRAM
user created through one broker authenticates on every other within a second
(/config/users and /config/changes, as Kafka keeps them), with scramp's client and
confluent-kafka."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from sluice.testing import EmbeddedCluster
from support.sasl import alter_scram_request, plain_jaas, scram_login
from support.wire import RawClient

BROKERS = [1, 2, 3]


@pytest.fixture
def sasl_cluster(cluster_prerequisites: None) -> Iterator[tuple[EmbeddedCluster, dict[int, int]]]:
    cluster = EmbeddedCluster(
        brokers=3, broker_ids=BROKERS, zookeeper=True,
        listeners=["PLAINTEXT", "SASL_PLAINTEXT"],
        overrides={
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(
                {"admin": "admin-secret"}, "admin"
            ),
        },
    )  # fmt: skip
    sasl_ports = cluster.listener_ports["SASL_PLAINTEXT"]
    with cluster:
        yield cluster, sasl_ports


def test_a_user_made_on_one_broker_authenticates_on_the_others_within_a_second(
    sasl_cluster: tuple[EmbeddedCluster, dict[int, int]],
) -> None:
    cluster, sasl_ports = sasl_cluster
    for b in BROKERS:
        assert not scram_login(f"127.0.0.1:{sasl_ports[b]}", "alice", "alice-secret")
    client = RawClient(cluster.bootstrap_of(1))
    try:
        response: Any = client.request(alter_scram_request("alice", "alice-secret"))
    finally:
        client.close()
    created = time.monotonic()
    assert [(r.user, r.error_code) for r in response.results] == [("alice", 0)]
    for b in (2, 3):
        while not scram_login(f"127.0.0.1:{sasl_ports[b]}", "alice", "alice-secret"):
            assert time.monotonic() - created < 1.0, f"broker {b} does not know alice yet"
            time.sleep(0.02)
    # stored as Kafka stores it
    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start()
    try:
        data, _ = zk.get("/config/users/alice")
        changes = zk.get_children("/config/changes")
        entity = [zk.get(f"/config/changes/{c}")[0] for c in changes]
    finally:
        zk.stop()
    assert b'"SCRAM-SHA-256":"salt=' in data and b"iterations=4096" in data
    assert b'{"version":2,"entity_path":"users/alice"}' in entity
    # a real client, through broker 3, on a topic replicated over the SASL listener
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(2)})
    admin.create_topics([NewTopic("sasl-cluster", 1, 3)])["sasl-cluster"].result(30)
    producer = Producer({
        "bootstrap.servers": f"127.0.0.1:{sasl_ports[3]}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
        "sasl.password": "alice-secret", "acks": "all",
    })  # fmt: skip
    for i in range(10):
        producer.produce("sasl-cluster", str(i).encode())
    assert producer.flush(30) == 0  # acks=all: the followers fetched over SASL
    metadata = admin.list_topics("sasl-cluster", timeout=10).topics["sasl-cluster"]
    assert len(metadata.partitions[0].isrs) == 3
