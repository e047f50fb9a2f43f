"""Broker configuration: Kafka property names, validation, properties files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sluice.config import (
    BrokerConfig,
    ConfigError,
    parse_listener,
    parse_properties,
    topic_config_defaults,
    validate_topic_configs,
)
from sluice.controller.model import EndPoint
from sluice.log import LogConfig
from sluice.log.errors import ConfigException


def test_defaults_are_single_node_friendly() -> None:
    config = BrokerConfig()
    assert config.listeners == ["PLAINTEXT://127.0.0.1:9092"]
    assert config.log_dir == Path("./sluice-data")
    assert config["num.partitions"] == 1 and config["auto.create.topics.enable"] is True
    assert config.retention_ms == 168 * 3_600_000
    assert config["socket.request.max.bytes"] == 104_857_600


def test_properties_file_then_overrides(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "# comment\n! also a comment\nbroker.id=3\nlog.dirs = /data/a\n"
        "num.partitions: 4\nlog.retention.minutes=5\nlisteners=PLAINTEXT://127.0.0.1:19092,\\\n"
        "  SSL://[::1]:19093\n"
    )
    config = BrokerConfig.from_properties(props, ["num.partitions=8", "min.insync.replicas=2"])
    assert config.broker_id == 3 and config["num.partitions"] == 8
    assert config.log_dir == Path("/data/a") and config["min.insync.replicas"] == 2
    assert config.retention_ms == 300_000
    assert config.listeners == ["PLAINTEXT://127.0.0.1:19092", "SSL://[::1]:19093"]
    assert config.advertised_listeners == config.listeners


def test_unknown_key_is_rejected_by_name() -> None:
    with pytest.raises(ConfigError, match=r"unknown broker config 'log\.dir\.typo'"):
        BrokerConfig.from_properties(None, ["log.dir.typo=/x"])


# Settings Sluice once had and removed: rejected like any other unknown key.
REMOVED_BROKER_KEYS = [
    "log.write.thread",
    "log.segment.drop.read.pages",
    "log.segment.allocate.ahead.bytes",
]
REMOVED_TOPIC_KEYS = ["segment.drop.read.pages", "segment.allocate.ahead.bytes"]


@pytest.mark.parametrize("key", REMOVED_BROKER_KEYS)
def test_removed_broker_keys_are_unknown(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"unknown broker config '{re.escape(key)}'"):
        BrokerConfig.from_properties(None, [f"{key}=1"])


@pytest.mark.parametrize("key", REMOVED_TOPIC_KEYS)
def test_removed_topic_keys_are_unknown(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"unknown topic config '{re.escape(key)}'"):
        validate_topic_configs({key: "1"})
    with pytest.raises(ConfigException, match=re.escape(key)):
        LogConfig.from_properties({key: "1"})


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("num.partitions=zero", "num.partitions"),
        ("num.partitions=0", "num.partitions"),
        ("auto.create.topics.enable=yes", "auto.create.topics.enable"),
        ("log.message.timestamp.type=Wallclock", "log.message.timestamp.type"),
        ("listeners=PLAINTEXT://127.0.0.1:notaport", "listeners"),
        ("listeners=CLIENT://127.0.0.1:9093", "no security protocol for listener CLIENT"),
        ("novalue", "expected key=value"),
    ],
)
def test_bad_values_name_the_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(None, [override])


def test_parse_properties_rejects_garbage() -> None:
    with pytest.raises(ConfigError):
        parse_properties("just words")


def test_parse_listener() -> None:
    assert parse_listener("PLAINTEXT://localhost:9092") == EndPoint("localhost", 9092)
    assert parse_listener("PLAINTEXT://:9092") == EndPoint("0.0.0.0", 9092)
    assert parse_listener("SSL://[::1]:9093") == EndPoint("::1", 9093, "SSL", "SSL")
    internal = parse_listener("internal://h:1", {"INTERNAL": "SASL_SSL"})
    assert internal == EndPoint("h", 1, "INTERNAL", "SASL_SSL")


def test_topic_defaults_follow_broker_synonyms() -> None:
    config = BrokerConfig(
        {"log.retention.hours": "1", "log.segment.bytes": "1024", "log.cleanup.policy": "compact"}
    )
    defaults = topic_config_defaults(config)
    assert defaults["retention.ms"] == 3_600_000
    assert defaults["segment.bytes"] == 1024
    assert defaults["cleanup.policy"] == ["compact"]
    assert defaults["max.message.bytes"] == 1_048_588


def test_topic_config_validation() -> None:
    assert validate_topic_configs({"retention.ms": "1000", "cleanup.policy": "compact,delete"}) == {
        "retention.ms": 1000,
        "cleanup.policy": ["compact", "delete"],
    }
    with pytest.raises(ConfigError, match="unknown topic config"):
        validate_topic_configs({"retention.msec": "1"})
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        validate_topic_configs({"segment.bytes": "1"})
