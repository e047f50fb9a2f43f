"""Clusters under load for the cluster tests: a numbered idempotent producer, what each
broker thinks leads, and reading every partition back to audit what was acknowledged
(with ``sluice chaos``'s clients and checker, :mod:`sluice.testing.chaos`)."""

from __future__ import annotations

import itertools
from typing import Any

from sluice.testing import EmbeddedCluster
from sluice.testing.chaos import CheckResult, History, check
from sluice.testing.chaos.clients import Writer, read_all, watermarks
from support.waiting import wait_until


def partition_metadata(bootstrap: str, topic: str, partition: int = 0) -> Any:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    md = admin.list_topics(topic=topic, timeout=5)
    t = md.topics.get(topic)
    if t is None or t.error is not None or partition not in t.partitions:
        return None
    p = t.partitions[partition]
    return p if p.error is None else None


def numbered_producer(
    bootstrap: str, topic: str, partitions: int, rate_per_s: float
) -> tuple[History, Writer]:
    """An idempotent acks=all confluent-kafka producer on a background thread, sending
    numbered values to each partition in turn (``sluice chaos``'s :class:`Writer`), and
    the history it records every send, acknowledgement and failure into."""
    history = History()
    writer = Writer(bootstrap, topic, partitions, history, itertools.count(),
                    rate_per_s=rate_per_s, delivery_timeout_ms=120_000)  # fmt: skip
    return history, writer.start()


def audit(history: History, bootstrap: str, topic: str, partitions: int) -> CheckResult:
    """Read every partition back from ``bootstrap`` and check the history as ``sluice
    chaos`` does: nothing acknowledged lost, duplicated, reordered or moved."""
    read_all(bootstrap, topic, partitions, history)
    return check(history)


def leaders_by_broker(cluster: EmbeddedCluster, topic: str, partition: int = 0) -> dict[int, int]:
    """Running broker id -> the leader of ``topic``-``partition`` in that broker's own
    metadata cache (-1: no leader, -2: topic unknown there). The brokers hear of an
    election each from its own UpdateMetadata, so for a moment they disagree; ``_state``
    and ``partition_metadata`` ask one broker, whichever the client picks."""
    leaders = {}
    for broker_id in cluster.broker_ids:
        if cluster.is_running(broker_id):
            body = cluster.raw_metadata(broker_id, [topic])
            found = [p.leader_id for t in body.topics for p in t.partitions
                     if p.partition_index == partition]  # fmt: skip
            leaders[broker_id] = int(found[0]) if found else -2
    return leaders


def read_partitions(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """Every record of every partition from offset 0 up to its high watermark."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    ends = {p: watermarks(bootstrap, topic, p)[1] for p in range(partitions)}
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
         "log_level": 0}
    )  # fmt: skip
    try:
        consumer.assign([CTP(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        positions = dict.fromkeys(range(partitions), 0)
        errors: list[str] = []

        def done() -> bool:
            for msg in consumer.consume(1000, 0.2):
                if msg.error() is None:
                    p = msg.partition()
                    if msg.offset() != positions[p]:
                        errors.append(f"{topic}-{p}: offset {msg.offset()} after {positions[p]}")
                    out[p].append(msg.value())
                    positions[p] = msg.offset() + 1
            return all(positions[p] >= ends[p] for p in range(partitions))

        wait_until(done, 120, f"every record of {topic}")
        assert not errors, errors
    finally:
        consumer.close()
    return out
