"""bench/raw_reader.py, the 100 B consume row's reader: its batch count and a real read."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from sluice.log.batch import HEADER_STRUCT

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def raw(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.syspath_prepend(str(BENCH))
    import raw_reader

    yield raw_reader
    sys.modules.pop("raw_reader", None)


def batch(base_offset: int, count: int, body: bytes = b"r" * 20) -> bytes:
    """A structurally valid v2 batch (iter_batches does not check the CRC)."""
    length = HEADER_STRUCT.size - 12 + len(body)
    head = HEADER_STRUCT.pack(base_offset, length, -1, 2, 0, 0, count - 1, 0, 0, -1, -1, -1, count)
    return head + body


def test_counts_complete_batches_and_follows_offsets(raw: ModuleType) -> None:
    read = raw.RawRead()
    data = batch(0, 3) + batch(3, 2) + batch(5, 4)[:30]  # the last one is cut short
    raw.count_batches(memoryview(data), read, None)
    assert (read.records, read.next_offset) == (5, 5)
    assert read.batch_bytes == len(batch(0, 3)) + len(batch(3, 2))
    raw.count_batches(memoryview(batch(5, 4)), read, None)  # the next fetch brings it whole
    assert (read.records, read.next_offset) == (9, 9)


def test_skips_a_batch_already_read_and_stops_after_the_last_offset(raw: ModuleType) -> None:
    read = raw.RawRead(records=3, next_offset=3)
    raw.count_batches(memoryview(batch(0, 3) + batch(3, 2) + batch(5, 4)), read, 4)
    assert (read.records, read.next_offset) == (5, 5)
    raw.count_batches(None, read, None)  # a partition without records
    assert read.records == 5


def test_a_gap_in_the_offsets_is_an_error(raw: ModuleType) -> None:
    with pytest.raises(raw.RawReadError, match="offset gap: expected 3, got a batch at 4"):
        raw.count_batches(memoryview(batch(0, 3) + batch(4, 1)), raw.RawRead(), None)


def test_reads_what_confluent_kafka_produced_from_a_real_broker(raw: ModuleType) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    import sluice

    with sluice.EmbeddedBroker() as broker:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0}
        )
        for i in range(2_000):
            producer.produce("raw", f"{i:0100d}".encode(), partition=0)
            if i % 500 == 0:
                producer.flush(30)  # several batches
        assert producer.flush(30) == 0
        host, _, port = broker.bootstrap_servers.rpartition(":")
        read, elapsed = raw.raw_consume(host, int(port), "raw", 2_000, timeout=30)
        assert (read.records, read.next_offset) == (2_000, 2_000)
        assert read.fetches >= 1 and elapsed > 0
        with pytest.raises(raw.RawReadError, match="error code 3"):  # UNKNOWN_TOPIC_OR_PARTITION
            raw.raw_consume(host, int(port), "no-such-topic", 1, timeout=30)


def test_the_soaks_raw_consumer_counts_and_times_what_confluent_kafka_produced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """bench/soak.py's consume_raw, in a thread here (a process in the soak)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    import queue
    import threading
    import time

    import sluice

    monkeypatch.syspath_prepend(str(BENCH))
    import soak

    out: queue.Queue[tuple[int, list[float], int]] = queue.Queue()
    stop = threading.Event()
    try:
        with sluice.EmbeddedBroker() as broker:
            admin = confluent_kafka.admin.AdminClient(
                {"bootstrap.servers": broker.bootstrap_servers}
            )
            admin.create_topics([confluent_kafka.admin.NewTopic("soak", 2, 1)])["soak"].result(30)
            producer = confluent_kafka.Producer(
                {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0}
            )
            first_ms = time.time() * 1000
            for i in range(1_000):
                producer.produce("soak", b"v" * 100, partition=i % 2)
                if i % 250 == 0:
                    producer.flush(30)  # several batches per partition
            assert producer.flush(30) == 0
            reader = threading.Thread(
                target=soak.consume_raw, args=(broker.bootstrap_servers, "soak", [0, 1], stop, out)
            )
            reader.start()
            records, samples, errors = 0, [], 0
            deadline = time.monotonic() + 30
            while records < 1_000 and time.monotonic() < deadline:
                try:
                    count, batch_samples, failed = out.get(timeout=1)
                except queue.Empty:
                    continue
                records, errors = records + count, errors + failed
                samples += batch_samples
            stop.set()
            reader.join(30)
            while not out.empty():  # its last report, at the end
                count, batch_samples, failed = out.get()
                records, errors = records + count, errors + failed
                samples += batch_samples
            assert (records, errors) == (1_000, 0)  # every record once, none counted twice
            assert 2 <= len(samples) <= 1_000  # one per batch
            # Receive time minus CreateTime (whole milliseconds), within the test's span.
            span_ms = time.time() * 1000 - first_ms
            assert all(-1 < sample <= span_ms + 1 for sample in samples)

            stop.clear()
            reader = threading.Thread(
                target=soak.consume_raw, args=(broker.bootstrap_servers, "nope", [0], stop, out)
            )
            reader.start()
            reader.join(30)  # an error code in the answer ends the reader
            assert not reader.is_alive()
            reported = [out.get(timeout=5) for _ in range(2)]
            assert sum(failed for _, _, failed in reported) == 1
    finally:
        stop.set()
        sys.modules.pop("soak", None)
