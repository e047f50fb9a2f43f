"""Sluice's consumer against an embedded broker, with data and peers from
confluent-kafka (librdkafka) and kafka-python."""

from __future__ import annotations

import struct
import threading
import time
import uuid
import warnings
from typing import Any

import confluent_kafka
import pytest

import sluice
from sluice.client.admin import Admin, NewTopic
from sluice.client.consumer.consumer import Consumer, TopicPartition
from sluice.client.consumer.fetcher import FetchSession
from sluice.client.consumer.fetcher_records import (
    TIMESTAMP_CREATE_TIME,
    ConsumerRecord,
    decode_records,
)
from sluice.client.consumer.group_assignors import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
    roundrobin_assign,
)
from support.waiting import wait_until

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # type: ignore[import-untyped]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def create_topic(broker: sluice.EmbeddedBroker, name: str, partitions: int = 1) -> None:
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])


def consumer(broker: sluice.EmbeddedBroker, **extra: Any) -> Consumer:
    config = {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest",
              "fetch.max.wait.ms": 100}  # fmt: skip
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    return Consumer(config)


def poll_n(c: Consumer, n: int, timeout_s: float = 15) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"got {len(out)} of {n} records in {timeout_s}s")
        out += c.poll(min(remaining, 0.5))
    return out


def produce_confluent(
    broker: sluice.EmbeddedBroker, topic: str, n: int, codec: str = "none", partitions: int = 1
) -> None:
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "compression.type": codec,
            "linger.ms": 5,
        }
    )
    for i in range(n):
        producer.produce(
            topic, value=b"value-%d" % i, key=None if i % 7 == 0 else b"key-%d" % i,
            partition=i % partitions, timestamp=1_700_000_000_000 + i,
            headers=[("h", b"%d" % i), ("empty", None)] if i % 2 else None,
        )  # fmt: skip
    assert producer.flush(15) == 0


@pytest.mark.parametrize("codec", CODECS)
def test_reads_what_confluent_kafka_produced(
    broker: sluice.EmbeddedBroker, topic: str, codec: str
) -> None:
    create_topic(broker, topic)
    produce_confluent(broker, topic, 300, codec)
    with consumer(broker) as c:
        c.assign([TopicPartition(topic, 0)])
        records = poll_n(c, 300)
    assert [r.offset for r in records] == list(range(300))
    for i, r in enumerate(records):
        assert r.value == b"value-%d" % i
        assert r.key == (None if i % 7 == 0 else b"key-%d" % i)
        assert r.timestamp == 1_700_000_000_000 + i
        assert r.timestamp_type == TIMESTAMP_CREATE_TIME
        assert r.headers == ([("h", b"%d" % i), ("empty", None)] if i % 2 else [])
        assert (r.topic, r.partition) == (topic, 0)


@pytest.mark.parametrize("codec", CODECS)
def test_reads_what_kafka_python_produced(
    broker: sluice.EmbeddedBroker, topic: str, codec: str
) -> None:
    create_topic(broker, topic)
    producer = kafka.KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
    )
    for i in range(200):
        producer.send(topic, value=b"kp-%d" % i, key=b"k%d" % i, partition=0,
                      timestamp_ms=1_600_000_000_000 + i, headers=[("n", b"%d" % i)])  # fmt: skip
    producer.flush(15)
    producer.close()
    with consumer(broker) as c:
        c.assign([(topic, 0)])
        records = poll_n(c, 200)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in records] == [
        (i, b"k%d" % i, b"kp-%d" % i, 1_600_000_000_000 + i, [("n", b"%d" % i)]) for i in range(200)
    ]


def poll_arrow_n(c: Consumer, n: int, max_records: int, timeout_s: float = 15) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while sum(b.num_rows for b in out) < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"got {sum(b.num_rows for b in out)} of {n} records")
        batches = c.poll_arrow(min(remaining, 0.5), max_records)
        assert sum(b.num_rows for b in batches) <= max_records
        out += batches
    return out


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_poll_arrow_returns_what_poll_returns(
    broker: sluice.EmbeddedBroker, topic: str, codec: str
) -> None:
    """confluent-kafka and kafka-python write to two partitions; poll_arrow's columns
    hold the same records as poll's, and the positions and a mixed use agree."""
    create_topic(broker, topic, 2)
    produce_confluent(broker, topic, 300, codec, partitions=2)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                                   compression_type=None if codec == "none" else codec)  # fmt: skip
    for i in range(100):
        producer.send(topic, value=b"kp-%d" % i, key=None, partition=1,
                      timestamp_ms=1_600_000_000_000 + i, headers=[("n", b"%d" % i)])  # fmt: skip
    producer.flush(15)
    producer.close()
    with consumer(broker) as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        expected = poll_n(c, 400)
    with consumer(broker, max_poll_records=10) as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        got = poll_n(c, 10)  # a few as records first, then the rest as columns
        batches = poll_arrow_n(c, 390, max_records=64)
        assert c.position(TopicPartition(topic, 0)) == 150
        assert c.position(TopicPartition(topic, 1)) == 250
    for batch in batches:
        assert batch.schema.names == list(ConsumerRecord._fields)
        for row in batch.to_pylist():
            row["timestamp"] = int(row["timestamp"].timestamp() * 1000)
            row["headers"] = [(h["key"], h["value"]) for h in row["headers"]]
            got.append(ConsumerRecord(**row))

    def order(r: ConsumerRecord) -> tuple[int, int]:
        return r.partition, r.offset

    assert sorted(got, key=order) == sorted(expected, key=order)


