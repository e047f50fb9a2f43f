"""The config metadata DescribeConfigs reports (sluice.config_metadata), against the
flags Kafka 3.9 documents for each broker key Sluice has: its type and its update mode
(read-only, per-broker or cluster-wide)."""

from __future__ import annotations

import pytest

from sluice.config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig
from sluice.config_metadata import (
    DYNAMIC_BROKER_CONFIGS,
    ConfigType,
    broker_read_only,
    config_type,
    is_sensitive,
)
from sluice.server.apis.describe_configs import _entry, _synonyms

RO, PB, CW = "read-only", "per-broker", "cluster-wide"
B, S, N, SH, L, D, LI, P = "BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "PASSWORD"

# Kafka 3.9's broker configuration reference: (Type, Update Mode) of the keys Sluice has.
KAFKA_DOCUMENTED = {
    "broker.id": (N, RO), "listeners": (S, PB), "advertised.listeners": (S, PB),
    "log.dirs": (S, RO), "log.dir": (S, RO), "num.partitions": (N, RO),
    "default.replication.factor": (N, RO), "auto.create.topics.enable": (B, RO),
    "delete.topic.enable": (B, RO), "log.segment.bytes": (N, CW), "log.roll.ms": (L, CW),
    "log.roll.hours": (N, RO), "log.retention.ms": (L, CW), "log.retention.minutes": (N, RO),
    "log.retention.hours": (N, RO), "log.retention.bytes": (L, CW),
    "log.retention.check.interval.ms": (L, RO), "log.flush.interval.messages": (L, CW),
    "log.flush.interval.ms": (L, CW), "log.flush.offset.checkpoint.interval.ms": (N, RO),
    "log.index.interval.bytes": (N, CW), "log.index.size.max.bytes": (N, CW),
    "log.segment.delete.delay.ms": (L, CW), "log.preallocate": (B, CW),
    "log.cleanup.policy": (LI, CW), "log.message.timestamp.type": (S, CW),
    "log.cleaner.enable": (B, RO), "log.cleaner.delete.retention.ms": (L, CW),
    "log.cleaner.min.cleanable.ratio": (D, CW), "log.cleaner.min.compaction.lag.ms": (L, CW),
    "log.cleaner.backoff.ms": (L, CW), "compression.type": (S, CW),
    "message.max.bytes": (N, CW), "socket.request.max.bytes": (N, RO),
    "connections.max.idle.ms": (L, RO), "queued.max.request.bytes": (L, RO),
    "max.connections": (N, CW), "max.connections.per.ip": (N, CW),
    "max.connections.per.ip.overrides": (S, CW), "min.insync.replicas": (N, CW),
    "unclean.leader.election.enable": (B, CW), "replica.lag.time.max.ms": (L, RO),
    "replica.high.watermark.checkpoint.interval.ms": (L, RO), "num.replica.fetchers": (N, CW),
    "replica.fetch.wait.max.ms": (N, RO), "replica.fetch.min.bytes": (N, RO),
    "replica.fetch.max.bytes": (N, RO), "replica.fetch.response.max.bytes": (N, RO),
    "replica.socket.timeout.ms": (N, RO), "fetch.max.bytes": (N, RO),
    "max.incremental.fetch.session.cache.slots": (N, RO),
    "group.initial.rebalance.delay.ms": (N, RO), "group.min.session.timeout.ms": (N, RO),
    "group.max.session.timeout.ms": (N, RO), "group.max.size": (N, RO),
    "offsets.topic.num.partitions": (N, RO), "offsets.topic.replication.factor": (SH, RO),
    "offsets.retention.minutes": (N, RO), "offsets.retention.check.interval.ms": (L, RO),
    "offset.metadata.max.bytes": (N, RO), "producer.id.expiration.ms": (N, CW),
    "transaction.state.log.num.partitions": (N, RO),
    "transaction.state.log.replication.factor": (SH, RO),
    "transaction.state.log.min.isr": (N, RO), "transaction.max.timeout.ms": (N, RO),
    "transactional.id.expiration.ms": (N, RO), "controlled.shutdown.enable": (B, RO),
    "controlled.shutdown.max.retries": (N, RO), "controlled.shutdown.retry.backoff.ms": (L, RO),
    "zookeeper.connect": (S, RO), "zookeeper.session.timeout.ms": (N, RO),
    "zookeeper.connection.timeout.ms": (N, RO), "auto.leader.rebalance.enable": (B, RO),
    "leader.imbalance.check.interval.seconds": (L, RO),
    "leader.imbalance.per.broker.percentage": (N, RO), "request.timeout.ms": (N, RO),
    # security keys: their secrets are PASSWORD and per-broker
    "ssl.keystore.password": (P, PB), "ssl.key.password": (P, PB),
    "ssl.truststore.password": (P, PB), "ssl.keystore.location": (S, PB),
    "ssl.enabled.protocols": (LI, PB), "sasl.enabled.mechanisms": (LI, PB),
    "sasl.jaas.config": (P, PB), "listener.security.protocol.map": (S, PB),
    "inter.broker.listener.name": (S, RO), "security.inter.broker.protocol": (S, RO),
}  # fmt: skip

