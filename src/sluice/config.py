"""Broker and topic configuration with Kafka's own property names.

``BrokerConfig.from_properties`` reads ``server.properties``-style text plus
``--override key=value`` pairs; unknown keys are rejected and bad values name
their key. Topic-level configs (``retention.ms``, ``cleanup.policy``, ...) take
their defaults from the broker's ``log.*`` synonyms, as in Kafka.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from sluice.config_compat import IGNORED_BROKER_CONFIGS, is_kraft_only, suggest
from sluice.controller.model import EndPoint
from sluice.security.ssl_engine_factory import SSL_SERVER_CONFIGS

__all__ = [
    "BROKER_CONFIGS",
    "CONSOLE_LISTENER",
    "LISTENER_CONFIG_PREFIXES",
    "LISTENER_PREFIX",
    "SECURITY_PROTOCOLS",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigError",
    "format_config_value",
    "parse_bool",
    "parse_connection_overrides",
    "parse_listener",
    "parse_properties",
    "parse_security_protocol_map",
    "parse_throttled_replicas",
    "topic_config_defaults",
]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A configuration key is unknown or its value is invalid; the message names the key."""


def parse_bool(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    raise ConfigError(f"invalid value {raw!r} for {key}: expected true or false")


def _parse_int(key: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigError(f"invalid value {raw!r} for {key}: expected an integer") from None


def _parse_float(key: str, raw: str) -> float:
    try:
        return float(raw.strip())
    except ValueError:
        raise ConfigError(f"invalid value {raw!r} for {key}: expected a number") from None


def _parse_list(key: str, raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


_THROTTLED_REPLICA = re.compile(r"[0-9]+:[0-9]+")


def parse_throttled_replicas(key: str, raw: str) -> list[str]:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker,...``."""
    items = _parse_list(key, raw)
    if items == ["*"] or all(_THROTTLED_REPLICA.fullmatch(item) for item in items):
        return items
    raise ConfigError(
        f"{key} must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


_PARSERS: dict[str, Callable[[str, str], Any]] = {
    "bool": parse_bool,
    "int": _parse_int,
    "long": _parse_int,
    "double": _parse_float,
    "string": lambda key, raw: raw.strip(),
    "throttled_replicas": parse_throttled_replicas,
    "password": lambda key, raw: raw.strip(),  # a string never shown (DescribeConfigs)
    "list": _parse_list,
}


@dataclasses.dataclass(frozen=True)
class ConfigDef:
    """One property: its Kafka name, type, default, allowed range or values, and meaning."""

    name: str
    type: str
    default: Any
    doc: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None

    def parse(self, raw: str | Any) -> Any:
        value = _PARSERS[self.type](self.name, raw) if isinstance(raw, str) else raw
        return self.validate(value)

    def validate(self, value: Any) -> Any:
        if value is None:
            return None
        if self.min is not None and value < self.min:
            raise ConfigError(f"invalid value {value} for {self.name}: must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise ConfigError(f"invalid value {value} for {self.name}: must be at most {self.max}")
        if self.choices is not None:
            items = value if isinstance(value, list) else [value]
            for item in items:
                if item not in self.choices:
                    allowed = ", ".join(self.choices)
                    raise ConfigError(f"invalid value {item!r} for {self.name}: one of {allowed}")
        return value


def _defs(*defs: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in defs}


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
"""Kafka's security protocols, by their wire ids (UpdateMetadata's security_protocol)."""
CONSOLE_LISTENER = "CONSOLE"
"""The name under which ``listener.name.console.ssl.*`` set the web console's TLS (when no
broker listener has that name)."""

LISTENER_PREFIX = "listener.name."
"""``listener.name.<listener>.<config>`` sets a config for one listener (Kafka's prefix)."""
LISTENER_CONFIG_PREFIXES: tuple[str, ...] = ("ssl.", "sasl.")
SASL_MECHANISM_NAMES = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
SASL_MECHANISM_CONFIGS = (
    "sasl.jaas.config",
    "sasl.server.callback.handler.class",
    "connections.max.reauth.ms",
)
"""The configs a ``listener.name.<listener>.<mechanism>.`` prefix may set, as in Kafka."""
"""The configs a ``listener.name.<listener>.`` prefix may set (as Kafka allows)."""

_TS_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP = ("delete", "compact")
_COMPRESSION = ("uncompressed", "producer", "gzip", "snappy", "lz4", "zstd")


def _ssl_defs() -> list[ConfigDef]:
    """The ``ssl.*`` broker configs (sluice.security.ssl_engine_factory): for the SSL
    listeners (each may override them with ``listener.name.<listener>.``) and for the
    broker's own connections to other brokers on an SSL inter-broker listener."""
    return [ConfigDef(s.name, s.type, s.default, s.doc) for s in SSL_SERVER_CONFIGS]


BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("broker.id", "int", 0, "This broker's id.", min=0),
    ConfigDef("cluster.id", "string", None, "Cluster id; generated and stored in log.dirs."),
    ConfigDef(
        "listeners",
        "list",
        ["PLAINTEXT://127.0.0.1:9092"],
        "Listeners to serve, NAME://host:port each (an empty host: every interface); a "
        "name is a security protocol or a name given one in listener.security.protocol.map.",
    ),
    ConfigDef(
        "advertised.listeners",
        "list",
        None,
        "The addresses clients are told to use, per listener name (a subset of listeners' "
        "names); unset: listeners.",
    ),
    ConfigDef(
        "listener.security.protocol.map",
        "list",
        ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
        "Listener names and their security protocols, NAME:PROTOCOL each.",
    ),
    ConfigDef(
        "inter.broker.listener.name",
        "string",
        None,
        "The listener brokers use to reach each other (replica fetches, controller "
        "requests); unset: the one named by security.inter.broker.protocol.",
    ),
    ConfigDef(
        "security.inter.broker.protocol",
        "string",
        "PLAINTEXT",
        "The security protocol between brokers, when inter.broker.listener.name is unset "
        "(the listener of that name is used); not both.",
        choices=SECURITY_PROTOCOLS,
    ),
    ConfigDef(
        "log.dirs",
        "string",
        "./sluice-data",
        "Comma-separated directories holding the partition logs; the first also holds the "
        "broker's own files.",
    ),
    ConfigDef("log.dir", "string", None, "Synonym of log.dirs (used when log.dirs is unset)."),
    ConfigDef("num.partitions", "int", 1, "Partitions of auto-created topics.", min=1),
    ConfigDef(
        "max.broker.partitions",
        "int",
        100_000,
        "Sluice (the name KIP-578 proposed; Kafka has no such limit): the most partitions "
        "a single node hosts; a CreateTopics or CreatePartitions request that would take "
        "it past this is refused with POLICY_VIOLATION before anything is created.",
        min=1,
    ),
    ConfigDef("default.replication.factor", "int", 1, "Replication of auto-created topics.", min=1),
    ConfigDef("auto.create.topics.enable", "bool", True, "Create topics on first use."),
    ConfigDef("delete.topic.enable", "bool", True, "Allow DeleteTopics."),
    ConfigDef(
        "console.port",
        "int",
        -1,
        "Sluice: the port of the broker's web console (docs/console.md); -1: no console, "
        "0: a free port.",
        min=-1,
        max=65535,
    ),
    ConfigDef(
        "console.host",
        "string",
        "127.0.0.1",
        "Sluice: the address the web console binds; empty: every interface.",
    ),
    ConfigDef(
        "console.listener.name",
        "string",
        "",
        "Sluice: the listener the web console's Kafka clients connect to, whose security "
        "and ACLs apply to it; empty: the first SASL listener, else the first PLAINTEXT "
        "or SSL one.",
    ),
    ConfigDef(
        "console.ssl.enabled",
        "bool",
        False,
        "Sluice: serve the web console over HTTPS, with the broker's ssl.* server settings "
        "as overridden by listener.name.console.ssl.* (its keystore, protocols, cipher "
        "suites, ssl.client.auth).",
    ),
    ConfigDef("log.segment.bytes", "int", 1 << 30, "Segment size before a roll.", min=14),
    ConfigDef("log.roll.ms", "long", None, "Segment age before a roll (ms)."),
    ConfigDef("log.roll.hours", "int", 168, "Segment age before a roll (hours).", min=1),
    ConfigDef("log.retention.ms", "long", None, "Keep segments this long; -1: forever."),
    ConfigDef("log.retention.minutes", "int", None, "Retention in minutes."),
    ConfigDef("log.retention.hours", "int", 168, "Retention in hours."),
    ConfigDef("log.retention.bytes", "long", -1, "Per-partition size limit; -1: none."),
    ConfigDef("log.retention.check.interval.ms", "long", 300_000, "Retention check period.", min=1),
    ConfigDef("log.flush.interval.messages", "long", LONG_MAX, "fsync after N records.", min=1),
    ConfigDef("log.flush.interval.ms", "long", None, "fsync after this many ms.", min=0),
    ConfigDef(
        "log.flush.offset.checkpoint.interval.ms",
        "int",
        60_000,
        "How often the recovery points (offsets below which the logs are flushed, where "
        "recovery after a crash starts) are written to recovery-point-offset-checkpoint.",
        min=1,
    ),
    ConfigDef("log.index.interval.bytes", "int", 4096, "Bytes between index entries.", min=0),
    ConfigDef("log.index.size.max.bytes", "int", 10 * 1024 * 1024, "Index size.", min=4),
    ConfigDef(
        "log.segment.delete.delay.ms",
        "long",
        60_000,
        "Wait before removing a deleted segment's files.",
        min=0,
    ),
    ConfigDef(
        "log.segment.recycle",
        "bool",
        True,
        "Sluice: a new segment reuses the data file of a segment retention removed (once "
        "file.delete.delay.ms has passed, if the page cache still holds it), so appends "
        "overwrite cached pages instead of taking new ones; costs up to one segment of disk "
        "per partition.",
    ),
    ConfigDef(
        "log.segment.prepare.next",
        "bool",
        True,
        "Sluice: once the active segment is half full, the next segment's files are "
        "created on the broker's file thread, so that a roll creates no file on the event "
        "loop.",
    ),
    ConfigDef(
        "log.open.files.max",
        "int",
        -1,
        "Sluice: the most segment file descriptors (data files and indexes) the broker "
        "keeps open; each file is opened when first used and the least recently used are "
        "closed beyond this, to open again when next needed. -1: three quarters of the "
        "open-file limit (RLIMIT_NOFILE, whose soft value the broker raises to the hard "
        "one at start). Kafka has no such bound: it keeps every segment's files open.",
        min=-1,
    ),
    ConfigDef(
        "log.preallocate",
        "bool",
        False,
        "Allocate a new segment's whole file (log.segment.bytes) when it is created; its "
        "unused end is cut when it rolls or the log closes.",
    ),
    ConfigDef(
        "log.flush.group.commit",
        "bool",
        True,
        "Sluice: the fsyncs that flush.messages asks of a leader's appends run on a flush "
        "thread, off the event loop, in rounds: one round syncs every log due since the "
        "last, and each produce answer waits for the round that covers its append (so, "
        "as in Kafka, what is acknowledged is flushed). Off: the append fsyncs on the event "
        "loop, as Kafka's does on its handler thread.",
    ),
    ConfigDef("log.cleanup.policy", "list", ["delete"], "delete, compact.", choices=_CLEANUP),
    ConfigDef(
        "log.message.timestamp.type", "string", "CreateTime", "Timestamp kind.", choices=_TS_TYPES
    ),
    ConfigDef(
        "log.message.timestamp.difference.max.ms",
        "long",
        LONG_MAX,
        "Deprecated in Kafka for the two below: stands for each of them left unset.",
        min=0,
    ),
    ConfigDef(
        "log.message.timestamp.before.max.ms",
        "long",
        LONG_MAX,
        "How far (ms) before the broker's clock a CreateTime record's timestamp may lie; "
        "a produce beyond it is refused with INVALID_TIMESTAMP (the batch header's first "
        "and largest timestamps are checked).",
        min=0,
    ),
    ConfigDef(
        "log.message.timestamp.after.max.ms",
        "long",
        LONG_MAX,
        "How far (ms) after the broker's clock a CreateTime record's timestamp may lie.",
        min=0,
    ),
    ConfigDef("log.cleaner.enable", "bool", True, "Run the log cleaner for compacted topics."),
    ConfigDef("log.cleaner.delete.retention.ms", "long", 86_400_000, "Tombstone retention."),
    ConfigDef("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty ratio.", min=0, max=1),
    ConfigDef("log.cleaner.min.compaction.lag.ms", "long", 0, "Minimum age to compact.", min=0),
    ConfigDef("log.cleaner.backoff.ms", "long", 15_000, "Cleaner idle sleep.", min=0),
    ConfigDef("compression.type", "string", "producer", "Topic compression.", choices=_COMPRESSION),
    ConfigDef("message.max.bytes", "int", 1_048_588, "Largest record batch.", min=0),
    ConfigDef("socket.request.max.bytes", "int", 104_857_600, "Largest request.", min=1),
    ConfigDef(
        "socket.send.buffer.bytes",
        "int",
        -1,
        "SO_SNDBUF of the connections the listeners accept; -1: the system's, which TCP "
        "autotuning grows as needed (Sluice's default; Kafka's 102400 fixes the size and "
        "so turns the autotuning off).",
        min=-1,
    ),
    ConfigDef(
        "socket.receive.buffer.bytes",
        "int",
        -1,
        "SO_RCVBUF of the connections the listeners accept, set on the listening socket "
        "so that the TCP window scale fits it; -1: the system's, with autotuning (Sluice's "
        "default; Kafka's 102400).",
        min=-1,
    ),
    ConfigDef(
        "socket.loopback.congestion.control",
        "string",
        "reno",
        "Sluice: the TCP congestion control set on connections with a loopback peer that "
        "carry data (accepted by the listeners, opened by replica fetchers); empty keeps "
        "the system's.",
    ),
    ConfigDef("connections.max.idle.ms", "long", 600_000, "Close idle connections after."),
    ConfigDef(
        "metrics.port",
        "int",
        -1,
        "Sluice: the port of the broker's Prometheus endpoint (GET /metrics, Kafka's JMX "
        "metrics by the names the Prometheus JMX exporter gives them; docs/metrics.md), on "
        "metrics.host; -1: no endpoint; 0: any free port (logged at start).",
        min=-1,
        max=65535,
    ),
    ConfigDef(
        "metrics.host",
        "string",
        None,
        "Sluice: the address the metrics endpoint binds (0.0.0.0: every interface); unset: "
        "the host of the first entry of listeners.",
    ),
    ConfigDef(
        "socket.request.read.timeout.ms",
        "long",
        30_000,
        "Sluice: close a connection whose request has been arriving for longer than this "
        "(a size prefix sent and the rest not, or trickled); 0 or less: never.",
    ),
    ConfigDef(
        "queued.max.request.bytes",
        "long",
        -1,
        "Bytes of requests received and not yet answered, over all connections, beyond "
        "which no connection is read until some are answered; -1: no bound.",
    ),
    ConfigDef("max.connections", "int", INT_MAX, "Connections held at once.", min=0),
    ConfigDef("max.connections.per.ip", "int", INT_MAX, "Connections from one address.", min=0),
    ConfigDef(
        "max.connections.per.ip.overrides",
        "string",
        "",
        "Per-address limits, host:count,host:count (host names resolved at start).",
    ),
    ConfigDef(
        "quota.window.num",
        "int",
        11,
        "Samples a client quota's rate is measured over (producer_byte_rate, "
        "consumer_byte_rate, request_percentage).",
        min=1,
    ),
    ConfigDef("quota.window.size.seconds", "int", 1, "Length of each client quota sample.", min=1),
    ConfigDef(
        "controller.quota.window.num",
        "int",
        11,
        "Samples of the controller mutation quota (its token bucket holds this many "
        "windows of controller_mutation_rate).",
        min=1,
    ),
    ConfigDef(
        "controller.quota.window.size.seconds",
        "int",
        1,
        "Length of each controller mutation quota sample.",
        min=1,
    ),
    ConfigDef("min.insync.replicas", "int", 1, "Replicas an acks=all write needs.", min=1),
    ConfigDef("unclean.leader.election.enable", "bool", False, "Elect out-of-ISR leaders."),
    ConfigDef("replica.lag.time.max.ms", "long", 30_000, "Follower lag before ISR removal."),
    ConfigDef(
        "replica.high.watermark.checkpoint.interval.ms",
        "long",
        5000,
        "How often high watermarks are written to replication-offset-checkpoint.",
        min=1,
    ),
    ConfigDef("num.replica.fetchers", "int", 1, "Fetchers (connections) per leader.", min=1),
    ConfigDef(
        "leader.replication.throttled.rate",
        "long",
        LONG_MAX,
        "Bytes/s this broker, as leader, sends to followers of the replicas named in "
        "topics' leader.replication.throttled.replicas while they are out of the ISR.",
        min=0,
    ),
    ConfigDef(
        "follower.replication.throttled.rate",
        "long",
        LONG_MAX,
        "Bytes/s this broker, as follower, fetches for its replicas named in topics' "
        "follower.replication.throttled.replicas while they are out of the ISR.",
        min=0,
    ),
    ConfigDef(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "long",
        LONG_MAX,
        "Bytes/s copied into future logs when replicas move between log directories.",
        min=0,
    ),
    ConfigDef(
        "replication.quota.window.num",
        "int",
        11,
        "Samples the replication throttles' byte rates are measured over.",
        min=1,
    ),
    ConfigDef(
        "replication.quota.window.size.seconds",
        "int",
        1,
        "Length of each sample of the replication throttles' byte rates.",
        min=1,
    ),
    ConfigDef("replica.fetch.wait.max.ms", "int", 500, "Follower fetch max wait.", min=0),
    ConfigDef("replica.fetch.min.bytes", "int", 1, "Follower fetch min bytes.", min=1),
    ConfigDef(
        "replica.fetch.max.bytes",
        "int",
        8_388_608,
        "Follower fetch max bytes per partition (Sluice's default 8 MiB, Kafka's 1 MiB: a "
        "follower round trip per ~1 MB batch bounded acks=all throughput).",
        min=0,
    ),
    ConfigDef(
        "replica.fetch.response.max.bytes",
        "int",
        10_485_760,
        "Follower fetch max bytes per answer (soft: the first batch always comes).",
        min=0,
    ),
    ConfigDef(
        "replica.direct.io",
        "bool",
        True,
        "Sluice: a follower writes the whole 4 KiB blocks of replicated batches with O_DIRECT, "
        "past the page cache, which keeps the leaders' data; falls back to the page cache "
        "where the filesystem refuses O_DIRECT.",
    ),
    ConfigDef("replica.socket.timeout.ms", "int", 30_000, "Follower request timeout."),
    ConfigDef("fetch.max.bytes", "int", 57_671_680, "Largest fetch response.", min=1024),
    ConfigDef("max.incremental.fetch.session.cache.slots", "int", 1000, "Fetch sessions.", min=0),
    ConfigDef("group.initial.rebalance.delay.ms", "int", 3000, "First rebalance delay.", min=0),
    ConfigDef("group.min.session.timeout.ms", "int", 6000, "Minimum session timeout."),
    ConfigDef("group.max.session.timeout.ms", "int", 1_800_000, "Maximum session timeout."),
    ConfigDef("group.max.size", "int", INT_MAX, "Members per group.", min=1),
    ConfigDef("offsets.topic.num.partitions", "int", 50, "__consumer_offsets partitions.", min=1),
    ConfigDef("offsets.topic.replication.factor", "int", 3, "__consumer_offsets replicas.", min=1),
    ConfigDef("offsets.retention.minutes", "int", 10_080, "Committed offset retention.", min=1),
    ConfigDef("offsets.retention.check.interval.ms", "long", 600_000, "Offset expiry check."),
    ConfigDef("offset.metadata.max.bytes", "int", 4096, "Commit metadata size."),
    ConfigDef("producer.id.expiration.ms", "int", 86_400_000, "Idle producer id expiry."),
    ConfigDef("transaction.state.log.num.partitions", "int", 50, "__transaction_state parts."),
    ConfigDef("transaction.state.log.replication.factor", "int", 3, "Its replication.", min=1),
    ConfigDef("transaction.state.log.min.isr", "int", 2, "Its min ISR.", min=1),
    ConfigDef("transaction.max.timeout.ms", "int", 900_000, "Longest transaction.", min=1),
    ConfigDef("transactional.id.expiration.ms", "int", 604_800_000, "Idle txn id expiry."),
    ConfigDef("controlled.shutdown.enable", "bool", True, "Move leaders away on shutdown."),
    ConfigDef("controlled.shutdown.max.retries", "int", 3, "ControlledShutdown retries."),
    ConfigDef("controlled.shutdown.retry.backoff.ms", "long", 5000, "Backoff between them."),
    ConfigDef("zookeeper.connect", "string", None, "ZooKeeper for a cluster; none: one node."),
    ConfigDef("zookeeper.session.timeout.ms", "int", 18_000, "ZooKeeper session timeout."),
    ConfigDef("zookeeper.connection.timeout.ms", "int", None, "ZooKeeper connect timeout."),
    ConfigDef("auto.leader.rebalance.enable", "bool", True, "Restore preferred leaders."),
    ConfigDef("leader.imbalance.check.interval.seconds", "long", 300, "Rebalance check."),
    ConfigDef("leader.imbalance.per.broker.percentage", "int", 10, "Allowed imbalance."),
    ConfigDef("request.timeout.ms", "int", 30_000, "Inter-broker request timeout."),
    ConfigDef(
        "authorizer.class.name",
        "string",
        "",
        "The authorizer: kafka.security.authorizer.AclAuthorizer or "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer (both are Sluice's ACL "
        "authorizer, with Kafka's semantics); empty: no authorization.",
    ),
    ConfigDef(
        "super.users",
        "string",
        "",
        "Principals allowed everything whatever the ACLs, semicolon-separated "
        "(User:admin;User:broker).",
    ),
    ConfigDef(
        "allow.everyone.if.no.acl.found",
        "bool",
        False,
        "Allow an operation on a resource that no ACL applies to at all.",
    ),
    # -- SASL (sluice.security.sasl; docs/security.md) --------------------------------
    ConfigDef(
        "sasl.enabled.mechanisms",
        "list",
        ["GSSAPI"],
        "The SASL mechanisms a SASL listener serves: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
        "OAUTHBEARER (Kafka's default GSSAPI is not supported: a SASL listener must set "
        "this). Per listener: listener.name.<listener>.sasl.enabled.mechanisms.",
    ),
    ConfigDef(
        "sasl.mechanism.inter.broker.protocol",
        "string",
        "GSSAPI",
        "The SASL mechanism brokers authenticate to each other with, when the inter-broker "
        "listener is SASL_PLAINTEXT or SASL_SSL.",
    ),
    ConfigDef(
        "sasl.jaas.config",
        "password",
        None,
        "A login module's JAAS configuration; on a broker only with a listener and "
        "mechanism prefix: listener.name.<listener>.<mechanism>.sasl.jaas.config.",
    ),
    ConfigDef(
        "sasl.server.callback.handler.class",
        "string",
        None,
        "With listener.name.<listener>.oauthbearer.: "
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler "
        "validates signed JWTs against sasl.oauthbearer.jwks.endpoint.url; unset: Kafka's "
        "unsecured-JWS validator (development only).",
    ),
    ConfigDef(
        "connections.max.reauth.ms",
        "long",
        0,
        "The longest a SASL session lasts before the client must re-authenticate (KIP-368; "
        "told to clients of SaslAuthenticate v1+; a connection whose session expired is "
        "closed at its next request). 0: no limit but the credential's own expiry.",
        min=0,
    ),
    ConfigDef(
        "connection.failed.authentication.delay.ms",
        "int",
        100,
        "How long the answer to a failed authentication, and the connection's close, are "
        "delayed (slows password guessing).",
        min=0,
    ),
    ConfigDef(
        "sasl.server.max.receive.size",
        "int",
        524_288,
        "The largest request a SASL listener reads from a connection before it is "
        "authenticated; a larger size prefix closes the connection.",
        min=1,
    ),
    ConfigDef(
        "sasl.oauthbearer.jwks.endpoint.url",
        "string",
        None,
        "The JWKS whose keys sign valid OAuth tokens (a file: URL).",
    ),
    ConfigDef(
        "sasl.oauthbearer.expected.audience",
        "list",
        None,
        "A signed token's aud must hold one of these (unset: not checked).",
    ),
    ConfigDef(
        "sasl.oauthbearer.expected.issuer",
        "string",
        None,
        "A signed token's iss must be this (unset: not checked).",
    ),
    ConfigDef(
        "sasl.oauthbearer.sub.claim.name",
        "string",
        "sub",
        "The claim of a signed token that names the principal.",
    ),
    ConfigDef(
        "sasl.oauthbearer.scope.claim.name",
        "string",
        "scope",
        "The claim of a signed token that holds its scope.",
    ),
    ConfigDef(
        "sasl.oauthbearer.clock.skew.seconds",
        "int",
        30,
        "Clock skew allowed when checking a signed token's exp and nbf.",
        min=0,
    ),
)
BROKER_CONFIGS.update(_defs(*_ssl_defs()))

# Topic config -> (broker synonym, definition). Kafka's topic-level names.
TOPIC_CONFIGS: dict[str, tuple[str | None, ConfigDef]] = {
    d.name: (syn, d)
    for syn, d in (
        ("log.cleanup.policy", ConfigDef("cleanup.policy", "list", None, "", choices=_CLEANUP)),
        (
            "compression.type",
            ConfigDef("compression.type", "string", None, "", choices=_COMPRESSION),
        ),
        (
            "log.cleaner.delete.retention.ms",
            ConfigDef("delete.retention.ms", "long", None, "", min=0),
        ),
        ("log.segment.delete.delay.ms", ConfigDef("file.delete.delay.ms", "long", None, "", min=0)),
        ("log.flush.interval.messages", ConfigDef("flush.messages", "long", None, "", min=1)),
        ("log.flush.interval.ms", ConfigDef("flush.ms", "long", None, "", min=0)),
        ("log.index.interval.bytes", ConfigDef("index.interval.bytes", "int", None, "", min=0)),
        ("message.max.bytes", ConfigDef("max.message.bytes", "int", None, "", min=0)),
        (
            "log.message.timestamp.difference.max.ms",
            ConfigDef("message.timestamp.difference.max.ms", "long", None, "", min=0),
        ),
        (
            "log.message.timestamp.before.max.ms",
            ConfigDef("message.timestamp.before.max.ms", "long", None, "", min=0),
        ),
        (
            "log.message.timestamp.after.max.ms",
            ConfigDef("message.timestamp.after.max.ms", "long", None, "", min=0),
        ),
        (
            "log.message.timestamp.type",
            ConfigDef("message.timestamp.type", "string", None, "", choices=_TS_TYPES),
        ),
        (
            "log.cleaner.min.cleanable.ratio",
            ConfigDef("min.cleanable.dirty.ratio", "double", None, "", min=0, max=1),
        ),
        (
            "log.cleaner.min.compaction.lag.ms",
            ConfigDef("min.compaction.lag.ms", "long", None, "", min=0),
        ),
        (
            None,
            ConfigDef(
                "max.compaction.lag.ms",
                "long",
                LONG_MAX,
                "Longest time (ms) a record stays ineligible for compaction: a log with "
                "older uncompacted records is cleaned whatever its dirty ratio.",
                min=1,
            ),
        ),
        ("min.insync.replicas", ConfigDef("min.insync.replicas", "int", None, "", min=1)),
        ("log.preallocate", ConfigDef("preallocate", "bool", None, "")),
        (
            None,
            ConfigDef(
                "leader.replication.throttled.replicas",
                "throttled_replicas",
                [],
                "Replicas (partition:broker, or *) whose leader's sends to out-of-ISR "
                "followers count against leader.replication.throttled.rate.",
            ),
        ),
        (
            None,
            ConfigDef(
                "follower.replication.throttled.replicas",
                "throttled_replicas",
                [],
                "Replicas (partition:broker, or *) whose fetches while out of the ISR "
                "count against follower.replication.throttled.rate.",
            ),
        ),
        ("log.retention.bytes", ConfigDef("retention.bytes", "long", None, "")),
        ("log.retention.ms", ConfigDef("retention.ms", "long", None, "", min=-1)),
        ("log.segment.bytes", ConfigDef("segment.bytes", "int", None, "", min=14)),
        ("log.segment.recycle", ConfigDef("segment.recycle", "bool", None, "")),
        ("log.segment.prepare.next", ConfigDef("segment.prepare.next", "bool", None, "")),
        ("log.index.size.max.bytes", ConfigDef("segment.index.bytes", "int", None, "", min=4)),
        ("log.roll.ms", ConfigDef("segment.ms", "long", None, "", min=1)),
        (
            "unclean.leader.election.enable",
            ConfigDef("unclean.leader.election.enable", "bool", None, ""),
        ),
    )
}


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java-properties-style text: ``key=value`` or ``key: value``, # and ! comments."""
    out: dict[str, str] = {}
    pending = ""
    for raw_line in text.splitlines():
        line = pending + raw_line.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ConfigError(f"cannot parse property line {raw_line!r}: expected key=value")
        out[line[:sep].strip()] = line[sep + 1 :].strip()
    return out


class BrokerConfig:
    """Validated broker properties; read them with ``config["log.dirs"]`` or the helpers."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._explicit: dict[str, Any] = {}
        # Dynamic broker configs over the static ones (sluice.server.dynamic_broker_config)
        self._dynamic: dict[str, Any] = {}
        # listener.name.<listener>.<config>: listener name (upper case) -> config -> value
        self._listener_overrides: dict[str, dict[str, Any]] = {}
        self._ignored: list[str] = []  # Kafka keys with no effect here (config_compat)
        for key, raw in (values or {}).items():
            if key.startswith(LISTENER_PREFIX):
                listener, name, value = _parse_listener_override(key, raw)
                self._listener_overrides.setdefault(listener, {})[name] = value
                continue
            definition = BROKER_CONFIGS.get(key)
            if definition is None and key in IGNORED_BROKER_CONFIGS:
                self._ignored.append(key)
                continue
            if definition is None:
                raise ConfigError(_unknown_broker_config(key))
            self._explicit[key] = definition.parse(raw)
        self._check_consistency()

    @classmethod
    def from_properties(
        cls, path: str | Path | None = None, overrides: Iterable[str] = ()
    ) -> BrokerConfig:
        """Read a properties file (optional), then apply ``key=value`` overrides in order."""
        values: dict[str, str] = {}
        if path is not None:
            values.update(parse_properties(Path(path).read_text(encoding="utf-8")))
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"invalid override {item!r}: expected key=value")
            values[key.strip()] = value.strip()
        return cls(values)

    def __getitem__(self, key: str) -> Any:
        if key in self._dynamic:
            return self._dynamic[key]
        if key in self._explicit:
            return self._explicit[key]
        definition = BROKER_CONFIGS.get(key)
        if definition is None:
            raise KeyError(key)
        return definition.default

    @property
    def ignored_keys(self) -> list[str]:
        """The Kafka broker keys given that have no effect in Sluice, in the order given
        (sluice.config_compat.IGNORED_BROKER_CONFIGS says why each)."""
        return list(self._ignored)

    def is_set(self, key: str) -> bool:
        return key in self._explicit

    def set_dynamic(self, values: Mapping[str, Any]) -> None:
        """Replace the dynamic broker configs (parsed values, the per-broker ones over the
        cluster default), which take precedence over the static ones when read."""
        self._dynamic = dict(values)

    def explicit(self) -> dict[str, Any]:
        return dict(self._explicit)

    def for_listener(self, listener_name: str, key: str) -> Any:
        """``key`` as one listener sees it: its ``listener.name.<listener>.<key>`` if set,
        else the broker-wide value."""
        overrides = self._listener_overrides.get(listener_name.upper(), {})
        return overrides[key] if key in overrides else self[key]

    def listener_overrides(self, listener_name: str) -> dict[str, Any]:
        """The configs set for one listener with ``listener.name.<listener>.``."""
        return dict(self._listener_overrides.get(listener_name.upper(), {}))

    def _check_consistency(self) -> None:
        self._check_listeners()
        self._check_connection_limits()
        self._check_authorizer()
        for key in SASL_MECHANISM_CONFIGS[:2]:  # Kafka's broker ignores them unprefixed
            if self.is_set(key):
                raise ConfigError(
                    f"{key} on a broker must be prefixed with a listener and a mechanism: "
                    f"listener.name.<listener>.<mechanism>.{key}"
                )

    def _check_listeners(self) -> None:
        """Kafka's checks of listeners, advertised.listeners and the inter-broker listener."""
        protocol_map = self.security_protocol_map
        listeners = self.listener_endpoints
        names = [e.listener_name for e in listeners]
        if not names:
            raise ConfigError("listeners must name at least one listener")
        for name in names:
            if names.count(name) > 1:
                raise ConfigError(f"listeners: each listener must have a different name: {name}")
        ports = [e.port for e in listeners if e.port != 0]
        for port in ports:
            if ports.count(port) > 1:
                raise ConfigError(f"listeners: each listener must have a different port: {port}")
        advertised = self.advertised_endpoints
        adv_names = [e.listener_name for e in advertised]
        for name in adv_names:
            if name not in names:
                raise ConfigError(
                    f"advertised.listeners: listener {name} is not one of the listeners"
                )
            if adv_names.count(name) > 1:
                raise ConfigError(f"advertised.listeners: listener {name} is named twice")
        for listener, overrides in self._listener_overrides.items():
            if listener == CONSOLE_LISTENER and listener not in protocol_map:
                others = sorted(key for key in overrides if not key.startswith("ssl."))
                if others:  # the console's own TLS settings (console.ssl.enabled) only
                    raise ConfigError(
                        f"{LISTENER_PREFIX}console.*: only ssl.* settings apply to the "
                        f"web console, not {', '.join(others)}"
                    )
                continue
            if listener not in protocol_map:
                raise ConfigError(
                    f"{LISTENER_PREFIX}{listener.lower()}.*: no listener {listener} in "
                    "listener.security.protocol.map"
                )
        if self.is_set("inter.broker.listener.name") and self.is_set(
            "security.inter.broker.protocol"
        ):
            raise ConfigError(
                "only one of inter.broker.listener.name and security.inter.broker.protocol "
                "may be set"
            )
        if self["zookeeper.connect"] and self.inter_broker_listener_name not in adv_names:
            raise ConfigError(
                f"inter.broker.listener.name must be a listener name defined in "
                f"advertised.listeners; {self.inter_broker_listener_name} is not "
                f"(advertised: {', '.join(adv_names)})"
            )

    def _check_authorizer(self) -> None:
        from sluice.security.authorizer import AUTHORIZER_CLASS_NAMES, parse_super_users

        name = self["authorizer.class.name"]
        if name and name not in AUTHORIZER_CLASS_NAMES:
            raise ConfigError(
                f"invalid value {name!r} for authorizer.class.name: Sluice serves "
                f"{' or '.join(AUTHORIZER_CLASS_NAMES)}, or empty for no authorization"
            )
        try:
            parse_super_users(self["super.users"])
        except ValueError as exc:
            raise ConfigError(f"invalid value for super.users: {exc}") from None

    def _check_connection_limits(self) -> None:
        """Kafka's checks of the memory pool and connection limit settings."""
        for key in ("socket.send.buffer.bytes", "socket.receive.buffer.bytes"):
            if self[key] == 0:  # Java's Socket refuses a size of 0 too
                raise ConfigError(f"invalid value 0 for {key}: a size in bytes, or -1")
        queued = self["queued.max.request.bytes"]
        if 0 < queued < self["socket.request.max.bytes"]:
            raise ConfigError(
                "queued.max.request.bytes must be at least socket.request.max.bytes "
                f"({self['socket.request.max.bytes']}), or -1 for no bound; got {queued}"
            )
        overrides = self["max.connections.per.ip.overrides"]
        if self["max.connections.per.ip"] == 0 and not overrides.strip():
            raise ConfigError(
                "max.connections.per.ip can be 0 only if max.connections.per.ip.overrides is set"
            )
        parse_connection_overrides(overrides)

    # -- derived values ----------------------------------------------------------
    @property
    def broker_id(self) -> int:
        return int(self["broker.id"])

    @property
    def log_dirs(self) -> list[Path]:
        """The directories of ``log.dirs`` (``log.dir`` when that is unset), in order,
        each named once."""
        if not self.is_set("log.dirs") and self["log.dir"] is not None:
            return [Path(self["log.dir"])]
        dirs: list[Path] = []
        for name in str(self["log.dirs"]).split(","):
            path = Path(name.strip())
            if name.strip() and path not in dirs:
                dirs.append(path)
        if not dirs:
            raise ConfigError("log.dirs must name at least one directory")
        return dirs

    @property
    def log_dir(self) -> Path:
        """The first of :attr:`log_dirs`: it also holds the broker's own files."""
        return self.log_dirs[0]

    @property
    def listeners(self) -> list[str]:
        return list(self["listeners"])

    @property
    def advertised_listeners(self) -> list[str]:
        adv = self["advertised.listeners"]
        return list(adv) if adv is not None else self.listeners

    @property
    def security_protocol_map(self) -> dict[str, str]:
        """``listener.security.protocol.map``: listener name -> security protocol."""
        return parse_security_protocol_map(self["listener.security.protocol.map"])

    @property
    def listener_endpoints(self) -> list[EndPoint]:
        """The listeners to open, each with its name and security protocol."""
        protocol_map = self.security_protocol_map
        return [parse_listener(x, protocol_map) for x in self.listeners]

    @property
    def advertised_endpoints(self) -> list[EndPoint]:
        """What this broker registers: advertised.listeners (or listeners)."""
        protocol_map = self.security_protocol_map
        return [parse_listener(x, protocol_map) for x in self.advertised_listeners]

    @property
    def inter_broker_listener_name(self) -> str:
        """``inter.broker.listener.name``, else the listener named after
        ``security.inter.broker.protocol``."""
        name = self["inter.broker.listener.name"]
        return str(name).strip().upper() if name else str(self["security.inter.broker.protocol"])

    @property
    def inter_broker_security_protocol(self) -> str:
        name = self.inter_broker_listener_name
        return self.security_protocol_map.get(name, name)

    @property
    def retention_ms(self) -> int:
        if self["log.retention.ms"] is not None:
            return int(self["log.retention.ms"])
        if self["log.retention.minutes"] is not None:
            return int(self["log.retention.minutes"]) * 60_000
        return int(self["log.retention.hours"]) * 3_600_000

    @property
    def roll_ms(self) -> int:
        if self["log.roll.ms"] is not None:
            return int(self["log.roll.ms"])
        return int(self["log.roll.hours"]) * 3_600_000

    def broker_synonym(self, key: str) -> Any:
        """The broker-level default for a ``log.*`` synonym of a topic config."""
        if key == "log.retention.ms":
            return self.retention_ms
        if key == "log.roll.ms":
            return self.roll_ms
        return self[key]


def _unknown_broker_config(key: str) -> str:
    """The refusal of a key Sluice does not know, with the nearest known key."""
    if is_kraft_only(key):
        return (
            f"unknown broker config {key!r}: it configures KRaft mode, and Sluice runs in "
            "ZooKeeper mode (set broker.id and, for a cluster, zookeeper.connect)"
        )
    known = [*BROKER_CONFIGS, *IGNORED_BROKER_CONFIGS]
    hint = suggest(key, known)
    return f"unknown broker config {key!r}" + (f"; did you mean {hint!r}?" if hint else "")


def parse_security_protocol_map(entries: Iterable[str]) -> dict[str, str]:
    """``listener.security.protocol.map`` entries (``NAME:PROTOCOL``) as a dict."""
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, protocol = entry.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ConfigError(
                f"invalid entry {entry!r} in listener.security.protocol.map: expected NAME:PROTOCOL"
            )
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map: unknown security protocol {protocol!r} for "
                f"{name} (one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        if name in out:
            raise ConfigError(f"listener.security.protocol.map: {name} is named twice")
        out[name] = protocol
    return out


def parse_listener(listener: str, protocol_map: Mapping[str, str] | None = None) -> EndPoint:
    """``NAME://host:port`` -> EndPoint(host, port, NAME, its security protocol from
    ``protocol_map``, by default Kafka's PLAINTEXT/SSL/SASL_PLAINTEXT/SASL_SSL); an empty
    host is every interface (0.0.0.0)."""
    if protocol_map is None:
        protocol_map = {p: p for p in SECURITY_PROTOCOLS}
    scheme, sep, rest = listener.strip().partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or not colon or not scheme:
        raise ConfigError(f"invalid listener {listener!r}: expected NAME://host:port")
    name = scheme.upper()
    protocol = protocol_map.get(name)
    if protocol is None:
        raise ConfigError(
            f"listener {listener!r}: no security protocol for listener {name} in "
            "listener.security.protocol.map"
        )
    try:
        port_number = int(port)
    except ValueError:
        raise ConfigError(f"invalid port in listeners entry {listener!r}") from None
    if not 0 <= port_number <= 65535:
        raise ConfigError(f"invalid port in listener {listener!r}")
    return EndPoint(host.strip("[]") or "0.0.0.0", port_number, name, protocol)


def _parse_listener_override(key: str, raw: Any) -> tuple[str, str, Any]:
    """``listener.name.<listener>.<config>`` -> (LISTENER, config, parsed value)."""
    listener, dot, name = key[len(LISTENER_PREFIX) :].partition(".")
    mechanism, _, per_mechanism = name.partition(".")
    if mechanism.upper() in SASL_MECHANISM_NAMES and per_mechanism in SASL_MECHANISM_CONFIGS:
        # listener.name.<listener>.<mechanism>.<config>: kept as "<mechanism>.<config>"
        name = f"{mechanism.lower()}.{per_mechanism}"
        definition = BROKER_CONFIGS.get(per_mechanism)
    else:
        definition = BROKER_CONFIGS.get(name)
        if name in SASL_MECHANISM_CONFIGS[:2]:
            definition = None  # only with a mechanism prefix
    if (
        not dot
        or not listener
        or definition is None
        or (
            not name.startswith(LISTENER_CONFIG_PREFIXES)
            and definition.name not in SASL_MECHANISM_CONFIGS
        )
    ):
        allowed = [k for k in BROKER_CONFIGS if k.startswith(LISTENER_CONFIG_PREFIXES)]
        hint = suggest(name, allowed) if dot and listener else None
        raise ConfigError(
            f"unknown broker config {key!r} (a listener.name.<listener>. prefix takes "
            f"{', '.join(p + '*' for p in LISTENER_CONFIG_PREFIXES)} configs)"
            + (f"; did you mean '{LISTENER_PREFIX}{listener}.{hint}'?" if hint else "")
        )
    return listener.upper(), name, definition.parse(raw)


def parse_connection_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, comma-separated (an
    IPv6 address may be bracketed), as ``{host: count}`` with the hosts as written."""
    out: dict[str, int] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().removeprefix("[").removesuffix("]")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(
                f"invalid entry {item!r} in max.connections.per.ip.overrides: "
                "expected host:count with a count of 0 or more"
            )
        out[host] = int(count)
    return out


def topic_config_defaults(broker: BrokerConfig) -> dict[str, Any]:
    """Every topic config with its default, taken from the broker's synonym where it has one."""
    out: dict[str, Any] = {}
    for name, (synonym, definition) in TOPIC_CONFIGS.items():
        out[name] = broker.broker_synonym(synonym) if synonym else definition.default
    return out


def format_config_value(value: Any) -> str | None:
    """A config value as Kafka prints it: ``true``/``false``, comma-joined lists."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Parse topic config overrides (CreateTopics, AlterConfigs); unknown keys raise."""
    out: dict[str, Any] = {}
    for key, raw in configs.items():
        entry = TOPIC_CONFIGS.get(key)
        if entry is None:
            raise ConfigError(f"unknown topic config {key!r}")
        out[key] = None if raw is None else entry[1].parse(raw)
    return out
