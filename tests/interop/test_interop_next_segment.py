"""A ``sluice broker`` rolls onto segment files its file thread made ahead
(``log.segment.prepare.next``, on by default) and names them after: confluent-kafka
produces across many rolls, kafka-python and confluent-kafka read every record back while
it runs, after a clean restart (every file named, the unused set removed) and after a
kill -9 straight after producing (a roll's files may not have their names yet: the loader
names them). With Kafka's ``preallocate`` the files are allocated whole when made."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from support.brokers import BrokerProcess, holds_a_batch, named_segments
from support.clients import produce_acked, read_from_start
from support.waiting import wait_until

SEGMENT_BYTES = 64 * 1024
RECORDS = 600  # ~600 KiB: about ten segments


def _read_confluent(bootstrap: str, topic: str, count: int, group: str) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe([topic])
    got: list[bytes] = []
    misses = 0
    while len(got) < count and misses < 50:
        message = consumer.poll(0.2)
        if message is None:
            misses += 1
        elif message.error() is None:
            got.append(message.value())
    consumer.close()
    return got


@pytest.mark.parametrize("preallocate", [False, True], ids=["plain", "preallocate"])
def test_rolls_onto_files_made_ahead_keep_every_record_through_restarts_and_a_crash(
    tmp_path: Path, preallocate: bool
) -> None:
    data = tmp_path / "data"
    settings = {"log_segment_bytes": str(SEGMENT_BYTES)}
    broker = BrokerProcess(data, **settings).start()
    topic = "ahead"
    directory = data / f"{topic}-0"
    values = [b"%05d" % i + os.urandom(1019) for i in range(RECORDS)]
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        config = {"preallocate": "true"} if preallocate else {}
        admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(15)
        produce_acked(broker.bootstrap, topic, values[:200], 8192)
        # A burst can roll before the file thread has made the set (the roll then makes
        # its own files); once one is held, the next roll takes it.
        made = SEGMENT_BYTES if preallocate else 0  # allocated whole when made

        def set_made() -> bool:
            held = list(directory.glob("*.timeindex.next"))  # the last file created
            data = [p for p in directory.glob("*.log.next") if p.stat().st_size == made]
            return bool(held and data)

        wait_until(set_made, 15, "a set made ahead")
        held = next(directory.glob("*.log.next"))
        assert not holds_a_batch(held)
        produce_acked(broker.bootstrap, topic, values[200:400], 8192)
        segments = named_segments(directory)
        assert len(segments) >= 6 and not held.exists()
        assert "(on files created ahead)" in broker.log_path.read_text()
        assert read_from_start(broker.bootstrap, topic, 400) == values[:400]
        assert _read_confluent(broker.bootstrap, topic, 400, "first") == values[:400]
    finally:
        assert broker.stop() == 0
    assert list(directory.glob("*.next")) == []  # named at close; the unused set removed

    broker = BrokerProcess(data, port=broker.port, **settings).start()
    try:
        assert read_from_start(broker.bootstrap, topic, 400) == values[:400]
        produce_acked(broker.bootstrap, topic, values[400:], 8192)
    finally:
        broker.kill9()  # at once: the newest roll's files may still be under .next names

    broker = BrokerProcess(data, port=broker.port, **settings).start()
    try:
        assert read_from_start(broker.bootstrap, topic, RECORDS) == values
        assert _read_confluent(broker.bootstrap, topic, RECORDS, "after") == values
        named_segments(directory)  # the loader named what the crash left under .next names
    finally:
        assert broker.stop() == 0
    assert list(directory.glob("*.next")) == []
