"""A broker that dies as controller and leader, and registers again before any other
broker takes office, must not lead from the partition state it left behind: its log
may have lost a tail that state stands for (here a torn one, cut by recovery). The new
controller finds it registered after that state was written and handles it as a
bounce, so the acknowledged records survive."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sluice.testing import EmbeddedCluster
from support.cluster import read_partitions, watermarks
from support.waiting import wait_until

TOPIC = "unseen"
RECORDS = 300


@pytest.fixture
def cluster(cluster_prerequisites: None) -> Iterator[EmbeddedCluster]:
    patient = {"zookeeper.session.timeout.ms": 30_000}  # may be paused for seconds
    with EmbeddedCluster(
        brokers=3,
        broker_ids=[1, 2, 3],
        zookeeper=True,
        overrides={"auto.leader.rebalance.enable": False},
        broker_overrides={2: patient, 3: patient},
    ) as cluster:
        yield cluster


def _in_office_on_a_new_session(connect: str, old_owner: int) -> int:
    """The session that holds /controller, if it also holds /brokers/ids/1 and is not
    ``old_owner`` (broker 1 registered again and took office); else 0."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError

    zk = KazooClient(hosts=connect)
    zk.start(10)
    try:
        data, controller = zk.get("/controller")
        _, registration = zk.get("/brokers/ids/1")
    except NoNodeError:
        return 0
    finally:
        zk.stop()
        zk.close()
    owner = controller.ephemeralOwner
    same = json.loads(data)["brokerid"] == 1 and owner == registration.ephemeralOwner
    return owner if same and owner != old_owner else 0


def test_a_restart_no_controller_saw_does_not_lose_acked_records(
    cluster: EmbeddedCluster,
) -> None:
    cluster.wait_ready()
    assert cluster.controller_id == 1  # the first broker started took office
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    topic = NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"})
    admin.create_topics([topic])[TOPIC].result(15)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 0, "log_level": 0})  # fmt: skip
    acked: list[bytes] = []
    for i in range(RECORDS):
        producer.produce(TOPIC, f"v{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: err or acked.append(msg.value()))  # fmt: skip
        producer.poll(0)
    assert producer.flush(30) == 0
    assert len(acked) == RECORDS

    old_owner = _in_office_on_a_new_session(cluster.zookeeper_connect, 0)
    assert old_owner
    cluster.kill_broker(1)
    segment = cluster.data_dir / "data-1" / f"{TOPIC}-0" / "00000000000000000000.log"
    with open(segment, "r+b") as f:  # a torn tail: recovery cuts the log at it
        f.truncate(segment.stat().st_size // 2)
    for other in (2, 3):  # nobody else may take office before broker 1 is back
        cluster.pause(other)
    try:
        cluster.start(1)  # registers once its old session has expired, then elects itself
        wait_until(
            lambda: _in_office_on_a_new_session(cluster.zookeeper_connect, old_owner), 40,
            "broker 1 registered again and in office",
        )  # fmt: skip
        time.sleep(1.0)  # its failover runs while the others are still paused
    finally:
        for other in (2, 3):
            cluster.resume(other)
    cluster.wait_ready(timeout_s=60)

    wait_until(
        lambda: watermarks(cluster.bootstrap_servers, TOPIC, 0)[1] >= RECORDS, 60,
        "a high watermark past every acknowledged record",
    )  # fmt: skip
    assert read_partitions(cluster.bootstrap_servers, TOPIC, 1)[0] == acked

    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers.split(","),
                             enable_auto_commit=False, consumer_timeout_ms=5000)  # fmt: skip
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        consumer.seek_to_beginning()
        values = [m.value for m in consumer][:RECORDS]
    finally:
        consumer.close()
    assert values == acked
