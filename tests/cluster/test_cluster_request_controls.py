"""Request controls on the brokers of an in-process EmbeddedCluster: each broker has its
own, a Produce the partition leader answers NOT_LEADER_OR_FOLLOWER once is retried by
confluent-kafka and kafka-python, and a control registered on a stopped broker applies
once it is restarted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.testing import EmbeddedCluster, respond
from support.waiting import wait_until

TOPIC = "controlled"
DELAY_S = 0.5


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers=3, zookeeper=False) as c:
        yield c


def _not_leader(request: Request) -> Any:
    return respond(
        request,
        responses=[
            {"name": t.name, "partition_responses": [
                {"index": p.index, "error_code": ErrorCode.not_leader_or_follower,
                 "base_offset": -1}
                for p in t.partition_data
            ]}
            for t in request.body.topic_data
        ],
    )  # fmt: skip


def _leader(bootstrap: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    partition = admin.list_topics(topic=TOPIC, timeout=5).topics[TOPIC].partitions[0]
    return int(partition.leader) if len(partition.isrs) == 3 else -1


def test_controls_per_broker_and_across_a_restart(cluster: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(15)
    wait_until(lambda: _leader(cluster.bootstrap_servers) >= 0, 30, "a replicated leader")
    leader = _leader(cluster.bootstrap_servers)

    # The leader answers the first Produce NOT_LEADER_OR_FOLLOWER; the client retries.
    first = cluster.control(leader, ApiKey.PRODUCE, _not_leader)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    errors: list[object] = []
    producer.produce(TOPIC, b"confluent", on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(30) == 0 and errors == [None]
    assert first.acted == 1

    second = cluster.control(leader, ApiKey.PRODUCE, _not_leader)
    python_producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, acks="all", retry_backoff_ms=50
    )
    try:
        metadata = python_producer.send(TOPIC, b"kafka-python").get(timeout=30)
    finally:
        python_producer.close()
    assert metadata.offset == 1  # each record appended once
    assert second.acted == 1
    others = [b for b in cluster.broker_ids if b != leader]
    assert all(len(cluster.controls[b]) == 0 for b in others)

    # A control registered while a broker is down applies once it is back.
    restarted = others[0]
    cluster.stop_broker(restarted)
    delayed = cluster.control(
        restarted,
        ApiKey.METADATA,
        lambda request: (
            asyncio.sleep(DELAY_S)
            if any(t.name == TOPIC for t in request.body.topics or ())
            else None
        ),
    )
    cluster.restart_broker(restarted)
    cluster.wait_ready()
    direct = AdminClient({"bootstrap.servers": cluster.bootstrap_of(restarted)})
    started = time.monotonic()
    assert 0 in direct.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    assert time.monotonic() - started >= DELAY_S * 0.9
    assert delayed.acted == 1