# Sluice's own broker keys (Kafka has none of these): read-only.
SLUICE_ONLY = {
    "cluster.id", "max.broker.partitions", "log.segment.recycle", "log.segment.prepare.next",
    "log.open.files.max", "log.flush.group.commit", "socket.loopback.congestion.control",
    "socket.request.read.timeout.ms", "replica.direct.io",
}  # fmt: skip

# Kafka 3.9's topic configuration reference: the types (no topic config is read-only).
KAFKA_TOPIC_TYPES = {
    "cleanup.policy": LI, "compression.type": S, "delete.retention.ms": L,
    "file.delete.delay.ms": L, "flush.messages": L, "flush.ms": L, "index.interval.bytes": N,
    "max.message.bytes": N, "message.timestamp.difference.max.ms": L,
    "message.timestamp.type": S, "min.cleanable.dirty.ratio": D, "min.compaction.lag.ms": L,
    "max.compaction.lag.ms": L, "min.insync.replicas": N, "preallocate": B,
    "retention.bytes": L, "retention.ms": L, "segment.bytes": N, "segment.index.bytes": N,
    "segment.ms": L, "unclean.leader.election.enable": B,
}  # fmt: skip


def test_every_broker_key_has_a_type_and_secrets_are_sensitive() -> None:
    """Keys beyond the two tables above (added with new features) still report a known
    type, and a secret among them is sensitive."""
    for name, definition in BROKER_CONFIGS.items():
        kind = config_type(name, definition.type)
        assert kind is not ConfigType.UNKNOWN, name
        if any(word in name for word in ("password", "jaas", "secret")):
            assert is_sensitive(kind), name


@pytest.mark.parametrize("name", sorted(KAFKA_DOCUMENTED))
def test_broker_key_flags_are_kafkas(name: str) -> None:
    kind, mode = KAFKA_DOCUMENTED[name]
    definition = BROKER_CONFIGS.get(name)
    reported = config_type(name, None if definition is None else definition.type)
    assert reported.name == kind
    assert is_sensitive(reported) is (kind == P)
    assert broker_read_only(name) is (mode == RO)
    assert DYNAMIC_BROKER_CONFIGS.get(name, RO) == mode


@pytest.mark.parametrize("name", sorted(SLUICE_ONLY))
def test_sluices_own_broker_keys_are_read_only(name: str) -> None:
    definition = BROKER_CONFIGS[name]
    assert broker_read_only(name)
    assert config_type(name, definition.type) is not ConfigType.UNKNOWN
    assert not is_sensitive(config_type(name, definition.type))
    assert definition.doc


def test_topic_key_types_are_kafkas_and_documented() -> None:
    for name, (synonym, definition) in TOPIC_CONFIGS.items():
        if name in KAFKA_TOPIC_TYPES:
            assert config_type(name, definition.type).name == KAFKA_TOPIC_TYPES[name], name
        doc = definition.doc or (BROKER_CONFIGS[synonym].doc if synonym else "")
        assert doc, f"{name} has no documentation"
    assert all(BROKER_CONFIGS[name].doc for name in BROKER_CONFIGS)


def test_listener_prefixed_keys_take_their_base_keys_type() -> None:
    assert config_type("listener.name.internal.ssl.keystore.password", None) is ConfigType.PASSWORD
    assert config_type("listener.name.sasl_ssl.plain.sasl.jaas.config", None) is ConfigType.PASSWORD
    assert config_type("listener.name.internal.ssl.enabled.protocols", None) is ConfigType.LIST
    # As Kafka, the update mode is looked up by the exact name.
    assert broker_read_only("listener.name.internal.ssl.keystore.password")


def test_a_sensitive_value_and_its_synonyms_are_null() -> None:
    entry = _entry("ssl.keystore.password", "secret", [], False, ConfigType.PASSWORD, "doc",
                   True, True)  # fmt: skip
    assert (entry["value"], entry["is_sensitive"], entry["config_type"]) == (
        None, True, ConfigType.PASSWORD,
    )  # fmt: skip
    config = BrokerConfig({"log.segment.bytes": "2048"})
    hidden = _synonyms(config, "log.segment.bytes", sensitive=True)
    assert [(s["name"], s["value"]) for s in hidden] == [
        ("log.segment.bytes", None), ("log.segment.bytes", None),
    ]  # fmt: skip
    shown = _synonyms(config, "log.segment.bytes")
    assert [s["value"] for s in shown] == ["2048", str(1 << 30)]
