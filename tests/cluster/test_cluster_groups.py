"""Consumer groups on a 3-broker cluster: ``__consumer_offsets`` is replicated, the
coordinator is the leader of the group's offsets partition, and committed offsets
survive kill -9 of the coordinator's broker (read back with a pure-Python client)."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sluice.testing import EmbeddedCluster
from support.cluster import partition_metadata
from support.waiting import wait_until

TOPIC = "orders"
PARTITIONS = 3
RECORDS = 300
GROUP = "billing"


def _produce(bootstrap: str) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "log_level": 0}
    )
    for i in range(RECORDS):
        producer.produce(TOPIC, str(i).encode(), key=str(i % 17).encode())
    assert producer.flush(30) == 0


def _consume_and_commit(bootstrap: str, count: int) -> set[int]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
         "auto.offset.reset": "earliest", "log_level": 0}
    )  # fmt: skip
    consumer.subscribe([TOPIC])
    seen: set[int] = set()
    try:

        def enough() -> bool:
            for msg in consumer.consume(500, 0.2):
                if msg.error() is None:
                    seen.add(int(msg.value()))
            return len(seen) >= count

        wait_until(enough, 60, f"{count} records through group {GROUP}")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen


def test_committed_offsets_survive_the_coordinators_death(cluster3: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(15)
    _produce(cluster3.bootstrap_servers)

    first = _consume_and_commit(cluster3.bootstrap_servers, RECORDS // 2)

    offsets_md = wait_until(
        lambda: (p := partition_metadata(cluster3.bootstrap_servers, "__consumer_offsets"))
        and p.leader >= 0 and len(p.isrs) == 3 and p,
        30, "__consumer_offsets replicated to 3 brokers",
    )  # fmt: skip
    assert sorted(offsets_md.replicas) == [1, 2, 3]
    coordinator = offsets_md.leader
    cluster3.kill(coordinator)
    survivors = [b for b in cluster3.broker_ids if b != coordinator]
    bootstrap = ",".join(cluster3.bootstrap_of(b) for b in survivors)
    wait_until(
        lambda: (p := partition_metadata(bootstrap, "__consumer_offsets"))
        and p.leader in survivors and p,
        45, "a new coordinator",
    )  # fmt: skip

    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","), group_id=GROUP, enable_auto_commit=False,
        auto_offset_reset="earliest", consumer_timeout_ms=1000,
    )  # fmt: skip
    try:
        # A partition the first consumer never read from has no committed offset.
        committed = wait_until(
            lambda: (c := {p: consumer.committed(KTP(TOPIC, p)) or 0 for p in range(PARTITIONS)})
            and sum(c.values()) and c,
            45, "committed offsets from the new coordinator",
        )  # fmt: skip
        assert sum(committed.values()) == len(first)
        consumer.subscribe([TOPIC])
        rest: list[int] = []

        def drained() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                rest.extend(int(r.value) for r in records)
            return len(first) + len(rest) >= RECORDS

        wait_until(drained, 60, "the rest of the records after failover")
    finally:
        consumer.close()
    assert not first & set(rest), "records committed before the failover were read again"
    assert first | set(rest) == set(range(RECORDS))
