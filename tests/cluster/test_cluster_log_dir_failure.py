"""The leader's log dir fails in a 3-broker cluster: leadership moves, clients fail over.

confluent-kafka produces to a partition replicated three times (acks=all). Halfway, the
leader's log dir starts refusing writes (``ENOSPC``, injected at the file layer with
``support.disk_faults``: the in-process brokers share this process, and the failure is
confined to the leader's data dir). The leader answers KAFKA_STORAGE_ERROR and tells
the controller through /log_dir_event_notification; the controller moves the leadership
to another replica of the ISR, and the producer, retrying, delivers every record there.
Every acknowledged record is read back, and the failed broker logged its dir once."""

from __future__ import annotations

import errno
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from sluice.testing import EmbeddedCluster
from support.disk_faults import DiskFaults
from support.waiting import wait_until

TOPIC = "replicated"
RECORDS = 2000


def _partition(cluster: EmbeddedCluster, broker_id: int) -> Any:
    """Partition 0 of the topic as ``broker_id``'s metadata cache has it, or None."""
    for topic in cluster.raw_metadata(broker_id, [TOPIC]).topics:
        for p in topic.partitions:
            if int(p.partition_index) == 0 and not p.error_code:
                return p
    return None


def _read_all(bootstrap: str) -> list[bytes]:
    import uuid

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})  # fmt: skip
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=15)
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        last = [-1]

        def caught_up() -> bool:
            for message in consumer.consume(1000, 0.5):
                if not message.error():
                    values.append(message.value())
                    last[0] = message.offset()
            return last[0] >= end - 1

        wait_until(caught_up, 60, f"{TOPIC} read up to offset {end}")
        return values
    finally:
        consumer.close()


def test_a_failed_log_dir_moves_leadership_and_loses_nothing_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with EmbeddedCluster(brokers=3, broker_ids=[1, 2, 3], data_dir=tmp_path) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        first: Any = wait_until(
            lambda: (p := _partition(cluster, 1)) and p.leader_id > 0
            and len(p.isr_nodes) == 3 and p,
            30, "an ISR of 3",
        )  # fmt: skip
        leader = int(first.leader_id)
        faults = DiskFaults(monkeypatch, tmp_path / f"data-{leader}", errno.ENOSPC)

        acked: set[int] = set()
        errors: list[str] = []

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                acked.add(int(message.value()))
            else:
                errors.append(error.name())

        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5,
             "message.timeout.ms": 60_000, "retry.backoff.ms": 100}
        )  # fmt: skip
        with caplog.at_level(logging.INFO):
            for i in range(RECORDS):
                if i == RECORDS // 2:
                    producer.flush(30)
                    faults.arm()
                producer.produce(TOPIC, b"%d" % i, on_delivery=delivered)
                producer.poll(0)
                time.sleep(0.001)
            assert producer.flush(90) == 0
        assert errors == [] and acked == set(range(RECORDS))

        others = [b for b in (1, 2, 3) if b != leader]
        moved: Any = wait_until(
            lambda: (p := _partition(cluster, others[0])) and p.leader_id in others and p,
            30, "the leadership moved",
        )  # fmt: skip
        assert leader not in moved.isr_nodes
        kept = {int(v) for v in _read_all(cluster.bootstrap_servers)}
        print(f"\n{len(acked)} records acknowledged, {len(acked & kept)} kept, "
              f"{len(acked - kept)} lost")  # fmt: skip
        assert acked <= kept
        ours = [r for r in caplog.records if r.name.startswith("sluice")]
        offline = [r.getMessage() for r in ours if " is offline: " in r.getMessage()]
        assert len(offline) == 1 and f"data-{leader}" in offline[0], offline
        faults.disarm()
