"""Listeners, advertised listeners and the inter-broker listener, with Kafka's checks."""

from __future__ import annotations

import pytest

from sluice.config import BrokerConfig, ConfigError
from sluice.controller.model import Broker, EndPoint
from sluice.server.listener_security import (
    InterBrokerListener,
    inter_broker_listener,
    listener_security,
)


def test_named_listeners_take_their_protocol_from_the_map() -> None:
    config = BrokerConfig({
        "listeners": "INTERNAL://127.0.0.1:9091,EXTERNAL://0.0.0.0:9092,SSL://:9093",
        "advertised.listeners": "INTERNAL://broker-1:9091,EXTERNAL://kafka.example.com:9092",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,SSL:SSL",
        "inter.broker.listener.name": "internal",
    })  # fmt: skip
    assert config.listener_endpoints == [
        EndPoint("127.0.0.1", 9091, "INTERNAL", "PLAINTEXT"),
        EndPoint("0.0.0.0", 9092, "EXTERNAL", "SASL_SSL"),
        EndPoint("0.0.0.0", 9093, "SSL", "SSL"),
    ]
    assert [e.connection_string for e in config.advertised_endpoints] == [
        "INTERNAL://broker-1:9091",
        "EXTERNAL://kafka.example.com:9092",
    ]
    assert config.inter_broker_listener_name == "INTERNAL"
    assert config.inter_broker_security_protocol == "PLAINTEXT"


def test_the_inter_broker_listener_defaults_to_security_inter_broker_protocol() -> None:
    config = BrokerConfig({"listeners": "PLAINTEXT://:0,SSL://:0"})
    assert config.inter_broker_listener_name == "PLAINTEXT"
    config = BrokerConfig(
        {"listeners": "PLAINTEXT://:0,SSL://:0", "security.inter.broker.protocol": "SSL"}
    )
    inter = inter_broker_listener(config)
    assert (inter.listener_name, inter.security_protocol) == ("SSL", "SSL")
    assert inter.ssl_context is not None  # a TLS client, verifying the other brokers


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "different name"),
        ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "different port"),
        ({"listeners": "A://:9092"}, "no security protocol for listener A"),
        ({"listener.security.protocol.map": "A:TLS"}, "unknown security protocol 'TLS'"),
        ({"listener.security.protocol.map": "A:SSL,a:SSL"}, "named twice"),
        ({"listener.security.protocol.map": "ASSL"}, "expected NAME:PROTOCOL"),
        ({"advertised.listeners": "SSL://h:9093"}, "SSL is not one of the listeners"),
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"},
            "only one of",
        ),
        (
            {"zookeeper.connect": "127.0.0.1:2181", "security.inter.broker.protocol": "SSL"},
            "inter.broker.listener.name must be a listener name defined in advertised",
        ),
        ({"listener.name.plaintext.log.dirs": "/x"}, "unknown broker config"),
        ({"listener.name.sasl.ssl.client.auth": "required"}, "no listener SASL"),
    ],
)
def test_listener_settings_are_checked_as_kafka_does(values: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(values)


def test_sasl_listeners_without_mechanisms_refuse_to_start() -> None:
    # Kafka's default mechanism is GSSAPI, which is not served
    config = BrokerConfig({"listeners": "PLAINTEXT://:0,SASL_PLAINTEXT://:0"})
    with pytest.raises(ConfigError, match="mechanism GSSAPI is not supported"):
        for endpoint in config.listener_endpoints:
            listener_security(config, endpoint)


def test_a_broker_names_its_endpoint_per_listener() -> None:
    broker = Broker(1, (EndPoint("a", 1, "INTERNAL"), EndPoint("b", 2, "EXTERNAL", "SSL")))
    assert broker.endpoint("EXTERNAL") == EndPoint("b", 2, "EXTERNAL", "SSL")
    assert broker.endpoint("PLAINTEXT") is None
    inter = InterBrokerListener("INTERNAL")
    assert inter.endpoint(broker) == EndPoint("a", 1, "INTERNAL")
    # LeaderAndIsr carries a leader's inter-broker host and port only
    bare = Broker.plaintext(2, "c", 3)
    assert inter.named(bare).endpoints == (EndPoint("c", 3, "INTERNAL", "PLAINTEXT"),)
