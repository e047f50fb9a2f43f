"""bench/soak.py's client process functions, each in a thread here (a process in the soak),
against an embedded broker."""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType

import pytest

from support.bench import BENCH


@dataclass
class Soak:
    """bench/soak.py, the broker's address, and what the soak gives its clients."""

    module: ModuleType
    bootstrap: str
    out: queue.Queue[tuple[int, list[float], int]] = field(default_factory=queue.Queue)
    stop: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def soak(monkeypatch: pytest.MonkeyPatch) -> Iterator[Soak]:
    """An embedded broker with the two-partition topic "soak", and bench/soak.py."""
    pytest.importorskip("confluent_kafka")
    admin_api = pytest.importorskip("confluent_kafka.admin")
    import sluice

    monkeypatch.syspath_prepend(str(BENCH))
    import soak as module

    stop = threading.Event()
    try:
        with sluice.EmbeddedBroker() as broker:
            admin = admin_api.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            admin.create_topics([admin_api.NewTopic("soak", 2, 1)])["soak"].result(30)
            yield Soak(module, broker.bootstrap_servers, stop=stop)
    finally:
        stop.set()
        for name in ("soak", "raw_reader", "raw_writer"):  # soak imports both
            sys.modules.pop(name, None)


def test_the_raw_consumer_counts_and_times_what_confluent_kafka_produced(soak: Soak) -> None:
    import confluent_kafka

    out, stop = soak.out, soak.stop
    producer = confluent_kafka.Producer({"bootstrap.servers": soak.bootstrap, "linger.ms": 0})
    first_ms = time.time() * 1000
    for i in range(1_000):
        producer.produce("soak", b"v" * 100, partition=i % 2)
        if i % 250 == 0:
            producer.flush(30)  # several batches per partition
    assert producer.flush(30) == 0
    reader = threading.Thread(
        target=soak.module.consume_raw, args=(soak.bootstrap, "soak", [0, 1], stop, out)
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
        target=soak.module.consume_raw, args=(soak.bootstrap, "nope", [0], stop, out)
    )
    reader.start()
    reader.join(30)  # an error code in the answer ends the reader
    assert not reader.is_alive()
    reported = [out.get(timeout=5) for _ in range(2)]
    assert sum(failed for _, _, failed in reported) == 1


def test_the_raw_producer_reports_what_it_sent(soak: Soak) -> None:
    import raw_reader

    out, stop = soak.out, soak.stop
    writer = threading.Thread(
        target=soak.module.produce_raw, args=(soak.bootstrap, "soak", [0, 1], 2_000, stop, out)
    )
    writer.start()
    first = out.get(timeout=30)  # the first once-a-second report
    stop.set()
    writer.join(30)
    assert not writer.is_alive()
    reports = [first]
    while not out.empty():
        reports.append(out.get())
    sent = sum(count for count, _, _ in reports)
    assert sent >= first[0] > 0 and sent % 10 == 0  # 10 records every 5 ms
    assert sum(errors for _, _, errors in reports) == 0
    assert sum(len(acks) for _, acks, _ in reports) == sent // 10  # one per request
    host, _, port = soak.bootstrap.rpartition(":")
    for partition in (0, 1):
        read, _ = raw_reader.raw_consume(host, int(port), "soak", sent // 2, 30, partition)
        assert read.records == sent // 2
