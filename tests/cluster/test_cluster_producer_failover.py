"""Sluice's own Producer against a 3-broker cluster: acks=all with idempotence, the
partition leader killed with kill -9 in the middle of a stream of sends. Every send
completes (acknowledged, or failed with a KafkaException), and a consumer then reads
each acknowledged record exactly once: no loss, no duplicates.

(A stopped single broker failing sends after delivery.timeout.ms is covered by
tests/client/test_client_producer.py::test_stopped_broker_fails_sends_after_delivery_timeout.)
"""

from __future__ import annotations

import time
from typing import Any

from sluice.client import Admin, Consumer, KafkaException, NewTopic, Producer, TopicPartition
from sluice.testing import EmbeddedCluster
from support.waiting import wait_until

TOPIC = "failover"
RECORDS = 400


def _partition(bootstrap: str, topic: str) -> Any:
    """Partition 0's metadata (leader_id, isr_nodes), or None."""
    with Admin({"bootstrap.servers": bootstrap, "request.timeout.ms": 3000}) as admin:
        body = admin._client.refresh_metadata([topic])
    for t in body.topics:
        if t.name == topic and not t.error_code:
            for p in t.partitions:
                if int(p.partition_index) == 0 and not p.error_code:
                    return p
    return None


def _read_all(bootstrap: str, topic: str) -> list[bytes]:
    """Every record of partition 0, up to its high watermark."""
    tp = TopicPartition(topic, 0)
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        end: int = wait_until(lambda: consumer.end_offsets([tp]).get(tp) or 0, 30, "the log end")
        consumer.assign([tp])
        consumer.seek(tp, 0)
        values: list[bytes] = []
        offsets: list[int] = []

        def done() -> bool:
            for record in consumer.poll(0.2):
                offsets.append(record.offset)
                values.append(record.value or b"")
            return bool(offsets) and offsets[-1] >= end - 1

        wait_until(done, 30, f"records up to offset {end} from {bootstrap}")
    assert offsets == sorted(set(offsets)), "offsets repeat or go backwards"
    return values


def test_idempotent_producer_survives_leader_kill(cluster3: EmbeddedCluster) -> None:
    with Admin({"bootstrap.servers": cluster3.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])
    md: Any = wait_until(
        lambda: (p := _partition(cluster3.bootstrap_servers, TOPIC))
        and p.leader_id >= 0 and len(p.isr_nodes) == 3 and p,
        30, "ISR of 3",
    )  # fmt: skip
    leader = int(md.leader_id)

    producer = Producer({
        "bootstrap.servers": cluster3.bootstrap_servers, "acks": "all",
        "enable.idempotence": True, "linger.ms": 5, "request.timeout.ms": 5000,
        "delivery.timeout.ms": 60_000, "retry.backoff.ms": 100,
    })  # fmt: skip
    futures = []
    started = time.monotonic()
    try:
        for i in range(RECORDS):
            futures.append(producer.send(TOPIC, f"record-{i}".encode()))
            if i == RECORDS // 2:
                cluster3.kill(leader)  # kill -9, with records in flight
            time.sleep(0.002)
        acked: list[bytes] = []
        errors: list[BaseException] = []
        for i, future in enumerate(futures):
            try:
                future.get(timeout=90)
                acked.append(f"record-{i}".encode())
            except KafkaException as exc:  # a clear, typed error
                assert str(exc), "an error without a message"
                errors.append(exc)
    finally:
        producer.close(10)
    assert time.monotonic() - started < 120
    assert len(acked) + len(errors) == RECORDS
    assert len(acked) > RECORDS // 2, f"only {len(acked)} acknowledged; errors: {errors[:3]}"

    survivors = ",".join(cluster3.bootstrap_of(b) for b in cluster3.broker_ids if b != leader)
    new: Any = wait_until(
        lambda: (p := _partition(survivors, TOPIC)) and p.leader_id not in (-1, leader) and p,
        45, "a new leader",
    )  # fmt: skip
    assert int(new.leader_id) in md.isr_nodes

    values = _read_all(survivors, TOPIC)
    assert len(values) == len(set(values)), "duplicates in the log"
    missing = set(acked) - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
