"""Replication throttles (KIP-73) on a 3-broker cluster: a replica added by a
reassignment catches up no faster than its throttle allows, whether set by
``sluice reassign-partitions --throttle`` (both sides) or by hand on the follower side
only (kafka-python's AlterConfigs), and the ISR is never held back.

The brokers measure over two windows of one second, so the first burst a throttle lets
through is about two seconds' worth; each copy is of ~6 MiB at 1 MB/s."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sluice.cli import main
from sluice.testing import EmbeddedCluster
from support.waiting import wait_until

RATE = 1_000_000
VALUE = b"v" * 10_000
RECORDS = 600  # ~6 MiB
LEAST_S = 2.5  # (6 MB - the first windows' ~2 MB) at 1 MB/s is ~4 s; unthrottled well under 1 s


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    overrides = {"replication.quota.window.num": 2, "replication.quota.window.size.seconds": 1}
    with EmbeddedCluster(brokers=3, overrides=overrides) as cluster:
        yield cluster


def _fill(cluster: EmbeddedCluster, topic: str) -> tuple[int, int, int]:
    b0, b1, b2 = cluster.broker_ids
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[b0, b1]])])[topic].result(15)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "linger.ms": 5, "log_level": 0})  # fmt: skip
    for _ in range(RECORDS):
        producer.produce(topic, VALUE, partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0
    return b0, b1, b2


def _reassign(cluster: EmbeddedCluster, topic: str, replicas: list[int], tmp_path: Path,
              *extra: str) -> float:  # fmt: skip
    """Seconds from starting the reassignment until every replica is in the ISR."""
    plan = tmp_path / f"{topic}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas}]}))  # fmt: skip
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    started = time.monotonic()
    assert main(["reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                 "--execute", "--reassignment-json-file", str(plan), *extra]) == 0  # fmt: skip

    def caught_up() -> bool:
        p = admin.list_topics(topic=topic, timeout=5).topics[topic].partitions[0]
        return sorted(p.isrs) == sorted(replicas)

    wait_until(caught_up, 60, f"{topic}: every replica in the ISR")
    return time.monotonic() - started


@pytest.mark.integration
def test_reassign_partitions_throttle_slows_the_new_replica(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    b0, b1, b2 = _fill(cluster, "moved")
    took = _reassign(cluster, "moved", [b0, b1, b2], tmp_path, "--throttle", str(RATE))
    assert took >= LEAST_S, f"6 MiB copied in {took:.2f}s under a {RATE} B/s throttle"
    # The ISR was never held back: acks=all writes went on meanwhile (checked by _fill's
    # flush before), and a write now is acknowledged by all three at once.
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "log_level": 0})  # fmt: skip
    producer.produce("moved", b"after", partition=0)
    assert producer.flush(15) == 0
    plan = tmp_path / "moved.json"
    assert main(["reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                 "--verify", "--reassignment-json-file", str(plan)]) == 0  # fmt: skip
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource("broker", str(b2))
    entries = admin.describe_configs([resource])[resource].result(15)
    assert entries["follower.replication.throttled.rate"].value == str((1 << 63) - 1)


@pytest.mark.integration
def test_a_follower_side_throttle_alone_slows_the_copy(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    b0, b1, b2 = _fill(cluster, "pulled")
    kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        kadmin.alter_configs([
            ConfigResource(ConfigResourceType.BROKER, str(b2),
                           configs={"follower.replication.throttled.rate": str(RATE)}),
            ConfigResource(ConfigResourceType.TOPIC, "pulled",
                           configs={"follower.replication.throttled.replicas": f"0:{b2}"}),
        ])  # fmt: skip
    finally:
        kadmin.close()
    took = _reassign(cluster, "pulled", [b0, b1, b2], tmp_path)
    assert took >= LEAST_S, f"6 MiB copied in {took:.2f}s under a {RATE} B/s follower throttle"
