"""A 3-broker cluster on a real ZooKeeper: replication factor 3, acks=all, kill -9 the
leader, every acknowledged record survives, the killed broker rejoins the ISR."""

from __future__ import annotations

import json
import os

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sluice.testing import EmbeddedCluster
from support.cluster import partition_metadata
from support.waiting import wait_until

TOPIC = "replicated"
RECORDS = 300


def _create(cluster: EmbeddedCluster, topic: str, rf: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, rf, config=configs)])[topic].result(15)


def _read_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
         "auto.offset.reset": "earliest", "log_level": 0}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:

        def done() -> bool:
            for msg in consumer.consume(500, 0.2):
                if msg.error() is None:
                    values.append(msg.value())
            return len(values) >= expected

        wait_until(done, 30, f"{expected} records from {bootstrap}")
    finally:
        consumer.close()
    return values


def test_rf3_failover_keeps_acknowledged_records(cluster3: EmbeddedCluster) -> None:
    _create(cluster3, TOPIC, 3, **{"min.insync.replicas": "2"})
    _create(cluster3, "strict", 3, **{"min.insync.replicas": "3"})
    md = wait_until(
        lambda: (p := partition_metadata(cluster3.bootstrap_servers, TOPIC))
        and p.leader >= 0 and len(p.isrs) == 3 and p,
        30, "ISR of 3",
    )  # fmt: skip
    assert sorted(md.replicas) == [1, 2, 3]
    assert sorted(md.isrs) == [1, 2, 3]

    acked: list[bytes] = []
    errors: list[object] = []

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked.append(msg.value())  # type: ignore[attr-defined]
        else:
            errors.append(err)

    producer = Producer(
        {"bootstrap.servers": cluster3.bootstrap_servers, "acks": "all", "linger.ms": 5,
         "log_level": 0}
    )  # fmt: skip
    for i in range(RECORDS):
        producer.produce(TOPIC, json.dumps({"i": i}).encode(), on_delivery=delivered)
    assert producer.flush(30) == 0
    assert not errors and len(acked) == RECORDS

    leader = md.leader
    cluster3.kill(leader)
    survivors = ",".join(cluster3.bootstrap_of(b) for b in cluster3.broker_ids if b != leader)
    new = wait_until(
        lambda: (p := partition_metadata(survivors, TOPIC))
        and p.leader not in (-1, leader) and leader not in p.isrs and p,
        45, "a new leader from the ISR",
    )  # fmt: skip
    assert new.leader in md.isrs

    values = _read_all(survivors, TOPIC, RECORDS)
    assert set(acked) <= set(values)

    # A write with acks=all still works with two in-sync replicas (min.insync.replicas=2).
    producer2 = Producer({"bootstrap.servers": survivors, "acks": "all", "log_level": 0})
    producer2.produce(TOPIC, b"after-failover", on_delivery=delivered)
    assert producer2.flush(30) == 0
    assert not errors and acked[-1] == b"after-failover"

    # min.insync.replicas=3 with two live replicas: NOT_ENOUGH_REPLICAS, as in Kafka.
    wait_until(
        lambda: (p := partition_metadata(survivors, "strict")) and len(p.isrs) == 2,
        30, "the strict topic's ISR down to 2",
    )  # fmt: skip
    strict_errors: list[object] = []
    producer3 = Producer(
        {"bootstrap.servers": survivors, "acks": "all", "retries": 0, "log_level": 0}
    )
    producer3.produce("strict", b"refused", on_delivery=lambda err, msg: strict_errors.append(err))
    producer3.flush(30)
    assert len(strict_errors) == 1 and strict_errors[0] is not None
    assert strict_errors[0].name() == "NOT_ENOUGH_REPLICAS"  # type: ignore[attr-defined]

    cluster3.start(leader)
    wait_until(
        lambda: (p := partition_metadata(survivors, TOPIC)) and len(p.isrs) == 3,
        60, "the restarted broker back in the ISR",
    )  # fmt: skip
    # The rejoined replica has everything: read from it alone once it leads... or
    # simply read again through the cluster.
    assert set(acked) <= set(_read_all(cluster3.bootstrap_servers, TOPIC, RECORDS + 1))


O_DIRECT_FLAG = 0o40000  # Linux's O_DIRECT, as /proc/<pid>/fdinfo prints flags (octal)


def _direct_log_fds(pid: int, topic: str) -> list[str]:
    """The segment files of ``topic`` that process ``pid`` holds open with O_DIRECT."""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                flags = int(info.read().split("flags:")[1].split()[0], 8)
        except (OSError, IndexError, ValueError):
            continue
        if f"/{topic}-0/" in target and target.endswith(".log") and flags & O_DIRECT_FLAG:
            found.append(target)
    return found


def test_followers_write_large_batches_past_the_page_cache(cluster3: EmbeddedCluster) -> None:
    """replica.direct.io (on by default): the followers write the whole blocks of what
    they replicate with O_DIRECT; after the leader's kill -9 a follower leads and serves
    every acknowledged record, byte for byte, from those files."""
    _create(cluster3, "bulk", 3, **{"min.insync.replicas": "2"})
    md = wait_until(
        lambda: (p := partition_metadata(cluster3.bootstrap_servers, "bulk"))
        and p.leader >= 0 and len(p.isrs) == 3 and p,
        30, "ISR of 3",
    )  # fmt: skip
    producer = Producer(
        {"bootstrap.servers": cluster3.bootstrap_servers, "acks": "all", "linger.ms": 20,
         "batch.size": 1_000_000, "log_level": 0}
    )  # fmt: skip
    sent = [(f"{i:06d}".encode() * 500) for i in range(1_500)]  # 3 KB each, 4.5 MB in all
    for value in sent:
        producer.produce("bulk", value)
    assert producer.flush(60) == 0
    followers = [b for b in cluster3.broker_ids if b != md.leader]
    for broker in followers:
        assert _direct_log_fds(cluster3.procs[broker].pid, "bulk"), f"broker {broker}"
    assert not _direct_log_fds(cluster3.procs[md.leader].pid, "bulk")  # leaders: page cache
    wait_until(
        lambda: (p := partition_metadata(cluster3.bootstrap_servers, "bulk")) and len(p.isrs) == 3,
        30, "the followers caught up",
    )  # fmt: skip

    cluster3.kill(md.leader)
    survivors = ",".join(cluster3.bootstrap_of(b) for b in followers)
    wait_until(
        lambda: (p := partition_metadata(survivors, "bulk")) and p.leader in followers,
        45, "a follower leading",
    )  # fmt: skip
    assert _read_all(survivors, "bulk", len(sent)) == sent


def test_replication_factor_beyond_live_brokers_is_refused(cluster3: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    future = admin.create_topics([NewTopic("too-many", 1, 4)])["too-many"]
    try:
        future.result(15)
    except Exception as exc:
        assert "INVALID_REPLICATION_FACTOR" in str(exc) or "eplication" in str(exc)
    else:
        raise AssertionError("replication factor 4 on 3 brokers was accepted")
