"""Producer against a real embedded broker: sends, callbacks, errors, close, timeouts."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import sluice
from sluice.client import (
    ConfigException,
    KafkaException,
    Producer,
    RecordMetadata,
    RecordTooLargeException,
    SerializationException,
    TimeoutException,
)
from sluice.client.producer.partitioner import partition_for_key
from sluice.client.producer.producer_config import ProducerConfig
from support.clients import create_topic


def producer(broker: sluice.EmbeddedBroker, **overrides: Any) -> Producer:
    config = {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 1}
    config.update({k.replace("_", "."): v for k, v in overrides.items()})
    return Producer(config)


def test_send_returns_offsets_and_fires_callbacks_in_order(broker, topic) -> None:  # type: ignore[no-untyped-def]
    calls: list[int] = []
    with producer(broker) as p:
        futures = [
            p.send(topic, f"v{i}".encode(), callback=lambda md, exc, i=i: calls.append(i))
            for i in range(50)
        ]
        offsets = [f.get(10).offset for f in futures]
    assert offsets == list(range(50))
    assert calls == list(range(50))


def test_keyed_records_follow_murmur2_and_explicit_partitions_are_kept(broker, topic) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap_servers, topic, 6)
    with producer(broker) as p:
        assert len(p.partitions_for(topic)) == 6
        for i in range(30):
            key = f"key-{i}".encode()
            assert p.send(topic, b"x", key=key).get(10).partition == partition_for_key(key, 6)
        assert p.send(topic, b"x", key=b"k", partition=4).get(10).partition == 4


def test_acks_zero_and_one(broker, topic) -> None:  # type: ignore[no-untyped-def]
    with producer(broker, acks="0", enable_idempotence=False) as p:
        assert p.send(topic, b"fire-and-forget").get(10).offset == -1
    with producer(broker, acks=1) as p:
        metadata = p.send(topic, b"leader-ack", timestamp=1234).get(10)
    assert metadata == RecordMetadata(topic, 0, 1, 1234)


def test_idempotent_by_default_and_can_be_disabled(broker, topic) -> None:  # type: ignore[no-untyped-def]
    with producer(broker) as p:
        p.send(topic, b"x").get(10)
        tm = p.transaction_manager
        assert tm is not None and tm.has_producer_id()
    with producer(broker, enable_idempotence=False) as p:
        assert p.transaction_manager is None
    with producer(broker, acks=1) as p:  # conflicting settings turn the default off
        assert p.transaction_manager is None


def test_bad_input_gives_clear_errors(broker, topic) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigException, match=r"'linger\.mss'.*did you mean 'linger\.ms'"):
        producer(broker, linger_mss=5)
    with pytest.raises(ConfigException, match="acks to all"):
        producer(broker, acks=1, enable_idempotence=True)
    errors: list[Exception | None] = []
    with producer(broker, max_request_size=1000) as p:
        with pytest.raises(SerializationException, match="value must be bytes"):
            p.send(topic, "text")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="Invalid timestamp"):
            p.send(topic, b"x", timestamp=-5)
        future = p.send(topic, b"x" * 2000, callback=lambda md, exc: errors.append(exc))
        with pytest.raises(RecordTooLargeException, match=r"max\.request\.size"):
            future.get(1)
        assert isinstance(errors[0], RecordTooLargeException)
        assert p.send(topic, bytearray(b"bytes-like")).get(10).offset == 0
    with pytest.raises(KafkaException, match="after producer has been closed"):
        p.send(topic, b"x")


def test_missing_partition_times_out_after_max_block_ms(broker, topic) -> None:  # type: ignore[no-untyped-def]
    with producer(broker, max_block_ms=300) as p:
        start = time.monotonic()
        future = p.send(topic, b"x", partition=5)
        with pytest.raises(
            TimeoutException,
            match=r"Partition 5 of topic \S+ with partition count 1 is not present",
        ):
            future.get(5)
        assert time.monotonic() - start < 5


def test_unknown_topic_without_auto_creation_times_out_clearly() -> None:
    with (
        sluice.EmbeddedBroker({"auto.create.topics.enable": "false"}) as broker,
        producer(broker, max_block_ms=500) as p,
        pytest.raises(TimeoutException, match="not present in metadata after 500 ms"),
    ):
        p.send("absent", b"x").get(5)


def test_stopped_broker_fails_sends_after_delivery_timeout() -> None:
    broker = sluice.EmbeddedBroker().start()
    try:
        p = producer(broker, delivery_timeout_ms=1500, request_timeout_ms=1000, linger_ms=0,
                     max_block_ms=1000)  # fmt: skip
        assert p.send("t", b"before").get(10).offset == 0
    finally:
        broker.stop()
    start = time.monotonic()
    future = p.send("t", b"after")
    with pytest.raises(TimeoutException, match=r"Expiring 1 record\(s\)"):
        future.get(10)
    elapsed = time.monotonic() - start
    assert 1.0 < elapsed < 5, elapsed
    p.close(5)


def test_close_with_zero_timeout_fails_queued_records(broker, topic) -> None:  # type: ignore[no-untyped-def]
    p = producer(broker, linger_ms=60_000, batch_size=1 << 20)
    p.send(topic, b"warm-up")
    p.flush(10)  # metadata and producer id are in
    futures = [p.send(topic, b"queued") for _ in range(5)]
    p.close(0)
    for future in futures:
        with pytest.raises(KafkaException, match="closed forcefully"):
            future.get(5)


def test_close_sends_what_is_queued(broker, topic) -> None:  # type: ignore[no-untyped-def]
    p = producer(broker, linger_ms=60_000)
    futures = [p.send(topic, b"queued") for _ in range(5)]
    p.close()
    assert [f.get(0).offset for f in futures] == list(range(5))
    p.close()  # idempotent


def test_flush_sends_lingering_records(broker, topic) -> None:  # type: ignore[no-untyped-def]
    with producer(broker, linger_ms=60_000) as p:
        futures = [p.send(topic, b"x") for _ in range(3)]
        p.flush(10)
        assert all(f.done() for f in futures)


def test_many_threads_share_one_producer(broker, topic) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap_servers, topic, 4)
    results: dict[int, list[RecordMetadata]] = {}

    def worker(n: int) -> None:
        key = f"worker-{n}".encode()
        futures = [p.send(topic, f"{n}:{i}".encode(), key=key) for i in range(500)]
        results[n] = [f.get(30) for f in futures]

    with producer(broker, batch_size=2048, buffer_memory=64 * 1024) as p:
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    for _n, metadata in results.items():
        offsets = [m.offset for m in metadata]
        assert offsets == sorted(offsets)  # one key, one partition, in send order
        assert len({m.partition for m in metadata}) == 1
    assert sum(len(v) for v in results.values()) == 3000


def test_delivery_timeout_must_cover_linger_and_request_timeout() -> None:
    base = {"bootstrap.servers": "127.0.0.1:1"}
    with pytest.raises(ConfigException, match=r"delivery\.timeout\.ms"):
        ProducerConfig({**base, "delivery.timeout.ms": 1000, "request.timeout.ms": 5000})
    config = ProducerConfig({**base, "request.timeout.ms": 200_000})
    assert config.delivery_timeout_ms == 200_005  # adjusted when left at its default


def test_no_broker_at_all_times_out_on_metadata() -> None:
    with (
        Producer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 300}) as p,
        pytest.raises(TimeoutException, match="not present in metadata"),
    ):
        p.send("t", b"x").get(5)


def test_close_right_after_a_burst_is_prompt(broker, topic) -> None:  # type: ignore[no-untyped-def]
    # A lost Sender wakeup once made this close wait out metadata.max.age.ms.
    p = producer(broker, linger_ms=5)
    futures = [p.send(topic, b"b" * 100) for _ in range(30_000)]
    start = time.monotonic()
    p.close(60)
    assert time.monotonic() - start < 30
    assert futures[-1].get(0).offset == 29_999
