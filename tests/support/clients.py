"""Real clients against a running broker: create a topic, produce, and read back with
confluent-kafka or kafka-python (each a client independent of Sluice's own)."""

from __future__ import annotations

import time
import warnings


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` through CreateTopics (confluent-kafka's admin client)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    """Produce ``values`` round-robin over ``partitions`` with confluent-kafka."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        producer.produce(topic, value=v, partition=i % partitions)
    assert producer.flush(30) == 0


def produce_acked(bootstrap: str, topic: str, values: list[bytes], batch_size: int) -> None:
    """Produce ``values`` with confluent-kafka, acks=all, and check each was acknowledged."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all", "batch.size": batch_size}
    )
    errors: list[object] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda e, _m: e and errors.append(e))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []


def read_from_start(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """Up to ``count`` values of partition 0 from its start, read with kafka-python."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000
    )
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    got: list[bytes] = []
    for message in consumer:
        got.append(message.value)
        if len(got) == count:
            break
    consumer.close()
    return got


Consumed = tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]


def consume_confluent(bootstrap: str, topic: str, count: int, partition: int = 0) -> list[Consumed]:
    """Read ``count`` records from the start of a partition with confluent-kafka."""
    import uuid

    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as TP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TP(topic, partition, OFFSET_BEGINNING)])
    out: list[Consumed] = []
    deadline = time.monotonic() + 20
    try:
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            headers = [(k, v) for k, v in message.headers() or []]
            out.append((message.key(), message.value(), headers, message.timestamp()[1]))
    finally:
        consumer.close()
    return out


def consume_kafka_python(
    bootstrap: str, topic: str, count: int, partition: int = 0
) -> list[Consumed]:
    """Read ``count`` records from the start of a partition with kafka-python."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer
        from kafka import TopicPartition as TP

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")  # fmt: skip
    consumer.assign([TP(topic, partition)])
    consumer.seek_to_beginning()
    out: list[Consumed] = []
    deadline = time.monotonic() + 20
    try:
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                out += [(r.key, r.value, list(r.headers), r.timestamp) for r in records]
    finally:
        consumer.close()
    return out


def committed_values_confluent(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every value a read_committed confluent-kafka consumer sees in ``topic``, read from
    the start of each partition to its end (the last stable offset)."""
    import uuid

    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError
    from confluent_kafka import TopicPartition as TP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True})  # fmt: skip
    consumer.assign([TP(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"read only {len(values)} values of {topic}"
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
                continue
            assert error is None, error
            at_end.discard(message.partition())
            values.append(message.value())
    finally:
        consumer.close()
    return values


def committed_values_kafka_python(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every value a read_committed kafka-python consumer sees in ``topic``, read from the
    start of each partition up to its last stable offset."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer
        from kafka import TopicPartition as TP

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    tps = [TP(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    ends = consumer.end_offsets(tps)
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"read only {len(values)} values of {topic}"
            for records in consumer.poll(timeout_ms=200).values():
                values += [r.value for r in records]
    finally:
        consumer.close()
    return values
