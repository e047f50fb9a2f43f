"""``DynamicBrokerConfig`` on its own (sluice.server.dynamic_broker_config): Kafka's
precedence of the two dynamic layers over the static config, the refusals, what a start
keeps of stored layers, the reconfigurables told what changed; and ``ConnectionQuotas``
taking new limits."""

from __future__ import annotations

import logging

import pytest

from sluice.config import BrokerConfig, ConfigError
from sluice.server.connection_quotas import ConnectionQuotas
from sluice.server.dynamic_broker_config import (
    DYNAMIC_CONFIGS,
    DynamicBrokerConfig,
    broker_entity_path,
)


def dynamic(**static: object) -> DynamicBrokerConfig:
    values = {
        "log.dirs": "/tmp/sluice-unused",
        **{k.replace("_", "."): v for k, v in static.items()},
    }
    return DynamicBrokerConfig(BrokerConfig(values))


def test_per_broker_over_default_over_static_over_default_value() -> None:
    layers = dynamic(log_retention_hours="1")
    config = layers.config
    assert config.retention_ms == 3_600_000
    layers.update({"log.retention.ms": "60000"}, per_broker=False)
    assert config.retention_ms == 60_000  # a dynamic ms beats a static hours
    layers.update({"log.retention.ms": "1000"}, per_broker=True)
    assert config["log.retention.ms"] == 1000
    layers.update({}, per_broker=True)
    assert config["log.retention.ms"] == 60_000
    layers.update({}, per_broker=False)
    assert config.retention_ms == 3_600_000
    assert config.is_set("log.retention.hours") and not config.is_set("log.retention.ms")


def test_refusals() -> None:
    layers = dynamic()
    with pytest.raises(ConfigError, match=r"Cannot update these configs dynamically: "
                                          r"Set\(broker.id, log.dirs\)"):  # fmt: skip
        layers.validate({"log.dirs": "/x", "broker.id": "2", "log.retention.ms": "1"}, True)
    with pytest.raises(ConfigError, match="listeners"):  # Kafka changes it; Sluice does not
        layers.validate({"listeners": "PLAINTEXT://127.0.0.1:1"}, True)
    with pytest.raises(ConfigError, match=r"log\.segment\.bytes"):
        layers.validate({"log.segment.bytes": "ten"}, False)
    with pytest.raises(ConfigError, match="overrides"):
        layers.validate({"max.connections.per.ip": "0"}, True)
    layers.validate({"max.connections.per.ip": "0",
                     "max.connections.per.ip.overrides": "127.0.0.1:5"}, True)  # fmt: skip
    layers.update({"max.connections.per.ip.overrides": "127.0.0.1:5"}, per_broker=False)
    layers.validate({"max.connections.per.ip": "0"}, True)  # the default's overrides count


def test_a_start_drops_stored_keys_it_cannot_take(caplog: pytest.LogCaptureFixture) -> None:
    layers = dynamic()
    with caplog.at_level(logging.WARNING):
        layers.load({"log.dirs": "/x", "log.retention.bytes": "10"},
                    {"message.max.bytes": "many", "log.cleaner.backoff.ms": "50"})  # fmt: skip
    assert layers.per_broker == {"log.retention.bytes": "10"}
    assert layers.cluster_default == {"log.cleaner.backoff.ms": "50"}
    assert layers.config["log.cleaner.backoff.ms"] == 50
    assert "log.dirs" in caplog.text and "message.max.bytes" in caplog.text


def test_reconfigurables_hear_the_keys_whose_value_changed() -> None:
    layers = dynamic(max_connections="100")
    heard: list[frozenset[str]] = []
    layers.add_reconfigurable(heard.append)
    layers.update({"max.connections": "100", "log.retention.bytes": "5"}, per_broker=True)
    assert heard == [frozenset({"log.retention.bytes"})]  # 100 is already the value
    layers.update({"max.connections": "100", "log.retention.bytes": "5"}, per_broker=False)
    assert heard == [frozenset({"log.retention.bytes"})]  # hidden by the per-broker layer
    layers.update({}, per_broker=True)  # the default has the same values: no change
    assert heard == [frozenset({"log.retention.bytes"})]
    layers.update({}, per_broker=False)
    assert heard[1:] == [frozenset({"log.retention.bytes"})]


def test_the_keys_and_paths() -> None:
    assert {"log.retention.ms", "max.connections", "log.cleaner.backoff.ms"} <= DYNAMIC_CONFIGS
    assert not {"listeners", "unclean.leader.election.enable", "broker.id"} & DYNAMIC_CONFIGS
    assert broker_entity_path(3) == "brokers/3"
    assert broker_entity_path(None) == "brokers/<default>"


def test_connection_quotas_take_new_limits_and_keep_counts() -> None:
    quotas = ConnectionQuotas(max_connections=1, max_per_ip=5)
    woken: list[bool] = []
    quotas.on_slot_free(lambda: woken.append(True))
    key = quotas.try_add("10.0.0.1")
    assert key is not None and quotas.full
    quotas.reconfigure(ConnectionQuotas(max_connections=2, max_per_ip=1))
    assert not quotas.full and woken == [True] and quotas.total == 1
    assert quotas.try_add("10.0.0.1") is None  # the lowered per-address limit
    quotas.reconfigure(ConnectionQuotas(max_connections=2, max_per_ip=1, overrides={"10.0.0.1": 3}))
    assert quotas.try_add("10.0.0.1") is not None