def test_close_drops_a_fetch_in_flight(broker: sluice.EmbeddedBroker, topic: str) -> None:
    """A consumer whose fetcher long-polls an empty partition (fetch.max.wait.ms 20 s)
    closes without waiting the poll out: the fetch connection is closed first."""
    create_topic(broker, topic, partitions=1)
    c = consumer(broker, fetch_max_wait_ms=20_000)
    c.assign([TopicPartition(topic, 0)])
    assert c.poll(0.5) == []
    wait_until(lambda: bool(c.fetcher.sessions), 5)  # a Fetch was built and sent
    assert c.fetcher.fetch_count == 0  # and is waiting on the broker
    began = time.monotonic()
    c.close()
    assert time.monotonic() - began < 4  # the fetcher's join gives up after 5 s
    assert not c.fetcher.is_alive()


def test_seek_position_pause_resume_and_out_of_range(
    broker: sluice.EmbeddedBroker, topic: str
) -> None:
    create_topic(broker, topic, partitions=2)
    produce_confluent(broker, topic, 100, partitions=2)  # 50 records in each partition
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with consumer(broker, auto_offset_reset="latest") as c:
        c.assign([p0, p1])
        assert c.position(p0) == 50  # latest
        c.seek_to_beginning([p0])
        assert c.position(p0) == 0
        c.seek(p1, 40)
        records = poll_n(c, 60)
        assert sorted((r.partition, r.offset) for r in records) == sorted(
            [(0, i) for i in range(50)] + [(1, i) for i in range(40, 50)]
        )
        assert c.position(p0) == 50 and c.position(p1) == 50
        assert c.end_offsets([p0, p1]) == {p0: 50, p1: 50}
        assert c.beginning_offsets([p0]) == {p0: 0}

        c.pause([p0])
        assert c.paused() == [p0]
        c.seek(p0, 10)
        c.seek(p1, 45)
        records = poll_n(c, 5)
        assert {r.partition for r in records} == {1}
        assert not c.poll(0.3)  # p0 paused: nothing
        c.resume([p0])
        records = poll_n(c, 40)
        assert [r.offset for r in records] == list(range(10, 50))

        c.seek_to_end([p1])
        assert c.position(p1) == 50
        c.seek(p0, 1000)  # out of range: auto.offset.reset=latest applies
        wait_until(lambda: c.position(p0) == 50, 10, "reset after OFFSET_OUT_OF_RANGE")
        assert c.fetcher.fetch_count > 0


def test_out_of_range_with_earliest_reset(broker: sluice.EmbeddedBroker, topic: str) -> None:
    create_topic(broker, topic)
    produce_confluent(broker, topic, 10)
    with consumer(broker) as c:
        c.assign([(topic, 0)])
        c.seek((topic, 0), 500)
        records = poll_n(c, 10)
        assert [r.offset for r in records] == list(range(10))


def test_incremental_fetch_sessions_are_used(broker: sluice.EmbeddedBroker, topic: str) -> None:
    create_topic(broker, topic, partitions=3)
    with consumer(broker, fetch_max_wait_ms=20) as c:
        c.assign([(topic, p) for p in range(3)])
        wait_until(lambda: c.fetcher.incremental_fetch_count >= 3, 10, "incremental fetches")
        produce_confluent(broker, topic, 30, partitions=3)
        records = poll_n(c, 30)
        assert len(records) == 30
        session = next(iter(c.fetcher.sessions.values()))
        assert session.session_id != 0 and session.epoch > 1


def test_fetch_session_bookkeeping() -> None:
    s = FetchSession()
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assert s.build({a: 0, b: 0}) == ({a: 0, b: 0}, [])  # full fetch
    s.on_response(42, {a: 0, b: 0})
    assert (s.session_id, s.epoch) == (42, 1)
    assert s.build({a: 0, b: 5}) == ({b: 5}, [])  # only what changed
    s.on_response(42, {a: 0, b: 5})
    assert s.build({b: 5}) == ({}, [a])  # a forgotten
    s.reset()
    assert s.build({b: 5}) == ({b: 5}, []) and s.epoch == 0


