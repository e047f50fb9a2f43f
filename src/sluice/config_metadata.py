"""What DescribeConfigs reports of a config besides its value, as Kafka 3.9 reports it.

- ``config_type``: Kafka's ``ConfigDef.Type`` of the key (``DescribeConfigsResponse``'s
  ``ConfigType``). Where Kafka's type differs from how Sluice parses the value (Kafka
  keeps ``listeners`` a STRING, the internal topics' replication factors a SHORT) or the
  key is a secret, :data:`KAFKA_TYPES` names it; otherwise it follows the key's
  :class:`~sluice.config.ConfigDef` type. A key under a listener prefix
  (``listener.name.<listener>.<key>``) has its base key's type.
- ``is_sensitive``: the PASSWORD keys; their value and their synonyms' values are
  reported as null, as Kafka does.
- which broker keys Kafka changes while the broker runs
  (``DynamicBrokerConfig.AllDynamicConfigs``: :data:`DYNAMIC_BROKER_CONFIGS`, with
  Kafka's update mode, per-broker or cluster-wide; :func:`broker_read_only`). Sluice
  changes a subset of them (:mod:`sluice.server.dynamic_broker_config`), and
  DescribeConfigs reports ``read_only`` by that subset.
"""

from __future__ import annotations

import enum
import re
from typing import Final

__all__ = [
    "DYNAMIC_BROKER_CONFIGS",
    "KAFKA_TYPES",
    "ConfigType",
    "broker_read_only",
    "config_type",
    "is_sensitive",
]


