"""``socket.loopback.congestion.control``: connections with a loopback peer that carry
data get the named TCP congestion control (accepted by a listener, opened by a replica
fetcher); other peers keep the system's; a name the kernel refuses is reported once and
the broker serves as before. Proven on real loopback sockets, with confluent-kafka and
kafka-python against an embedded broker, and on the replica fetchers of an in-process
three-broker cluster."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import given
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer

import sluice
from sluice.server import congestion
from sluice.server.congestion import checked_algorithm, is_loopback, set_on_loopback
from sluice.server.inter_broker import BrokerConnection
from sluice.testing import EmbeddedCluster

linux_only = pytest.mark.skipif(
    not hasattr(socket, "TCP_CONGESTION"), reason="TCP_CONGESTION is Linux's"
)
SETTING = "socket.loopback.congestion.control"


def system_default() -> str:
    return Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()


def accepted_names() -> list[str]:
    """The algorithms this kernel lets this process set ("reno" always among them)."""
    names = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    return [n for n in names if checked_algorithm(n) is not None]


def not_the_default() -> str:
    """An algorithm other than the system's when the kernel allows one, so that a socket
    showing it was set, not inherited; else "reno"."""
    others = [n for n in accepted_names() if n != system_default()]
    return "reno" if "reno" in others or not others else others[0]


def algorithm_of(sock: socket.socket) -> str:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
    return raw.split(b"\0", 1)[0].decode()


# -- which peers are loopback ----------------------------------------------------------------


@given(st.ip_addresses(v=4))
def test_an_ipv4_peer_is_loopback_exactly_in_127_0_0_0_8(ip: ipaddress.IPv4Address) -> None:
    expected = ip.packed[0] == 127
    assert is_loopback(str(ip)) is expected
    assert is_loopback(f"::ffff:{ip}") is expected  # a dual-stack listener's view of it


@given(st.ip_addresses(v=6).filter(lambda ip: ip.ipv4_mapped is None))
def test_an_ipv6_peer_is_loopback_only_as_1(ip: ipaddress.IPv6Address) -> None:
    assert is_loopback(str(ip)) is (ip == ipaddress.IPv6Address("::1"))


@pytest.mark.parametrize("address", ["localhost", "", "127.0.0.1:9092", "not an address"])
def test_names_and_garbage_are_not_loopback_addresses(address: str) -> None:
    assert not is_loopback(address)


def test_a_zone_suffix_is_ignored() -> None:
    assert is_loopback("::1%lo")
    assert not is_loopback("fe80::1%eth0")


# -- the kernel's word on a name -------------------------------------------------------------


@pytest.fixture
def fresh_checks() -> Any:
    checked_algorithm.cache_clear()
    yield
    checked_algorithm.cache_clear()


@linux_only
@pytest.mark.integration  # asks the kernel through a TCP socket
def test_reno_is_always_accepted(fresh_checks: None) -> None:
    assert checked_algorithm("reno") == b"reno"
    assert checked_algorithm("") is None


@linux_only
@pytest.mark.integration  # asks the kernel through a TCP socket
def test_a_refused_name_is_reported_once_and_not_used(
    fresh_checks: None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=congestion.__name__):
        for _ in range(3):
            assert checked_algorithm("no-such-cc") is None
        assert checked_algorithm("rénø") is None
    refused = [r.getMessage() for r in caplog.records]
    assert len(refused) == 2, refused
    assert "'no-such-cc' refused" in refused[0] and "system's congestion control" in refused[0]


def test_without_the_option_nothing_is_set(
    fresh_checks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(congestion, "_OPTION", None)
    assert checked_algorithm("reno") is None
    assert not set_on_loopback(object(), "reno")


# -- real sockets ----------------------------------------------------------------------------


class PeerAt:
    """A connected transport's face with its socket, seen as coming from ``peer``."""

    def __init__(self, sock: socket.socket, peer: Any) -> None:
        self.sock, self.peer = sock, peer

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"socket": self.sock, "peername": self.peer}.get(name, default)


