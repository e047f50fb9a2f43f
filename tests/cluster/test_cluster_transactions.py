"""Transactions on a 3-broker cluster: ``__transaction_state`` is replicated, the
transaction coordinator is the leader of the id's partition, and a transaction in flight
when that broker is killed -9 either commits or aborts whole (never half) while the
transactional id keeps working on the new coordinator."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sluice.testing import EmbeddedCluster
from support import txn_transform
from support.cluster import partition_metadata
from support.waiting import wait_until

TOPIC = "payments"
PARTITIONS = 3
TXN_ID = "payments-writer"


@pytest.fixture
def txn_cluster(cluster_prerequisites: None) -> Iterator[EmbeddedCluster]:
    """Broker processes on a real ZooKeeper, so a kill is a real SIGKILL."""
    overrides = {"transaction.state.log.num.partitions": 1}
    with EmbeddedCluster(
        brokers=3, broker_ids=[1, 2, 3], overrides=overrides, zookeeper=True
    ) as cluster:
        yield cluster


def _producer(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID,
                         "linger.ms": 5, "log_level": 0})  # fmt: skip
    producer.init_transactions(60)
    return producer


def _read_committed(bootstrap: str, expected: int, timeout_s: float = 60) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
         "isolation.level": "read_committed", "enable.auto.commit": False, "log_level": 0}
    )  # fmt: skip
    consumer.assign([CkTopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and len(values) < expected:
        values += [m.value() for m in consumer.consume(100, 0.2) if m.error() is None]
    values += [m.value() for m in consumer.consume(100, 1.0) if m.error() is None]
    consumer.close()
    return values


def _txn(producer: Producer, tag: str, n: int = 9) -> set[bytes]:
    values = {f"{tag}-{i}".encode() for i in range(n)}
    for value in sorted(values):
        producer.produce(TOPIC, value, key=value)  # keyed: spread over the partitions
    return values


def test_in_flight_transaction_survives_the_coordinators_death(
    txn_cluster: EmbeddedCluster,
) -> None:
    admin = AdminClient({"bootstrap.servers": txn_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(15)
    producer = _producer(txn_cluster.bootstrap_servers)
    producer.begin_transaction()
    first = _txn(producer, "t1")
    producer.commit_transaction(60)
    state = wait_until(
        lambda: (p := partition_metadata(txn_cluster.bootstrap_servers, "__transaction_state"))
        and p.leader >= 0 and len(p.isrs) == 3 and p,
        30, "__transaction_state replicated to 3 brokers",
    )  # fmt: skip
    assert sorted(state.replicas) == [1, 2, 3]
    assert sorted(_read_committed(txn_cluster.bootstrap_servers, len(first))) == sorted(first)

    producer.begin_transaction()
    second = _txn(producer, "t2")
    producer.flush(30)
    coordinator = state.leader
    txn_cluster.kill(coordinator)
    survivors = [b for b in txn_cluster.broker_ids if b != coordinator]
    bootstrap = ",".join(txn_cluster.bootstrap_of(b) for b in survivors)
    try:
        producer.commit_transaction(90)
        committed_second = True
    except KafkaException as exc:
        assert not exc.args[0].fatal(), exc
        producer.abort_transaction(90)
        committed_second = False

    producer.begin_transaction()
    third = _txn(producer, "t3")
    producer.commit_transaction(90)
    expected = first | third | (second if committed_second else set())
    values = _read_committed(bootstrap, len(expected))
    assert len(values) == len(set(values)), "duplicates"
    assert set(values) == expected, (committed_second, sorted(set(values) ^ expected))

    # No transaction was left hanging: every partition's LSO reached its HW.
    def ends(isolation: str) -> list[int]:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{isolation}",
                             "isolation.level": isolation, "log_level": 0})  # fmt: skip
        try:
            return [
                consumer.get_watermark_offsets(CkTopicPartition(TOPIC, p), 30, cached=False)[1]
                for p in range(PARTITIONS)
            ]
        finally:
            consumer.close()

    wait_until(lambda: ends("read_committed") == ends("read_uncommitted"), 30, "LSO == HW")


@pytest.mark.slow
def test_exactly_once_pipeline_on_a_cluster_across_kill9(txn_cluster: EmbeddedCluster) -> None:
    """The consume-transform-produce process of the single-node test, on a 3-broker
    cluster with replicated topics: the process is killed -9 each round, and every other
    round a broker too (restarted afterwards). The committed output holds every input
    record exactly once, in order."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    rounds, chunk = 4, 30
    source, sink, group = "etl-in", "etl-out", "etl-group"
    bootstrap = txn_cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name in (source, sink):
        admin.create_topics([NewTopic(name, 1, 3)])[name].result(15)
    seed = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 0})
    script = Path(txn_transform.__file__)
    log_path = txn_cluster.data_dir / "transform.log"

    def start() -> subprocess.Popen[bytes]:
        with log_path.open("ab") as log:
            return subprocess.Popen(
                [sys.executable, str(script), bootstrap, source, sink, group, "etl-txn"],
                stdout=log, stderr=log, start_new_session=True,
            )  # fmt: skip

    def committed_output() -> list[bytes]:
        """Everything committed to the sink. Read up to its last stable offset (what
        ListOffsets answers a read_committed client), not to the first empty poll: right
        after a broker's restart the first polls can come back empty while the client
        finds the leader."""
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"audit-{time.monotonic_ns()}",
             "isolation.level": "read_committed", "enable.auto.commit": False,
             "log_level": 0}
        )  # fmt: skip
        values: list[bytes] = []
        try:
            sink_0 = CkTopicPartition(sink, 0)
            end = wait_until(  # a (low, high) pair, once the client knows the partition
                lambda: consumer.get_watermark_offsets(sink_0, 5, False), 30, "the sink's end"
            )[1]
            consumer.assign([CkTopicPartition(sink, 0, 0)])
            deadline = time.monotonic() + 30
            while end > 0 and time.monotonic() < deadline:
                batch = consumer.consume(500, 1.0)
                values += [m.value() for m in batch if m.error() is None]
                if not batch and consumer.position([sink_0])[0].offset >= end:
                    break
        finally:
            consumer.close()
        return values

    transform = start()
    try:
        for round_ in range(rounds):
            done_before = len(committed_output())  # before the input: it may be quick
            for i in range(round_ * chunk, (round_ + 1) * chunk):
                seed.produce(source, f"{i:04d}".encode())
            assert seed.flush(60) == 0
            wait_until(lambda n=done_before: len(committed_output()) >= n + 10, 90,  # type: ignore[misc]
                     f"progress in round {round_}: {log_path.read_text()[-1500:]}")  # fmt: skip
            victim = txn_cluster.broker_ids[round_ // 2] if round_ % 2 == 1 else None
            if victim is not None:
                txn_cluster.kill(victim)  # while the transform is mid-stream
            os.killpg(transform.pid, signal.SIGKILL)
            transform.wait(10)
            if victim is not None:
                txn_cluster.restart_broker(victim)
            transform = start()
        expected = [f"out-{i:04d}".encode() for i in range(rounds * chunk)]
        wait_until(lambda: len(committed_output()) >= len(expected), 120, "all output")
        assert committed_output() == expected
    finally:
        if transform.poll() is None:
            os.killpg(transform.pid, signal.SIGKILL)
            transform.wait(10)
