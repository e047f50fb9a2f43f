"""Several named listeners on one broker: each answers with its own addresses, each
connection's session names its listener, and unsupported protocols stop the start."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

import sluice
from sluice.config import ConfigError
from sluice.protocol import ApiKey
from sluice.security import Session
from sluice.server.broker import _warn_if_exposed
from sluice.server.listener_security import ListenerSecurity

pytestmark = pytest.mark.integration  # brokers, sockets, real clients


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
    }


def _addresses(broker: sluice.EmbeddedBroker) -> dict[str, str]:
    assert broker.broker is not None
    return {s.listener_name: f"127.0.0.1:{s.port}" for s in broker.broker.servers}


def test_each_listener_advertises_itself(broker: sluice.EmbeddedBroker, topic: str) -> None:
    addresses = _addresses(broker)
    assert set(addresses) == {"PLAINTEXT", "INTERNAL"}
    for name, address in addresses.items():
        metadata = AdminClient({"bootstrap.servers": address}).list_topics(timeout=10)
        [node] = metadata.brokers.values()
        assert f"{node.host}:{node.port}" == address, name
        admin = KafkaAdminClient(bootstrap_servers=address)
        try:
            [described] = admin.describe_cluster()["brokers"]
            assert f"{described['host']}:{described['port']}" == address
        finally:
            admin.close()
    # a record written on one listener is read on the other
    producer = KafkaProducer(bootstrap_servers=addresses["INTERNAL"])
    producer.send(topic, b"through INTERNAL").get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(
        topic, bootstrap_servers=addresses["PLAINTEXT"], auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )  # fmt: skip
    try:
        assert next(iter(consumer)).value == b"through INTERNAL"
    finally:
        consumer.close()


def test_a_request_carries_its_listener(broker: sluice.EmbeddedBroker) -> None:
    assert broker.broker is not None
    handlers = broker.broker.handlers
    metadata = handlers[ApiKey.METADATA]
    seen: list[Session] = []

    def record(ctx: Any, request: Any) -> Any:
        seen.append(ctx.session)
        return metadata(ctx, request)

    broker.call(handlers.__setitem__, ApiKey.METADATA, record)
    try:
        for address in _addresses(broker).values():
            AdminClient({"bootstrap.servers": address}).list_topics(timeout=10)
    finally:
        broker.call(handlers.__setitem__, ApiKey.METADATA, metadata)
    assert {(s.listener_name, s.security_protocol) for s in seen} == {
        ("PLAINTEXT", "PLAINTEXT"), ("INTERNAL", "PLAINTEXT"),
    }  # fmt: skip
    assert {str(s.principal) for s in seen} == {"User:ANONYMOUS"}


def test_a_sasl_listener_without_mechanisms_stops_the_start() -> None:
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"}
    with pytest.raises(RuntimeError, match="failed to start") as failed:
        sluice.EmbeddedBroker(config=config).start()
    assert isinstance(failed.value.__cause__, ConfigError)
    assert "mechanism GSSAPI is not supported on listener SASL_SSL" in str(failed.value.__cause__)


def test_the_ready_line_says_who_may_connect(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sluice.server.broker")
    with sluice.EmbeddedBroker():
        pass
    [ready] = [r.getMessage() for r in caplog.records if " ready on " in r.getMessage()]
    assert "PLAINTEXT://127.0.0.1:" in ready and "(unauthenticated)" in ready
    # loopback only: no warning about exposure
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_unauthenticated_listeners_beyond_loopback_are_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def server(name: str, host: str, security: ListenerSecurity) -> Any:
        return SimpleNamespace(listener_name=name, host=host, port=9092, security=security)

    plain = ListenerSecurity("PLAINTEXT", "PLAINTEXT")
    sasl = ListenerSecurity("SASL_SSL", "SASL_SSL")
    servers = [
        server("PLAINTEXT", "127.0.0.1", plain),
        server("PLAINTEXT", "::1", plain),
        server("EXTERNAL", "0.0.0.0", plain),
        server("INTERNAL", "10.0.0.5", plain),
        server("SASL_SSL", "0.0.0.0", sasl),
    ]
    with caplog.at_level(logging.WARNING, logger="sluice.server.broker"):
        _warn_if_exposed(servers)
    [warning] = caplog.records
    assert "EXTERNAL://0.0.0.0:9092, INTERNAL://10.0.0.5:9092" in warning.getMessage()
    assert "unauthenticated" in warning.getMessage()
