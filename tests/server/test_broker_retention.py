"""Retention and ListOffsets special timestamps, on an embedded broker with real clients."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import sluice
from support.waiting import wait_until


def test_time_retention_deletes_old_segments() -> None:
    config = {"log.retention.check.interval.ms": "100"}
    with sluice.EmbeddedBroker(config=config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        topic_config = {"retention.ms": "60000", "segment.bytes": "2000"}
        admin.create_topics([NewTopic("old", 1, 1, config=topic_config)])["old"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        ancient = int(time.time() * 1000) - 3_600_000  # an hour old: past retention.ms
        for i in range(60):
            producer.produce("old", b"x" * 100, timestamp=ancient + i)
            producer.flush(10)  # one batch each, so segments roll by size
        for i in range(5):
            producer.produce("old", b"new-%d" % i)
        assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "r"})
        tp = TopicPartition("old", 0)

        def earliest() -> int:
            return int(consumer.get_watermark_offsets(tp, timeout=10)[0])

        wait_until(lambda: earliest() > 0, 30, "retention to delete old segments")
        low, high = consumer.get_watermark_offsets(tp, timeout=10)
        assert high == 65 and 0 < low <= 60  # the active segment and the new data stay
        consumer.close()


def test_list_offsets_max_timestamp() -> None:
    with sluice.EmbeddedBroker() as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        base = 1_900_000_000_000
        for ts in (base + 5, base + 50, base + 20):
            producer.produce("ts", b"v", timestamp=ts)
        assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "m"})
        # -3 is ListOffsets' "max timestamp": the record with the largest timestamp.
        found = consumer.offsets_for_times([TopicPartition("ts", 0, -3)], timeout=10)
        assert found[0].offset == 1
        consumer.close()