class ConfigType(enum.IntEnum):
    """DescribeConfigsResponse.ConfigType, by Kafka's ``ConfigDef.Type``."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


_BY_DEFINITION: Final = {
    "bool": ConfigType.BOOLEAN,
    "string": ConfigType.STRING,
    "int": ConfigType.INT,
    "short": ConfigType.SHORT,
    "long": ConfigType.LONG,
    "double": ConfigType.DOUBLE,
    "list": ConfigType.LIST,
    "throttled_replicas": ConfigType.LIST,
    "class": ConfigType.CLASS,
    "password": ConfigType.PASSWORD,
}

_S, _I, _SH, _L, _LI, _C, _P = (
    ConfigType.STRING, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG, ConfigType.LIST,
    ConfigType.CLASS, ConfigType.PASSWORD,
)  # fmt: skip

KAFKA_TYPES: Final[dict[str, ConfigType]] = {
    # Kafka's type where it is not how Sluice parses the value
    "listeners": _S,
    "advertised.listeners": _S,
    "offsets.topic.replication.factor": _SH,
    "transaction.state.log.replication.factor": _SH,
    # listeners and security (KafkaConfig, BrokerSecurityConfigs, SslConfigs, SaslConfigs)
    "listener.security.protocol.map": _S,
    "inter.broker.listener.name": _S,
    "security.inter.broker.protocol": _S,
    "control.plane.listener.name": _S,
    "principal.builder.class": _C,
    "authorizer.class.name": _S,
    "connection.failed.authentication.delay.ms": _I,
    "connections.max.reauth.ms": _L,
    "ssl.protocol": _S,
    "ssl.provider": _S,
    "ssl.enabled.protocols": _LI,
    "ssl.cipher.suites": _LI,
    "ssl.client.auth": _S,
    "ssl.endpoint.identification.algorithm": _S,
    "ssl.keystore.type": _S,
    "ssl.keystore.location": _S,
    "ssl.keystore.password": _P,
    "ssl.key.password": _P,
    "ssl.keystore.key": _P,
    "ssl.keystore.certificate.chain": _P,
    "ssl.truststore.type": _S,
    "ssl.truststore.location": _S,
    "ssl.truststore.password": _P,
    "ssl.truststore.certificates": _P,
    "ssl.keymanager.algorithm": _S,
    "ssl.trustmanager.algorithm": _S,
    "ssl.secure.random.implementation": _S,
    "ssl.engine.factory.class": _C,
    "ssl.principal.mapping.rules": _S,
    "sasl.enabled.mechanisms": _LI,
    "sasl.mechanism.inter.broker.protocol": _S,
    "sasl.jaas.config": _P,
    "sasl.server.callback.handler.class": _C,
    "sasl.login.class": _C,
    "sasl.login.callback.handler.class": _C,
    "sasl.kerberos.service.name": _S,
    "sasl.kerberos.principal.to.local.rules": _LI,
    "delegation.token.secret.key": _P,
    "delegation.token.master.key": _P,
    "password.encoder.secret": _P,
    "password.encoder.old.secret": _P,
    # quotas
    "quota.window.num": _I,
    "quota.window.size.seconds": _I,
    "client.quota.callback.class": _C,
    "max.connection.creation.rate": _I,
}
"""Kafka's type of the keys whose type is not Sluice's parse type, and of the listener,
security and quota keys (their secrets PASSWORD)."""

_PER_BROKER = "per-broker"
_CLUSTER_WIDE = "cluster-wide"

# DynamicListenerConfig, DynamicSecurityConfigs (SslConfigs.RECONFIGURABLE_CONFIGS)
_LISTENER_AND_SECURITY = (
    "listeners", "advertised.listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites",
    "ssl.enabled.protocols", "ssl.keystore.type", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.key.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm",
    "ssl.secure.random.implementation", "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
)  # fmt: skip
# DynamicLogConfig: the broker synonyms of the topic configs (TOPIC_CONFIG_SYNONYMS)
_LOG = (
    "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes",
    "log.retention.ms", "message.max.bytes", "log.index.interval.bytes",
    "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleanup.policy", "unclean.leader.election.enable",
    "min.insync.replicas", "compression.type", "compression.gzip.level",
    "compression.lz4.level", "compression.zstd.level", "log.preallocate",
    "log.message.timestamp.type", "log.message.timestamp.difference.max.ms",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
    "log.message.downconversion.enable", "log.local.retention.ms", "log.local.retention.bytes",
)  # fmt: skip
# LogCleaner, DynamicThreadPool, SocketServer, DynamicProducerStateManagerConfig, metrics
_OTHER = (
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads", "num.network.threads", "max.connections",
    "max.connection.creation.rate", "max.connections.per.ip",
    "max.connections.per.ip.overrides", "producer.id.expiration.ms",
    "transaction.partition.verification.enable", "metric.reporters",
    # DynamicConfig.Broker: the replication throttles (KIP-73, KIP-113)
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)  # fmt: skip
# ClusterLevelListenerConfigs: listener configs Kafka changes for the whole cluster
_CLUSTER_LEVEL_LISTENER = ("max.connections", "max.connection.creation.rate",
                           "num.network.threads")  # fmt: skip

DYNAMIC_BROKER_CONFIGS: Final[dict[str, str]] = {
    **{name: _CLUSTER_WIDE for name in _LOG + _OTHER},
    **{
        name: _CLUSTER_WIDE if name in _CLUSTER_LEVEL_LISTENER else _PER_BROKER
        for name in _LISTENER_AND_SECURITY
    },
}
"""The broker configs Kafka changes while it runs, with their update mode (Kafka's
``DynamicBrokerConfig.AllDynamicConfigs`` and ``dynamicConfigUpdateModes``)."""

_LISTENER_PREFIX: Final = re.compile(r"listener\.name\.[^.]*\.(.*)")
# Listener configs given per mechanism: listener.name.<listener>.<mechanism>.<key>
_MECHANISM_CONFIGS: Final = ("sasl.jaas.config", "sasl.login.callback.handler.class",
                             "sasl.login.class", "sasl.server.callback.handler.class",
                             "connections.max.reauth.ms")  # fmt: skip


def _base_name(name: str) -> str:
    """The key a listener-prefixed key stands for (itself if it has no prefix)."""
    match = _LISTENER_PREFIX.fullmatch(name)
    if match is None:
        return name
    base = match.group(1)
    return next((m for m in _MECHANISM_CONFIGS if base.endswith(m)), base)


def config_type(name: str, definition_type: str | None) -> ConfigType:
    """Kafka's type of key ``name``, which Sluice parses as ``definition_type`` (a
    :class:`~sluice.config.ConfigDef` type; None if Sluice has no such key)."""
    base = _base_name(name)
    known = KAFKA_TYPES.get(base)
    if known is not None:
        return known
    if definition_type is None:
        return ConfigType.UNKNOWN
    return _BY_DEFINITION.get(definition_type, ConfigType.UNKNOWN)


def is_sensitive(kind: ConfigType) -> bool:
    """Kafka's ``maybeSensitive``: a PASSWORD, or a key whose type is unknown."""
    return kind in (ConfigType.PASSWORD, ConfigType.UNKNOWN)


def broker_read_only(name: str) -> bool:
    """Whether DescribeConfigs reports broker config ``name`` read-only, as Kafka does:
    unless Kafka can change it while the broker runs."""
    return name not in DYNAMIC_BROKER_CONFIGS
