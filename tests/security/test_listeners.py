"""Several named listeners on one broker: each answers with its own addresses, each
connection's session names its listener, and unsupported protocols stop the start."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

import sluice
from sluice.config import ConfigError
from sluice.protocol import ApiKey
from sluice.security import Session


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


def test_a_sasl_listener_stops_the_start() -> None:
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"}
    with pytest.raises(RuntimeError, match="failed to start") as failed:
        sluice.EmbeddedBroker(config=config).start()
    assert isinstance(failed.value.__cause__, ConfigError)
    assert "SASL_SSL://127.0.0.1:0: security protocol SASL_SSL is not supported" in str(
        failed.value.__cause__
    )
