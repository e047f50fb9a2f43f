"""Restarts: a clean SIGTERM shutdown skips recovery; after kill -9 everything
acknowledged is still there."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from interop_support import BrokerProcess


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


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)


def test_sigterm_restart_keeps_everything_and_skips_recovery(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    create_topic(broker.bootstrap, "durable")
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
    create_topic(broker.bootstrap, "crashy")
    acked = produce(broker.bootstrap, "crashy", 400, "c")
    broker.kill9()
    broker.start()
    values = read_all(broker.bootstrap, "crashy", len(acked))
    assert sorted(values) == sorted(f"c-{i}".encode() for i in range(400))
    assert broker.stop() == 0


def test_sigint_shuts_down_cleanly(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    create_topic(broker.bootstrap, "interrupted")
    produce(broker.bootstrap, "interrupted", 20, "i")
    assert broker.stop(signal.SIGINT) == 0
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    assert "stopped cleanly" in broker.log_tail(3)


def test_idle_connections_are_closed(tmp_path: Path) -> None:
    from interop_support import RawClient

    broker = BrokerProcess(tmp_path / "data", connections_max_idle_ms="300").start()
    idle = RawClient(broker.bootstrap, timeout_s=20)
    # The broker closes the silent connection on its own (recv sees EOF before the timeout).
    assert idle.is_closed_by_broker()
    idle.close()
    assert "closing idle connection" in broker.log_tail(5)
    assert broker.stop() == 0
