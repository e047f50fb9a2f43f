"""Clusters under load for the cluster tests: a numbered idempotent producer, what each
broker thinks leads, and reading every partition back to audit what was acknowledged."""

from __future__ import annotations

import itertools
import time
from typing import Any

from sluice.testing import EmbeddedCluster
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


class NumberedProducer:
    """An idempotent acks=all confluent-kafka producer on a background thread, sending
    ``"<partition>:<seq>"`` to each partition in turn; records which sends were
    acknowledged (in delivery order per partition) and which failed."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate_per_s: float) -> None:
        import threading

        from confluent_kafka import Producer

        self.topic, self.partitions = topic, partitions
        self.interval = 1 / rate_per_s
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
             "linger.ms": 2, "delivery.timeout.ms": 120000, "log_level": 0}
        )  # fmt: skip
        self.sent = 0
        self.acked: dict[int, list[int]] = {p: [] for p in range(partitions)}
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> NumberedProducer:
        self._thread.start()
        return self

    @property
    def acked_count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed.append(str(err))
            return
        partition, seq = msg.value().decode().split(":")
        self.acked[int(partition)].append(int(seq))

    def _run(self) -> None:
        seqs = [0] * self.partitions
        next_at = time.monotonic()
        while not self._stop.is_set():
            p = self.sent % self.partitions
            value = f"{p}:{seqs[p]}".encode()
            try:
                self.producer.produce(self.topic, value, partition=p, on_delivery=self._delivered)
            except BufferError:
                self.producer.poll(0.05)
                continue
            seqs[p] += 1
            self.sent += 1
            self.producer.poll(0)
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)

    def stop(self, flush_timeout_s: float = 120) -> int:
        """Stop sending and wait for every outstanding delivery; returns how many remain."""
        self._stop.set()
        self._thread.join(10)
        return int(self.producer.flush(flush_timeout_s))


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


def watermarks(
    bootstrap: str, topic: str, partition: int, timeout_s: float = 60
) -> tuple[int, int]:
    """(low, high) watermarks of ``topic``-``partition``, asked by a new client each try.

    A client kept across tries could wait in vain: librdkafka's query_watermark_offsets
    takes a partition that its cached metadata shows without a leader as a lasting error
    (at once "Local: Unknown partition", without asking again until metadata.max.age.ms,
    15 minutes), and just after an election a broker that the controller's UpdateMetadata
    has not reached yet still answers "no leader"."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    def query() -> tuple[int, int]:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
             "log_level": 0}
        )  # fmt: skip
        try:
            low, high = consumer.get_watermark_offsets(CTP(topic, partition), timeout=5)
            return int(low), int(high)
        finally:
            consumer.close()

    return wait_until(query, timeout_s, f"watermarks of {topic}-{partition}")


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


def audit(acked: dict[int, list[int]], read: dict[int, list[bytes]]) -> dict[str, int]:
    """Counts of acknowledged records lost, duplicated and reordered in what was read."""
    lost = duplicated = reordered = 0
    for p, seqs in acked.items():
        got = [int(v.decode().split(":")[1]) for v in read.get(p, [])]
        counts: dict[int, int] = {}
        for s in got:
            counts[s] = counts.get(s, 0) + 1
        duplicated += sum(c - 1 for c in counts.values() if c > 1)
        lost += sum(1 for s in seqs if s not in counts)
        firsts: list[int] = []
        seen: set[int] = set()
        for s in got:
            if s not in seen:
                seen.add(s)
                firsts.append(s)
        reordered += sum(1 for a, b in itertools.pairwise(firsts) if b < a)
    return {"lost": lost, "duplicated": duplicated, "reordered": reordered}