def test_commits_are_visible_to_confluent_kafka(broker: sluice.EmbeddedBroker, topic: str) -> None:
    create_topic(broker, topic, partitions=2)
    produce_confluent(broker, topic, 20, partitions=2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with consumer(broker, group_id=group, enable_auto_commit=False) as c:
        c.assign([(topic, 0), (topic, 1)])
        poll_n(c, 20)
        c.commit()  # positions: 10 and 10
        c.commit({TopicPartition(topic, 1): 7})
        future = c.commit({TopicPartition(topic, 0): 9}, asynchronous=True)
        assert future is not None
        future.result(10)
        committed = c.committed([(topic, 0), (topic, 1)])
        assert {tp: om.offset for tp, om in committed.items() if om} == {
            TopicPartition(topic, 0): 9, TopicPartition(topic, 1): 7,
        }  # fmt: skip
    ck = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": group}
    )
    try:
        result = ck.committed([confluent_kafka.TopicPartition(topic, p) for p in (0, 1)], 10)
        assert {tp.partition: tp.offset for tp in result} == {0: 9, 1: 7}
    finally:
        ck.close()
    # a new Sluice consumer of the group starts at the committed offsets
    with consumer(broker, group_id=group) as c:
        c.assign([(topic, 0), (topic, 1)])
        records = poll_n(c, 4)
        assert sorted((r.partition, r.offset) for r in records) == [
            (0, 9), (1, 7), (1, 8), (1, 9),
        ]  # fmt: skip


def test_subscribe_alone_then_auto_commit_and_listener(
    broker: sluice.EmbeddedBroker, topic: str
) -> None:
    create_topic(broker, topic, partitions=3)
    produce_confluent(broker, topic, 30, partitions=3)
    group = f"g-{uuid.uuid4().hex[:8]}"
    events: list[tuple[str, list[TopicPartition]]] = []

    class Listener:
        def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
            events.append(("revoked", sorted(partitions)))

        def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
            events.append(("assigned", sorted(partitions)))

    with consumer(broker, group_id=group, auto_commit_interval_ms=100) as c:
        c.subscribe([topic], listener=Listener())
        records = poll_n(c, 30)
        assert len(records) == 30
        assert events == [("assigned", [TopicPartition(topic, p) for p in range(3)])]
        c.poll(0.3)  # the auto commit interval passes
    assert events[-1][0] == "revoked"
    with consumer(broker, group_id=group) as c:
        committed = c.committed([(topic, p) for p in range(3)])
        assert {om.offset for om in committed.values() if om} == {10}
        assert len(committed) == 3


def test_pattern_subscription(broker: sluice.EmbeddedBroker) -> None:
    prefix = f"pat-{uuid.uuid4().hex[:6]}"
    create_topic(broker, f"{prefix}-a")
    create_topic(broker, f"{prefix}-b")
    produce_confluent(broker, f"{prefix}-a", 5)
    produce_confluent(broker, f"{prefix}-b", 5)
    with consumer(broker, group_id=f"g-{prefix}") as c:
        c.subscribe(f"^{prefix}-.*")
        records = poll_n(c, 10)
        assert {r.topic for r in records} == {f"{prefix}-a", f"{prefix}-b"}


class PollingThread(threading.Thread):
    """Polls a confluent-kafka consumer until stopped (librdkafka serves rebalances
    only from poll), recording its assignment and messages."""

    def __init__(self, ck: Any) -> None:
        super().__init__(daemon=True)
        self.ck = ck
        self.stopping = threading.Event()
        self.assignment: set[TopicPartition] = set()
        self.messages: list[Any] = []

    def run(self) -> None:
        while not self.stopping.is_set():
            message = self.ck.poll(0.05)
            if message is not None and not message.error():
                self.messages.append(message)
            self.assignment = {TopicPartition(t.topic, t.partition) for t in self.ck.assignment()}
        self.ck.close()


