"""message.timestamp.before.max.ms / after.max.ms (and the deprecated difference.max.ms):
a CreateTime record too far from the broker's clock is refused with INVALID_TIMESTAMP,
from confluent-kafka and kafka-python; LogAppendTime topics and in-range records are
not affected. The check itself is sans-I/O on the batch headers."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import sluice
from sluice.log import LogConfig
from sluice.log.append import AppendOrigin, prepare_leader_append
from sluice.log.errors import InvalidTimestampException
from support.records import build_batch

HOUR_MS = 3_600_000


def _batch_at(timestamp_ms: int) -> bytearray:
    return bytearray(build_batch([b"x"], default_timestamp=timestamp_ms))


def test_the_bounds_and_the_deprecated_key() -> None:
    assert LogConfig().timestamp_bounds is None
    assert LogConfig(message_timestamp_difference_max_ms=5).timestamp_bounds == (5, 5)
    both = LogConfig(message_timestamp_difference_max_ms=5, message_timestamp_after_max_ms=1)
    assert both.timestamp_bounds == (5, 1)
    appended = LogConfig(message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=1)
    assert appended.timestamp_bounds is None


@pytest.mark.parametrize(
    ("offset_ms", "refused"),
    [(0, False), (-2 * HOUR_MS, True), (2 * HOUR_MS, True), (-HOUR_MS + 1, False)],
)
def test_a_batch_outside_the_window_is_refused(offset_ms: int, refused: bool) -> None:
    now = 1_800_000_000_000
    config = LogConfig(message_timestamp_before_max_ms=HOUR_MS,
                       message_timestamp_after_max_ms=HOUR_MS)  # fmt: skip
    batch = _batch_at(now + offset_ms)
    args = (config, 7, 0, AppendOrigin.CLIENT, -1, 0, "t-0", now)
    if refused:
        with pytest.raises(InvalidTimestampException, match="with offset 7 is out of range"):
            prepare_leader_append(batch, *args)
    else:
        prepare_leader_append(batch, *args)
    # What a follower or the coordinators append is never checked.
    prepare_leader_append(_batch_at(now + offset_ms), config, 7, 0, AppendOrigin.COORDINATOR,
                          -1, 0, "t-0", now)  # fmt: skip


@pytest.fixture(scope="module")
def bounded(broker: sluice.EmbeddedBroker) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic = "bounded-timestamps"
    config = {"message.timestamp.before.max.ms": str(HOUR_MS),
              "message.timestamp.after.max.ms": str(HOUR_MS)}  # fmt: skip
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(15)
    return topic


def test_confluent_kafka_gets_invalid_timestamp(
    broker: sluice.EmbeddedBroker, bounded: str
) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
    errors: list[KafkaError | None] = []
    now = int(time.time() * 1000)
    for timestamp in (now - 2 * HOUR_MS, now, now + 2 * HOUR_MS):
        producer.produce(bounded, b"v", timestamp=timestamp,
                         on_delivery=lambda err, msg: errors.append(err))  # fmt: skip
        producer.flush(15)
    codes = [e.code() if e is not None else None for e in errors]
    assert codes == [KafkaError.INVALID_TIMESTAMP, None, KafkaError.INVALID_TIMESTAMP]


def test_kafka_python_gets_invalid_timestamp(broker: sluice.EmbeddedBroker, bounded: str) -> None:
    from kafka import KafkaProducer
    from kafka.errors import InvalidTimestampError

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, retries=0)
    try:
        now = int(time.time() * 1000)
        with pytest.raises(InvalidTimestampError):
            producer.send(bounded, b"old", timestamp_ms=now - 2 * HOUR_MS).get(15)
        assert producer.send(bounded, b"now", timestamp_ms=now).get(15).offset >= 0
    finally:
        producer.close()
