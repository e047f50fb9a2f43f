"""Records from Sluice's producer read by confluent-kafka and kafka-python consumers."""

from __future__ import annotations

import glob
import os

import pytest

import sluice
from sluice.client import Producer
from sluice.protocol.records.compression import CompressionType
from support.clients import consume_confluent, consume_kafka_python, create_topic
from support.records import read_batches

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
T0 = 1_700_000_000_000


def _records(n: int) -> list[tuple[bytes | None, bytes, list[tuple[str, bytes]], int]]:
    out = []
    for i in range(n):
        key = None if i % 5 == 0 else f"key-{i}".encode()
        headers = [("seq", str(i).encode()), ("kind", b"test")] if i % 2 else []
        out.append((key, f"value-{i}-".encode() * (1 + i % 7), headers, T0 + i * 3))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_is_read_back_by_confluent_and_kafka_python(
    broker: sluice.EmbeddedBroker, topic: str, codec: str
) -> None:
    expected = _records(300)
    config = {"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec,
              "linger.ms": 20, "batch.size": 4096}  # fmt: skip
    with Producer(config) as producer:
        for key, value, headers, ts in expected:
            producer.send(topic, value, key=key, headers=headers, timestamp=ts, partition=0)
        producer.flush(20)
    assert consume_confluent(broker.bootstrap_servers, topic, len(expected)) == expected
    assert consume_kafka_python(broker.bootstrap_servers, topic, len(expected)) == expected
    # The broker stored the batches as written: compressed with the codec asked for.
    (segment,) = glob.glob(os.path.join(str(broker.log_dir), f"{topic}-0", "*.log"))
    with open(segment, "rb") as f:
        batches = read_batches(f.read())
    assert len(batches) > 1
    assert {b["compression"] for b in batches} == {int(CompressionType.for_name(codec))}
    assert all(b["producer_id"] >= 0 for b in batches)  # idempotent by default


def test_keyed_records_land_where_confluent_kafka_puts_them(
    broker: sluice.EmbeddedBroker, topic: str
) -> None:
    from confluent_kafka import Producer as ConfluentProducer

    create_topic(broker.bootstrap_servers, topic, 7)
    keys = [f"user-{i}".encode() for i in range(200)] + [b"", b"\x00\xff", "ключ".encode()]
    theirs: dict[bytes, int] = {}
    confluent = ConfluentProducer(
        {"bootstrap.servers": broker.bootstrap_servers, "partitioner": "murmur2_random"}
    )

    def delivered(err, msg):  # type: ignore[no-untyped-def]
        assert err is None
        theirs[msg.key()] = msg.partition()

    for key in keys:
        confluent.produce(topic, b"c", key=key, on_delivery=delivered)
    assert confluent.flush(20) == 0
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        ours = {key: producer.send(topic, b"s", key=key).get(20).partition for key in keys}
    assert ours == theirs
    assert len(set(ours.values())) == 7
