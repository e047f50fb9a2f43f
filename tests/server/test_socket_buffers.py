"""``socket.send.buffer.bytes`` and ``socket.receive.buffer.bytes``: set on the listening
sockets, inherited by every connection accepted from them; -1 keeps the system's."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTP

import sluice
from sluice.config import BrokerConfig, ConfigError
from sluice.server.acceptor import bind_listener

SIZE = 50_000  # unlike any system default
# Linux doubles the size asked for (the other half is for its own bookkeeping).
REPORTED = 2 * SIZE if sys.platform == "linux" else SIZE


def _accepted(listener: socket.socket) -> Iterator[socket.socket]:
    client = socket.create_connection(listener.getsockname()[:2], timeout=5)
    listener.setblocking(True)
    conn, _ = listener.accept()
    try:
        yield conn
    finally:
        conn.close()
        client.close()


def _buffers(sock: socket.socket) -> tuple[int, int]:
    return (
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
    )


def test_accepted_sockets_inherit_the_listening_sockets_buffers() -> None:
    (listener,) = bind_listener("127.0.0.1", 0, send_buffer=SIZE, receive_buffer=SIZE)
    with listener:
        for conn in _accepted(listener):
            assert _buffers(conn) == (REPORTED, REPORTED)


def test_minus_one_keeps_the_systems_buffers() -> None:
    plain = socket.socket()
    with plain:
        system = _buffers(plain)
    (listener,) = bind_listener("127.0.0.1", 0)
    with listener:
        assert _buffers(listener) == system


def test_zero_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"invalid value 0 for socket\.send\.buffer\.bytes"):
        BrokerConfig({"socket.send.buffer.bytes": "0"})
    with pytest.raises(ConfigError, match="must be at least -1"):
        BrokerConfig({"socket.receive.buffer.bytes": "-2"})


def _server_side_buffers(broker: sluice.EmbeddedBroker) -> list[tuple[int, int]]:
    def collect() -> list[tuple[int, int]]:
        out = []
        assert broker.broker is not None
        for server in broker.broker.servers:
            for conn in server._connections:
                if conn.transport is not None:
                    out.append(_buffers(conn.transport.get_extra_info("socket")))
        return out

    return broker.call(collect)


def test_clients_are_served_on_connections_with_the_configured_buffers() -> None:
    config = {"socket.send.buffer.bytes": SIZE, "socket.receive.buffer.bytes": SIZE}
    with sluice.EmbeddedBroker(config=config) as broker:
        bootstrap = broker.bootstrap_servers
        topic = "socket-buffers"
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        value = b"x" * 200_000  # several send buffers' worth each
        for _ in range(5):
            producer.produce(topic, value=value)
        assert producer.flush(30) == 0
        kp = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=1_000_000)
        kp.send(topic, value=value).get(timeout=30)
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10_000
        )
        consumer.assign([KpTP(topic, 0)])
        got = [m.value for _, m in zip(range(6), consumer, strict=False)]
        cc = Consumer({
            "bootstrap.servers": bootstrap, "group.id": "socket-buffers",
            "auto.offset.reset": "earliest",
        })  # fmt: skip
        cc.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < 6 and time.monotonic() < deadline:
            msg = cc.poll(1.0)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        seen = _server_side_buffers(broker)
        cc.close()
        consumer.close()
        kp.close()
        assert got == values == [value] * 6
        assert len(seen) >= 3  # the four clients' connections, at least
        assert set(seen) == {(REPORTED, REPORTED)}
