"""Clusters under load for the cluster tests: a numbered idempotent producer, what each
broker thinks leads, and reading every partition back to audit what was acknowledged
(with ``sluice chaos``'s clients and checker, :mod:`sluice.testing.chaos`)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
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
    bootstrap: str,
    topic: str,
    partitions: int,
    rate_per_s: float,
    client_config: Mapping[str, object] | None = None,
) -> tuple[History, Writer]:
    """An idempotent acks=all confluent-kafka producer on a background thread, sending
    numbered values to each partition in turn (``sluice chaos``'s :class:`Writer`), and
    the history it records every send, acknowledgement and failure into.
    ``client_config``: librdkafka settings added (security)."""
    history = History()
    writer = Writer(bootstrap, topic, partitions, history, itertools.count(),
                    rate_per_s=rate_per_s, delivery_timeout_ms=120_000,
                    client_config=client_config)  # fmt: skip
    return history, writer.start()


def audit(
    history: History,
    bootstrap: str,
    topic: str,
    partitions: int,
    client_config: Mapping[str, object] | None = None,
) -> CheckResult:
    """Read every partition back from ``bootstrap`` and check the history as ``sluice
    chaos`` does: nothing acknowledged lost, duplicated, reordered or moved."""
    read_all(bootstrap, topic, partitions, history, client_config=client_config)
    return check(history)


def leaders_and_isrs(
    bootstrap: str, topic: str, client_config: Mapping[str, object] | None = None
) -> dict[int, tuple[int, list[int]]]:
    """Partition -> (leader, ISR) of ``topic`` as a confluent-kafka client sees it."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, **(client_config or {})})
    found = admin.list_topics(topic=topic, timeout=5).topics[topic]
    return {p: (m.leader, list(m.isrs)) for p, m in found.partitions.items()}


def kill_9_cycles(
    cluster: EmbeddedCluster,
    topic: str,
    partitions: int,
    cycles: int,
    *,
    producer_config: Mapping[str, object] | None = None,
    admin_config: Mapping[str, object] | None = None,
) -> tuple[History, list[str]]:
    """The no-lost-writes run on ``topic`` (RF 3, created already): a numbered idempotent
    acks=all producer (300 records/s) while each cycle kill -9s the leader of a partition
    (every third cycle the controller), waits for new leaders and for progress without
    it, restarts it and waits for it to be back in every ISR. Returns the producer's
    history (every send acknowledged or failed) and who was killed, in order."""

    def state(bootstrap: str) -> dict[int, tuple[int, list[int]]]:
        return leaders_and_isrs(bootstrap, topic, admin_config)

    def fully_replicated() -> bool:
        found = state(cluster.bootstrap_servers)
        return len(found) == partitions and all(
            leader >= 0 and len(isr) == 3 for leader, isr in found.values()
        )

    wait_until(fully_replicated, 30, "every partition with a leader and 3 in-sync replicas")
    history, producer = numbered_producer(cluster.bootstrap_servers, topic, partitions, 300,
                                          producer_config)  # fmt: skip
    killed: list[str] = []
    try:
        for cycle in range(cycles):
            floor = history.acked_count
            wait_until(lambda f=floor: history.acked_count >= f + 100, 60, "producer progress")
            if cycle % 3 == 2:
                victim, why = cluster.controller_id, "controller"
            else:
                victim = state(cluster.bootstrap_servers)[cycle % partitions][0]
                why = f"leader of partition {cycle % partitions}"
            assert victim >= 0
            killed.append(f"{victim} ({why})")
            cluster.kill_broker(victim)
            survivors = ",".join(cluster.bootstrap_of(b) for b in cluster.broker_ids if b != victim)
            wait_until(
                lambda v=victim, s=survivors: [
                    leader not in (-1, v) for leader, _ in state(s).values()
                ] == [True] * partitions,
                60, f"new leaders after killing broker {victim}",
            )  # fmt: skip
            floor = history.acked_count
            wait_until(lambda f=floor: history.acked_count >= f + 100, 60, "progress without it")
            cluster.restart_broker(victim)
            wait_until(fully_replicated, 90, f"broker {victim} back in every ISR")
        floor = history.acked_count
        wait_until(lambda: history.acked_count >= floor + 100, 60, "progress at the end")
    finally:
        remaining = producer.stop()
    assert remaining == 0, f"{remaining} sends never completed"
    return history, killed


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
