"""The shipped ``config/cluster-broker-{1,2,3}.properties`` start a three-broker cluster
(ZooKeeper mode) that confluent-kafka and kafka-python use with an RF=3 topic. Only the
ports, ZooKeeper's address and the data directories are given as overrides."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTP

from sluice.config import BrokerConfig
from sluice.metastore.zk_server import ZooKeeperServer
from support.brokers import BrokerProcess
from support.waiting import wait_until

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"


@pytest.fixture
def example_cluster(cluster_prerequisites: None, tmp_path: Path) -> Iterator[list[BrokerProcess]]:
    with ExitStack() as stack:
        zk = stack.enter_context(ZooKeeperServer())
        procs = []
        for n in (1, 2, 3):
            proc = BrokerProcess(
                tmp_path / f"broker-{n}",
                config=CONFIG_DIR / f"cluster-broker-{n}.properties",
                zookeeper_connect=zk.connect_string,
            )
            proc.overrides["advertised_listeners"] = f"PLAINTEXT://127.0.0.1:{proc.port}"
            stack.callback(proc.stop)
            procs.append(proc.start())
        yield procs


def test_example_cluster_serves_an_rf3_topic(example_cluster: list[BrokerProcess]) -> None:
    bootstrap = ",".join(p.bootstrap for p in example_cluster)
    topic = "example-cluster"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 30, "three brokers")
    # the files' defaults: 3 partitions, 3 replicas
    admin.create_topics([NewTopic(topic)])[topic].result(30)

    def fully_replicated() -> bool:
        partitions = admin.list_topics(topic, timeout=5).topics[topic].partitions
        return len(partitions) == 3 and all(
            sorted(p.replicas) == sorted(p.isrs) == [1, 2, 3] for p in partitions.values()
        )

    wait_until(fully_replicated, 30, "3 partitions with 3 in-sync replicas")
    assert (
        BrokerConfig.from_properties(CONFIG_DIR / "cluster-broker-1.properties")[
            "min.insync.replicas"
        ]
        == 2
    )

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(30):
        producer.produce(topic, key=b"k%d" % (i % 5), value=b"c%d" % i)
    assert producer.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(30):
        kp.send(topic, key=b"k%d" % (i % 5), value=b"p%d" % i).get(timeout=30)
    kp.close()
    expected = sorted([b"c%d" % i for i in range(30)] + [b"p%d" % i for i in range(30)])

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10_000
    )
    consumer.assign([KpTP(topic, p) for p in range(3)])
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == 60:
            break
    consumer.close()
    assert sorted(got) == expected

    cc = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "example-cluster-group",
        "auto.offset.reset": "earliest",
    })  # fmt: skip
    cc.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        msg = cc.poll(1.0)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
        if len(values) == 60:
            break
    cc.close()
    assert sorted(values) == expected
