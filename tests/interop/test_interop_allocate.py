"""A ``sluice broker`` allocates a new segment's whole file (a topic with Kafka's
``preallocate``): confluent-kafka produces, the files hold zeros past the records,
kafka-python reads every record back, after a clean restart (the files cut to their
records) and after a kill -9 (recovery stops at the zeros) alike."""

from __future__ import annotations

import os
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from support.brokers import BrokerProcess, named_segments
from support.clients import produce_acked, read_from_start

RECORDS = 600  # the 300 produced after the restart roll onto a new, preallocated segment
SEGMENT_BYTES = 256 * 1024


def _sizes(directory: Path) -> dict[str, int]:
    return {path.name: path.stat().st_size for path in named_segments(directory)}


def test_records_survive_preallocation_restarts_and_a_crash(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, log_segment_bytes=str(SEGMENT_BYTES)).start()
    topic = "allocated"
    values = [b"%05d" % i + os.urandom(1019) for i in range(RECORDS)]
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        config = {"preallocate": "true"}
        admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(15)
        produce_acked(broker.bootstrap, topic, values[:300], 16384)
        directory = data / f"{topic}-0"
        during = _sizes(directory)
        assert len(during) >= 2  # ~300 KiB in 256-KiB segments
        assert read_from_start(broker.bootstrap, topic, 300) == values[:300]
    finally:
        assert broker.stop() == 0
    after = _sizes(directory)  # a clean stop cut the files to their records
    assert after.keys() == during.keys()
    *inactive, active = after
    assert all(during[name] == after[name] <= SEGMENT_BYTES for name in inactive)
    assert during[active] > after[active]  # zeros past the active segment's records
    assert during[active] == SEGMENT_BYTES  # the whole segment
    assert sum(after.values()) < 300 * 1100

    broker = BrokerProcess(data, port=broker.port, log_segment_bytes=str(SEGMENT_BYTES)).start()
    try:
        assert read_from_start(broker.bootstrap, topic, 300) == values[:300]
        produce_acked(broker.bootstrap, topic, values[300:], 16384)
        named_segments(directory)  # the newest data file has its name before the crash
    finally:
        broker.kill9()
    newest = sorted(directory.glob("*.log"))[-1]
    assert newest.read_bytes()[-16:] == bytes(16)  # the crash left the zeros past the records

    broker = BrokerProcess(data, port=broker.port, log_segment_bytes=str(SEGMENT_BYTES)).start()
    try:
        assert read_from_start(broker.bootstrap, topic, RECORDS) == values
    finally:
        assert broker.stop() == 0
