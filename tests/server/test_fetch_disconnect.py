"""A client that drops its connection while a Fetch answer with file regions is being
sent (librdkafka's 0094 does it on purpose) is a closed connection: no error, no
traceback, and the broker serves on.

The answer goes out through ``loop.sendfile`` when the transport cannot be written to
directly (bytes of an earlier answer still buffered, or TLS); a response of several
regions then gives the event loop turns between them, in which the client's reset
closes the transport."""

from __future__ import annotations

import datetime
import logging
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import sluice
from sluice.protocol import encode_request
from sluice.protocol.apis import load_request_schema
from sluice.server import sendfile
from sluice.server.messages import build

TOPIC = "dropped-fetch"
PARTITIONS = 3
VALUE = b"v" * 200_000
PER_PARTITION = 12  # 2.4 MB a partition: far more than the sockets hold
TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def loaded(broker: sluice.EmbeddedBroker) -> sluice.EmbeddedBroker:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS)])[TOPIC].result(timeout=TIMEOUT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for partition in range(PARTITIONS):
        for _ in range(PER_PARTITION):
            producer.produce(TOPIC, VALUE, partition=partition)
    assert producer.flush(TIMEOUT_S) == 0
    return broker


def fetch_request() -> bytes:
    body = build(
        load_request_schema(1, 4),
        replica_id=-1, max_wait=datetime.timedelta(milliseconds=100), min_bytes=1,
        max_bytes=64 * 1024 * 1024, isolation_level=0,
        topics=[{"topic": TOPIC, "partitions": [
            {"partition": p, "fetch_offset": 0, "partition_max_bytes": 32 * 1024 * 1024}
            for p in range(PARTITIONS)]}],
    )  # fmt: skip
    return encode_request(7, body)


def drop_mid_answer(port: int, read_first: int) -> None:
    """Send the Fetch, read ``read_first`` bytes of the answer, then reset the connection."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(TIMEOUT_S)
    sock.connect(("127.0.0.1", port))
    sock.sendall(fetch_request())
    got = 0
    while got < read_first:
        chunk = sock.recv(min(4096, read_first - got))
        assert chunk
        got += len(chunk)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # RST


def problems(records: list[logging.LogRecord]) -> list[str]:
    return [
        f"{r.name} {r.levelname}: {r.getMessage()}"
        for r in records
        if r.levelno >= logging.ERROR or r.exc_info or "error sending an answer" in r.getMessage()
    ]


def still_serves(broker: sluice.EmbeddedBroker) -> None:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "after",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.assign([TopicPartition(TOPIC, 2, PER_PARTITION - 1)])
        message = consumer.poll(TIMEOUT_S)
        assert message is not None and message.error() is None
        assert message.value() == VALUE
    finally:
        consumer.close()


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "loop-sendfile"])
def test_a_client_dropping_mid_answer_is_a_closed_connection(
    loaded: sluice.EmbeddedBroker,
    direct: bool,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    if not direct:  # as with bytes still buffered, or TLS: through loop.sendfile
        monkeypatch.setattr(sendfile, "_direct_socket", lambda _transport: None)
    caplog.set_level(logging.DEBUG, logger="sluice.server")
    caplog.set_level(logging.DEBUG, logger="asyncio")
    for read_first in (0, 100, 5000, 300_000, 1_000_000):
        drop_mid_answer(loaded.port, read_first)
    deadline = time.monotonic() + TIMEOUT_S
    while loaded.broker.servers[0].connection_count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert loaded.broker.servers[0].connection_count == 0
    still_serves(loaded)
    assert problems(caplog.records) == []
