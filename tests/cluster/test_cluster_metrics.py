"""Each broker's metrics endpoint in a 3-broker cluster (in process): exactly one broker
reports itself the active controller; a stopped broker leaves its partitions
under-replicated where they are led, the controller counts the elections that moved
their leaders, and its return shows as ISR expansions."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from sluice.testing import EmbeddedCluster
from support.waiting import wait_until

TOPIC = "metrics-rf3"
PARTITIONS = 3


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    overrides = {"metrics.port": 0, "zookeeper.session.timeout.ms": 2000}
    with EmbeddedCluster(brokers=3, zookeeper=False, overrides=overrides) as c:
        yield c


def gauge(cluster: EmbeddedCluster, broker_id: int, name: str) -> float:
    broker = cluster.embedded[broker_id].broker
    assert broker is not None and broker.metrics_endpoint is not None
    with urllib.request.urlopen(broker.metrics_endpoint.url, timeout=10) as answer:
        text = answer.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and not sample.labels:
                return sample.value
    raise AssertionError(f"{name} not in broker {broker_id}'s metrics")


def total(cluster: EmbeddedCluster, brokers: list[int], name: str) -> float:
    return sum(gauge(cluster, b, name) for b in brokers)


def test_controller_and_under_replicated_partitions(cluster: EmbeddedCluster) -> None:
    active = "kafka_controller_kafkacontroller_activecontrollercount"
    everyone = list(cluster.broker_ids)
    counts = wait_until(
        lambda: (c := {b: gauge(cluster, b, active) for b in everyone}) and sum(c.values()) == 1
        and c, 30, "one active controller",
    )  # fmt: skip
    controller = next(b for b, count in counts.items() if count == 1)
    assert controller == cluster.controller_id

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(15)
    urp = "kafka_server_replicamanager_underreplicatedpartitions"
    wait_until(lambda: total(cluster, everyone, urp) == 0, 30, "every replica in sync")
    with_three = sum(  # every partition with three replicas, __consumer_offsets' too
        1 for topic in admin.list_topics(timeout=10).topics.values()
        for partition in topic.partitions.values() if len(partition.replicas) == 3
    )  # fmt: skip
    assert with_three >= PARTITIONS, with_three
    elections = "kafka_controller_controllerstats_leaderelections_total"
    elected = gauge(cluster, controller, elections)

    stopped = next(b for b in everyone if b != controller)
    cluster.stop_broker(stopped)  # controlled shutdown: its leaders move, it leaves the ISRs
    alive = [b for b in everyone if b != stopped]
    wait_until(lambda: total(cluster, alive, urp) == with_three, 30,
               "its partitions under-replicated where they are led now")  # fmt: skip
    assert gauge(cluster, controller, elections) > elected
    assert total(cluster, alive, active) == 1

    expands = "kafka_server_replicamanager_isrexpands_total"
    before = total(cluster, alive, expands)
    cluster.start(stopped)
    wait_until(lambda: total(cluster, everyone, urp) == 0, 30, "back in sync")
    assert total(cluster, alive, expands) >= before + 1


def test_replication_bytes_in_and_out(cluster: EmbeddedCluster) -> None:
    """What leaders send to followers is what followers append, and a replication factor
    of 3 copies every produced byte twice."""
    from confluent_kafka import Producer

    everyone = list(cluster.broker_ids)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(15)
    wait_until(
        lambda: len(admin.list_topics(topic="replicated", timeout=5).topics["replicated"]
                    .partitions[0].isrs) == 3, 30, "three in sync",
    )  # fmt: skip
    out_name = "kafka_server_brokertopicmetrics_replicationbytesout_total"
    in_name = "kafka_server_brokertopicmetrics_replicationbytesin_total"
    before = total(cluster, everyone, in_name)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "linger.ms": 0, "log_level": 0})  # fmt: skip
    for i in range(200):
        producer.produce("replicated", b"%04d" % i + b"x" * 1000, partition=0)
    assert producer.flush(15) == 0
    produced = 200 * 1004
    wait_until(
        lambda: total(cluster, everyone, in_name) - before >= 2 * produced, 30,
        "two copies of every produced byte appended by followers",
    )  # fmt: skip
    wait_until(
        lambda: total(cluster, everyone, in_name) == total(cluster, everyone, out_name), 30,
        "as many bytes appended by followers as leaders sent",
    )  # fmt: skip
    rates = ("kafka_server_leaderreplication_byte_rate",
             "kafka_server_followerreplication_byte_rate")  # fmt: skip
    assert all(gauge(cluster, everyone[0], name) == 0 for name in rates)  # no throttle set
