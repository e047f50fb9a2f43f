"""Restarts: a clean SIGTERM shutdown skips recovery; after kill -9 everything
acknowledged is still there."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from support.brokers import BrokerProcess
from support.clients import create_topic


def produce(bootstrap: str, topic: str, n: int, prefix: str) -> list[tuple[int, int]]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2})
    acked: list[tuple[int, int]] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for i in range(n):
        producer.produce(topic, f"{prefix}-{i}".encode(), partition=i % 2, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    return acked


def read_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "r", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
    consumer.close()
    return values


def test_sigterm_restart_keeps_everything_and_skips_recovery(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    create_topic(broker.bootstrap, "durable", 2)
    acked = produce(broker.bootstrap, "durable", 500, "a")
    assert broker.stop(signal.SIGTERM) == 0
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    first_run = broker.log_path.stat().st_size
    broker.start()
    restart_log = broker.log_path.read_bytes()[first_run:].decode()
    assert "ready" in restart_log and "recovered" not in restart_log
    values = read_all(broker.bootstrap, "durable", len(acked))
    assert sorted(values) == sorted(f"a-{i}".encode() for i in range(500))
    # And the restarted broker keeps appending after the old end.
    more = produce(broker.bootstrap, "durable", 10, "b")
    assert min(off for p, off in more if p == 0) == 250
    assert broker.stop() == 0


def test_kill9_restart_keeps_everything_acknowledged(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    create_topic(broker.bootstrap, "crashy", 2)
    acked = produce(broker.bootstrap, "crashy", 400, "c")
    broker.kill9()
    broker.start()
    values = read_all(broker.bootstrap, "crashy", len(acked))
    assert sorted(values) == sorted(f"c-{i}".encode() for i in range(400))
    assert broker.stop() == 0


def test_sigint_shuts_down_cleanly(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    create_topic(broker.bootstrap, "interrupted", 2)
    produce(broker.bootstrap, "interrupted", 20, "i")
    assert broker.stop(signal.SIGINT) == 0
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    assert "stopped cleanly" in broker.log_tail(3)


def test_idle_connections_are_closed(tmp_path: Path) -> None:
    from support.wire import RawClient

    broker = BrokerProcess(tmp_path / "data", connections_max_idle_ms="300").start()
    idle = RawClient(broker.bootstrap, timeout_s=20)
    # The broker closes the silent connection on its own (recv sees EOF before the timeout).
    assert idle.is_closed_by_broker()
    idle.close()
    assert "closed an idle connection" in broker.log_tail(5)
    assert broker.stop() == 0


def test_kill9_while_writing_into_a_reused_segment_file_loses_and_revives_nothing(
    tmp_path: Path,
) -> None:
    """segment.recycle: retention removes segments; once file.delete.delay.ms has passed the
    next roll writes into a removed segment's file, whose old batches lie after the new ones.
    kill -9 then: recovery must keep every acknowledged record and none of the old ones.
    Produced with confluent-kafka, read back with it and with kafka-python."""
    broker = BrokerProcess(tmp_path / "data", log_retention_check_interval_ms="100").start()
    try:
        _kill9_in_a_reused_segment_file(broker)
    finally:
        broker.stop()


def _kill9_in_a_reused_segment_file(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTP

    from support.waiting import wait_until

    topic = "reused"
    configs = {"segment.bytes": "40000", "retention.bytes": "80000", "file.delete.delay.ms": "100"}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    sent: list[bytes] = []

    def send(count: int) -> None:
        for _ in range(count):
            sent.append(b"%08d" % len(sent) + b"." * 992)
            producer.produce(topic, sent[-1])
        assert producer.flush(30) == 0

    def reused() -> bool:
        send(8)
        return "reusing a removed segment's file" in broker.log_path.read_text(errors="replace")

    wait_until(reused, 60, "a roll into a reused segment file")
    send(3)  # acknowledged; the reused file still holds old batches after these
    broker.kill9()
    first_run = broker.log_path.stat().st_size
    broker.overrides["log_retention_check_interval_ms"] = "3600000"  # the log start stays put
    broker.start()
    restart_log = broker.log_path.read_bytes()[first_run:].decode()
    assert "truncated" in restart_log  # recovery cut the old batches off

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "r"})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert high == len(sent) and 0 < low < high - 3
    consumer.assign([TopicPartition(topic, 0, low)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < high - low and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == sent[low:]

    pure = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    tp = KpTP(topic, 0)
    pure.assign([tp])
    pure.seek(tp, low)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < high - low and time.monotonic() < deadline:
        for records in pure.poll(timeout_ms=500).values():
            got.extend(record.value for record in records)
    pure.close()
    assert got == sent[low:]
    assert broker.stop() == 0, broker.log_tail()