def test_group_shared_with_confluent_kafka_consumers(
    broker: sluice.EmbeddedBroker, topic: str
) -> None:
    create_topic(broker, topic, partitions=6)
    group = f"g-{uuid.uuid4().hex[:8]}"
    ck = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 200,
        }
    )
    ck.subscribe([topic])
    poller = PollingThread(ck)
    poller.start()
    try:
        wait_until(lambda: len(poller.assignment) == 6, 15, "confluent-kafka assigned")
        settings: dict[str, Any] = {"session_timeout_ms": 10000, "heartbeat_interval_ms": 200}
        with consumer(
            broker, group_id=group, partition_assignment_strategy="range", **settings
        ) as c:
            c.subscribe([topic])

            def settled() -> bool:
                c.poll(0.05)
                mine = set(c.assignment())
                return (
                    len(mine) == 3 and len(poller.assignment) == 3 and not mine & poller.assignment
                )

            wait_until(settled, 30, "a disjoint 3/3 split")
            mine = set(c.assignment())
            produce_confluent(broker, topic, 60, partitions=6)
            records = poll_n(c, 30)
            assert {TopicPartition(r.topic, r.partition) for r in records} == mine
            wait_until(lambda: len(poller.messages) == 30, 15, "confluent-kafka's 30 records")
            assert {TopicPartition(m.topic(), m.partition()) for m in poller.messages} == (
                poller.assignment
            )
        # Sluice's consumer left the group on close: confluent-kafka gets everything
        wait_until(lambda: len(poller.assignment) == 6, 30, "confluent-kafka gets all")
    finally:
        poller.stopping.set()
        poller.join(15)


def _batch(base_offset: int, pid: int, values: list[bytes], attrs: int, key: bytes = b"") -> bytes:
    """A v2 batch written by hand (transactional 0x10, control 0x20)."""
    from crc32c import crc32c

    from sluice.protocol.records.varint import encode_varint as zz

    body = b""
    for i, value in enumerate(values):
        rec = b"\x00" + zz(0) + zz(i) + zz(len(key)) + key + zz(len(value)) + value + zz(0)
        body += zz(len(rec)) + rec
    tail = struct.pack(">hiqqqhii", attrs, len(values) - 1, 1000, 1000, pid, 0, 0, len(values))
    crc = crc32c(tail + body)
    length = 4 + 1 + 4 + len(tail) + len(body)
    return struct.pack(">qiibI", base_offset, length, 0, 2, crc) + tail + body


def test_read_committed_skips_aborted_transactions_and_control_batches() -> None:
    commit_marker = struct.pack(">hh", 0, 1)
    abort_marker = struct.pack(">hh", 0, 0)
    data = b"".join([
        _batch(0, 7, [b"c0", b"c1"], 0x10),  # committed transaction of producer 7
        _batch(2, 7, [b""], 0x30, commit_marker),
        _batch(3, 8, [b"a0", b"a1"], 0x10),  # aborted transaction of producer 8
        _batch(5, 9, [b"plain"], 0),  # not transactional
        _batch(6, 8, [b""], 0x30, abort_marker),
        _batch(7, 8, [b"later"], 0x10),  # producer 8's next (committed) transaction
    ])  # fmt: skip
    records, next_offset = decode_records("t", 0, data, 0, [(8, 3)], read_committed=True)
    assert [r.value for r in records] == [b"c0", b"c1", b"plain", b"later"]
    assert next_offset == 8
    records, _ = decode_records("t", 0, data, 0, [(8, 3)], read_committed=False)
    assert [r.value for r in records] == [b"c0", b"c1", b"a0", b"a1", b"plain", b"later"]
    records, _ = decode_records("t", 0, data, 4)  # records before the fetch offset dropped
    assert [r.offset for r in records] == [4, 5, 7]
    # a partial batch at the end of a response is left for the next fetch
    records, next_offset = decode_records("t", 0, data + data[:30], 0)
    assert next_offset == 8


def test_protocol_encoding_round_trips_and_assignors() -> None:
    sub = Subscription(["a", "b"], b"ud", [("a", 1)])
    assert decode_subscription(encode_subscription(sub)) == sub
    assignment = Assignment([("a", 0), ("a", 2), ("b", 1)], None)
    assert decode_assignment(encode_assignment(assignment)) == assignment
    subs = {"m1": Subscription(["a", "b"]), "m2": Subscription(["a"]), "m3": Subscription(["a"])}
    ranged = range_assign({"a": 4, "b": 2}, subs)
    assert ranged == {"m1": [("a", 0), ("a", 1), ("b", 0), ("b", 1)], "m2": [("a", 2)],
                      "m3": [("a", 3)]}  # fmt: skip
    rr = roundrobin_assign({"a": 4}, {"m1": Subscription(["a"]), "m2": Subscription(["a"])})
    assert rr == {"m1": [("a", 0), ("a", 2)], "m2": [("a", 1), ("a", 3)]}


def test_bad_config_is_rejected() -> None:
    from sluice.client.errors import ConfigException

    with pytest.raises(ConfigException):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "no.such.key": 1})
    with pytest.raises(ConfigException):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "auto.offset.reset": "sideways"})
