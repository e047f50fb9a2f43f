"""Compaction end to end: a real broker compacts a topic while confluent-kafka writes to it,
and a consumer from offset 0 then sees only the latest value of every key."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import sluice
from sluice.log.cleaner.files import read_cleaner_checkpoint
from support.waiting import wait_until

TOPIC = "table"


def _produce(producer: Producer, records: list[tuple[bytes | None, bytes | None]]) -> list:
    reports: list = []
    for key, value in records:
        producer.produce(
            TOPIC, key=key, value=value, on_delivery=lambda e, m: reports.append((e, m))
        )
    assert producer.flush(30) == 0
    return reports


def test_a_compacted_topic_serves_the_latest_value_per_key() -> None:
    config = {"log.cleaner.backoff.ms": "100", "log.retention.check.interval.ms": "600000"}
    with sluice.EmbeddedBroker(config=config) as embedded:
        bootstrap = embedded.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic_configs = {
            "cleanup.policy": "compact",
            "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01",
        }
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=topic_configs)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})

        keys = [f"k{i}".encode() for i in range(10)]
        for round_ in range(40):  # 40 updates of every key, one small batch per round
            value = f"round-{round_}".encode() + b"." * 40
            reports = _produce(producer, [(key, value) for key in keys])
            assert [e for e, _ in reports if e is not None] == []
        reports = _produce(producer, [(keys[9], None)])  # delete k9: a tombstone
        last_update = reports[0][1].offset()
        fillers = [(f"filler-{i}".encode(), b"f" * 120) for i in range(50)]
        for i in range(0, 50, 5):  # distinct keys that push the updates out of the active segment
            assert [e for e, _ in _produce(producer, fillers[i : i + 5]) if e is not None] == []

        ((err, _),) = _produce(producer, [(None, b"no key")])
        assert err is not None and err.code() == KafkaError.INVALID_RECORD

        broker = embedded.broker
        log = broker.log_manager.get_log(TOPIC, 0)
        assert log is not None  # the cleaner may already have merged segments: no count here
        assert log.active_segment.base_offset > last_update  # the fillers rolled the updates out

        def cleaned_past_the_updates() -> bool:
            # The cleaner thread writes its checkpoint before it adds the pass's counts.
            checkpoint = read_cleaner_checkpoint(log.dir)
            return (
                checkpoint is not None
                and checkpoint > last_update
                and broker.log_cleaner.total.records_removed >= 39 * 10
            )

        wait_until(cleaned_past_the_updates, 30, "the cleaner past the updates")
        assert broker.log_cleaner.passes_completed >= 1

        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
        )
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        seen: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while (not seen or seen[-1][0] < high - 1) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            seen.append((msg.offset(), msg.key(), msg.value()))
        consumer.close()
        producer.flush(10)

    offsets = [offset for offset, _, _ in seen]
    assert offsets == sorted(set(offsets)) and offsets[-1] == high - 1
    seen_keys = [key for _, key, _ in seen]
    assert len(seen_keys) == len(set(seen_keys)), "every key appears once"
    table = {key: value for _, key, value in seen}
    expected = {key: b"round-39" + b"." * 40 for key in keys[:9]}
    expected[keys[9]] = None  # the tombstone stays for delete.retention.ms (a day)
    expected.update(fillers)
    assert table == expected
