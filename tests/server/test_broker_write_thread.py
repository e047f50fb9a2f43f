"""The broker's writer thread (``log.write.thread``, sluice.log.writer) with real clients:
while a write is held the event loop still answers, the held records are neither
acknowledged nor readable, and both happen once the write is done."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import sluice
from sluice.log import writer as writer_module

TOPIC = "held"


@pytest.fixture
def held_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[threading.Event, threading.Event, threading.Event]]:
    """(hold, entered, release): once ``hold`` is set, the writer thread's next write signals
    ``entered`` and waits for ``release``."""
    hold, entered, release = threading.Event(), threading.Event(), threading.Event()
    write = writer_module._write

    def held(job: writer_module.WriteJob) -> None:
        if hold.is_set():
            entered.set()
            release.wait(60)
        write(job)

    monkeypatch.setattr(writer_module, "_write", held)
    yield hold, entered, release
    release.set()


def _read_all(bootstrap: str) -> list[bytes]:
    """Every value of partition 0 below its end offset (the high watermark, asked first)
    with kafka-python (a pure-Python client), within 30 s."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(TOPIC, 0)
        end = consumer.end_offsets([tp])[tp]
        consumer.assign([tp])
        consumer.seek(tp, 0)
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(record.value for record in records)
        return values
    finally:
        consumer.close()


def test_a_held_write_is_neither_acknowledged_nor_read_until_written(
    held_writes: tuple[threading.Event, threading.Event, threading.Event],
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    hold, entered, release = held_writes
    with sluice.EmbeddedBroker({"log.write.thread": "true"}) as broker:
        assert broker.broker.replica_manager.writer is not None
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        acked: list[tuple[str | None, int]] = []

        def report(err: object, msg: object) -> None:
            acked.append((None if err is None else str(err), msg.offset()))  # type: ignore[attr-defined]

        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0}
        )
        producer.produce(TOPIC, b"first", partition=0, on_delivery=report)
        assert producer.flush(30) == 0 and acked == [(None, 0)]

        hold.set()
        producer.produce(TOPIC, b"second", partition=0, on_delivery=report)
        producer.poll(0)
        assert entered.wait(30), "the writer thread did not take the second record"
        # The event loop answers meanwhile: metadata, and a fetch of what is written.
        assert TOPIC in admin.list_topics(timeout=10).topics
        assert _read_all(bootstrap) == [b"first"]
        producer.poll(0)
        assert acked == [(None, 0)]  # not acknowledged while the write is held

        release.set()
        assert producer.flush(30) == 0
        assert acked == [(None, 0), (None, 1)]
        assert _read_all(bootstrap) == [b"first", b"second"]


def test_by_default_appends_are_written_on_the_event_loop() -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    with sluice.EmbeddedBroker() as broker:  # log.write.thread is off by default
        assert broker.broker.replica_manager.writer is None
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1})
        for value in (b"a", b"b", b"c"):
            producer.produce(TOPIC, value, partition=0)
        assert producer.flush(30) == 0
        assert _read_all(bootstrap) == [b"a", b"b", b"c"]