async def _accepted_pair() -> tuple[asyncio.Server, list[asyncio.Transport], asyncio.Transport]:
    loop = asyncio.get_running_loop()
    first: asyncio.Future[asyncio.Transport] = loop.create_future()

    class Keep(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            if not first.done():
                first.set_result(transport)  # type: ignore[arg-type]

    server = await loop.create_server(Keep, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
    accepted = await asyncio.wait_for(first, 10)
    return server, [accepted], client


@linux_only
@pytest.mark.integration  # real sockets
def test_both_ends_of_a_loopback_connection_take_each_accepted_name() -> None:
    async def run() -> None:
        server, accepted, client = await _accepted_pair()
        try:
            for name in accepted_names():
                for transport in (accepted[0], client):
                    assert set_on_loopback(transport, name)
                    assert algorithm_of(transport.get_extra_info("socket")) == name
        finally:
            client.close()
            server.close()
            await server.wait_closed()

    asyncio.run(run())


@linux_only
@pytest.mark.integration  # real sockets
def test_another_peer_keeps_the_system_algorithm() -> None:
    name = not_the_default()
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, socket.create_connection(listener.getsockname()) as sock:
        before = algorithm_of(sock)
        for peer in (("192.0.2.7", 9092), ("2001:db8::7", 9092, 0, 0), ("localhost", 1)):
            assert not set_on_loopback(PeerAt(sock, peer), name)
        assert not set_on_loopback(PeerAt(sock, None), name)
        assert algorithm_of(sock) == before
    unix_a, unix_b = socket.socketpair(socket.AF_UNIX)
    with unix_a, unix_b:
        assert not set_on_loopback(PeerAt(unix_a, ("127.0.0.1", 1)), name)


@linux_only
@pytest.mark.integration  # real sockets
def test_a_closed_socket_is_skipped_not_raised() -> None:
    sock = socket.socket()
    sock.close()
    assert not set_on_loopback(PeerAt(sock, ("127.0.0.1", 9092)), "reno")


@linux_only
@pytest.mark.integration  # real sockets
def test_a_broker_connection_sets_its_socket_when_it_connects() -> None:
    """The connection class replica fetchers use (with and without the setting)."""
    name = not_the_default()

    async def run() -> None:
        server, _accepted, client = await _accepted_pair()
        client.close()
        port = server.sockets[0].getsockname()[1]
        try:
            for setting, expected in ((name, name), ("", system_default())):
                conn = BrokerConnection("127.0.0.1", port, "test", loopback_congestion=setting)
                reader = await conn._connect()
                assert reader.transport is not None
                assert algorithm_of(reader.transport.get_extra_info("socket")) == expected
                conn.close()
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(run())


# -- a broker and real clients ---------------------------------------------------------------


def accepted_algorithms(embedded: sluice.EmbeddedBroker) -> list[str]:
    """The congestion control of every open connection the broker's listeners hold now.

    A connection being closed stays listed until the loop reports it lost, with its
    socket perhaps closed already (reading that one would raise EBADF): skipped."""

    def read() -> list[str]:
        return [
            algorithm_of(conn.transport.get_extra_info("socket"))
            for server in embedded.broker.servers
            for conn in list(server._connections)
            if conn.transport is not None and not conn.transport.is_closing()
        ]

    result: list[str] = embedded.call(read)
    return result


def produce_and_consume(bootstrap: str, embedded: sluice.EmbeddedBroker, expected: str) -> None:
    """confluent-kafka and kafka-python write and read back; while each is connected,
    every connection the broker accepted shows ``expected``."""
    topic = f"cc-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    values = [b"%03d" % i * 100 for i in range(50)]

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for value in values[:25]:
        producer.produce(topic, value)
    assert producer.flush(15) == 0
    seen = accepted_algorithms(embedded)
    assert seen and set(seen) == {expected}, seen
    kp = KafkaProducer(bootstrap_servers=bootstrap)
    for value in values[25:]:
        kp.send(topic, value)
    kp.flush(15)
    seen = accepted_algorithms(embedded)
    kp.close()
    assert len(seen) >= 2 and set(seen) == {expected}, seen

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        seen = accepted_algorithms(embedded)
    finally:
        consumer.close()
    assert got == values and set(seen) == {expected}, seen
    kc = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=30_000
    )
    again: list[bytes] = []
    try:
        for message in kc:  # ends early only if 30 s pass without a record
            again.append(message.value)
            if len(again) == len(values):
                break
    finally:
        kc.close()
    assert again == values


@linux_only
@pytest.mark.parametrize("setting", ["default", "other", "off"])
@pytest.mark.integration  # real sockets
def test_clients_connections_take_the_setting(setting: str) -> None:
    config: dict[str, str] = {}
    expected = "reno"
    if setting == "other":
        expected = config[SETTING] = not_the_default()
    elif setting == "off":
        config[SETTING] = ""
        expected = system_default()
    with sluice.EmbeddedBroker(config=config) as embedded:
        produce_and_consume(embedded.bootstrap_servers, embedded, expected)


@linux_only
@pytest.mark.integration  # real sockets
def test_a_refused_name_leaves_the_broker_serving(
    fresh_checks: None, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger=congestion.__name__),
        sluice.EmbeddedBroker(config={SETTING: "no-such-cc"}) as embedded,
    ):
        assert any("'no-such-cc' refused" in r.getMessage() for r in caplog.records)
        produce_and_consume(embedded.bootstrap_servers, embedded, system_default())


@linux_only
@pytest.mark.integration  # real sockets
def test_replica_fetchers_and_the_leaders_they_fetch_from_take_the_setting() -> None:
    name = not_the_default()
    overrides = {"zookeeper.session.timeout.ms": 2000, SETTING: name}
    with EmbeddedCluster(brokers=3, zookeeper=False, overrides=overrides) as cluster:
        topic = "replicated"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[
            topic
        ].result(15)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(30):
            producer.produce(topic, b"%d" % i, partition=i % 3)
        assert producer.flush(30) == 0  # acks=all: every follower fetched them

        def fetchers(broker: Any) -> list[str]:
            return [
                algorithm_of(f.conn._reader.transport.get_extra_info("socket"))
                for f in broker.cluster.fetchers.values()
                if f.conn._reader is not None and f.conn._reader.transport is not None
            ]

        for broker_id, embedded in cluster.embedded.items():
            outbound = embedded.call(fetchers, embedded.broker)
            assert outbound and set(outbound) == {name}, (broker_id, outbound)
            inbound = accepted_algorithms(embedded)
            assert inbound and set(inbound) == {name}, (broker_id, inbound)
