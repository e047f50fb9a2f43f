"""A ``sluice broker`` with ``log.segment.drop.read.pages`` frees the page-cache pages of
segments its consumers have read, and a consumer that comes later reads them whole from
the disk: confluent-kafka reads first, kafka-python after."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

from confluent_kafka import Consumer, Producer
from interop_support import BrokerProcess, named_segments
from kafka import KafkaConsumer

from sluice.embedded_cluster import wait_until

RECORDS = 300
SEGMENT_BYTES = 64 * 1024

_libc = ctypes.CDLL(None, use_errno=True)


def resident_pages(path: Path) -> int:
    """How many of the file's pages the page cache holds (``mincore``, which unlike a
    read does not bring any in)."""
    size = path.stat().st_size
    if size == 0:
        return 0
    # A private mapping, so that ctypes can take its address; nothing is written to it.
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as mm:
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = (ctypes.c_ubyte * pages)()
        view = ctypes.c_char.from_buffer(mm)
        address = ctypes.addressof(view)
        try:
            if _libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
        finally:
            del view
        return sum(v & 1 for v in vec)


def test_read_segments_lose_their_pages_and_a_later_consumer_reads_them_whole(
    tmp_path: Path,
) -> None:
    broker = BrokerProcess(
        tmp_path / "data",
        log_segment_bytes=str(SEGMENT_BYTES),
        log_segment_drop_read_pages="true",  # off by default
    ).start()
    try:
        topic = "read-pages"
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 16}
        )
        values = [b"%04d" % i + os.urandom(1020) for i in range(RECORDS)]
        for value in values:
            producer.produce(topic, value)
            producer.poll(0)
        assert producer.flush(30) == 0
        data = tmp_path / "data" / f"{topic}-0"
        segments = named_segments(data)
        assert len(segments) >= 4  # ~300 KiB in 64-KiB segments

        first = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "first",
             "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )  # fmt: skip
        first.subscribe([topic])
        got: list[bytes] = []

        def read_segments_dropped() -> bool:
            message = first.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
            # Its fetches at the log end name it the only reader: every segment but the
            # active one is read. The kernel drops on a best-effort basis, so most of them.
            return (
                len(got) == RECORDS
                and sum(resident_pages(s) == 0 for s in segments[:-1]) >= len(segments[:-1]) // 2
            )

        wait_until(read_segments_dropped, 30, "pages of the read segments freed")
        assert got == values
        assert resident_pages(named_segments(data)[-1]) > 0  # the active one stays

        later = KafkaConsumer(
            topic, bootstrap_servers=broker.bootstrap, group_id="later",
            auto_offset_reset="earliest", consumer_timeout_ms=20_000,
        )  # fmt: skip
        read_later: list[bytes] = []
        for message in later:
            read_later.append(message.value)
            if len(read_later) == RECORDS:
                break
        assert read_later == values  # from the disk, whole and in order
        later.close()
        first.close()
    finally:
        assert broker.stop() == 0, broker.log_tail()
