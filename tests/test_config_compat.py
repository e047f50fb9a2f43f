"""Kafka broker keys Sluice ignores with a warning, the refusals with a suggestion, and
the shipped ``config/server.properties``."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.config import BROKER_CONFIGS, BrokerConfig, ConfigError, parse_properties
from sluice.config_compat import IGNORED_BROKER_CONFIGS
from sluice.server_properties import ACTIVE, render_server_properties

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"

# The settings of the server.properties that Kafka 3.9's distribution ships (ZooKeeper
# mode), with its values.
KAFKA_39_SERVER_PROPERTIES = {
    "broker.id": "0",
    "num.network.threads": "3",
    "num.io.threads": "8",
    "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400",
    "socket.request.max.bytes": "104857600",
    "log.dirs": "/tmp/kafka-logs",
    "num.partitions": "1",
    "num.recovery.threads.per.data.dir": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "log.retention.hours": "168",
    "log.retention.check.interval.ms": "300000",
    "zookeeper.connect": "localhost:2181",
    "zookeeper.connection.timeout.ms": "18000",
    "group.initial.rebalance.delay.ms": "0",
}


def test_kafka_39_server_properties_is_accepted_and_its_ignored_keys_named() -> None:
    config = BrokerConfig(KAFKA_39_SERVER_PROPERTIES)
    assert config.ignored_keys == [
        "num.network.threads",
        "num.io.threads",
        "num.recovery.threads.per.data.dir",
    ]
    # socket buffers are honoured, as Kafka sets them
    assert config["socket.send.buffer.bytes"] == config["socket.receive.buffer.bytes"] == 102400
    # the keys Sluice honours keep their values
    assert config["group.initial.rebalance.delay.ms"] == 0
    assert config["transaction.state.log.min.isr"] == 1
    assert config["zookeeper.connect"] == "localhost:2181"
    for key in config.ignored_keys:
        assert not config.is_set(key)
        with pytest.raises(KeyError):
            config[key]


def test_no_honoured_key_is_in_the_ignored_list() -> None:
    assert not set(IGNORED_BROKER_CONFIGS) & set(BROKER_CONFIGS)
    assert "group.initial.rebalance.delay.ms" not in IGNORED_BROKER_CONFIGS


def test_ignored_keys_are_kept_in_the_order_given_and_values_are_not_checked() -> None:
    config = BrokerConfig({"metric.reporters": "com.example.Reporter", "background.threads": "x"})
    assert config.ignored_keys == ["metric.reporters", "background.threads"]
    assert BrokerConfig({}).ignored_keys == []


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("log.retention.hour", "log.retention.hours"),
        ("num.partition", "num.partitions"),
        ("auto.create.topic.enable", "auto.create.topics.enable"),
        ("zookeeper.conect", "zookeeper.connect"),
        ("num.network.thread", "num.network.threads"),
    ],
)
def test_unknown_key_is_refused_with_the_nearest_key(key: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig({key: "1"})
    assert str(info.value) == f"unknown broker config {key!r}; did you mean {suggestion!r}?"


def test_unknown_key_with_nothing_near_is_refused_without_a_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig({"completely.made.up": "1"})
    assert str(info.value) == "unknown broker config 'completely.made.up'"


def test_listener_prefixed_typo_gets_a_prefixed_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig({"listener.name.ssl.ssl.keystore.locaton": "/k.p12"})
    assert str(info.value).endswith("did you mean 'listener.name.ssl.ssl.keystore.location'?")


@pytest.mark.parametrize(
    "key",
    ["process.roles", "node.id", "controller.quorum.voters", "controller.listener.names"],
)
def test_kraft_keys_are_refused_as_kraft(key: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig({key: "1"})
    message = str(info.value)
    assert message.startswith(f"unknown broker config {key!r}: it configures KRaft mode")
    assert "Sluice runs in ZooKeeper mode" in message


def test_shipped_server_properties_is_what_the_table_renders() -> None:
    shipped = (CONFIG_DIR / "server.properties").read_text(encoding="utf-8")
    assert shipped == render_server_properties(), (
        "config/server.properties is out of date with sluice.config.BROKER_CONFIGS: "
        "python -m sluice.server_properties > config/server.properties"
    )


def test_server_properties_lists_every_config_with_its_default() -> None:
    text = (CONFIG_DIR / "server.properties").read_text(encoding="utf-8")
    assert parse_properties(text) == ACTIVE
    listed = {}
    for line in text.splitlines():
        if line.startswith("#") and "=" in line and " " not in line.partition("=")[0]:
            key, _, value = line[1:].partition("=")
            listed[key] = value
    assert list(listed) == list(BROKER_CONFIGS)
    for key, value in listed.items():
        definition = BROKER_CONFIGS[key]
        if definition.default is None:
            assert value == ""
        else:
            assert definition.parse(value) == definition.default, key
    config = BrokerConfig.from_properties(CONFIG_DIR / "server.properties")
    assert config.ignored_keys == []
    for key, value in ACTIVE.items():
        assert config[key] == BROKER_CONFIGS[key].parse(value) == BROKER_CONFIGS[key].default


@pytest.mark.parametrize("n", [1, 2, 3])
def test_cluster_examples_parse(n: int) -> None:
    config = BrokerConfig.from_properties(CONFIG_DIR / f"cluster-broker-{n}.properties")
    assert config.broker_id == n
    assert config["zookeeper.connect"] == "127.0.0.1:2181"
    assert config["default.replication.factor"] == 3
    assert [e.port for e in config.listener_endpoints] == [9091 + n]
    assert config.log_dirs == [Path(f"/tmp/sluice-cluster/broker-{n}")]
