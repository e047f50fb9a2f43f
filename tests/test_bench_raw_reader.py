"""bench/raw_reader.py, the 100 B consume row's reader: its batch count and a real read."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from sluice.protocol.records.batch import HEADER_STRUCT
from support.bench import BENCH


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


@pytest.mark.integration  # an embedded broker
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
