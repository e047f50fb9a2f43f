"""``Admin``: Sluice's Kafka admin client (a synchronous take on Java's ``Admin``).

    from sluice.client import Admin, NewTopic

    with Admin({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
        admin.create_topics([NewTopic("events", num_partitions=3)])
        print(admin.describe_topics(["events"]))

Each method sends its requests to the right broker (the controller for topic
changes, the group coordinator for group operations, partition leaders for
DeleteRecords and ListOffsets) and raises the first error a broker reports for a
resource as a :class:`~.errors.KafkaException` subclass (``exc.code`` is the Kafka
error code). Results are plain dataclasses and dicts.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final

from sluice.client.consumer.fetcher import EARLIEST, LATEST, TopicPartition, list_offsets
from sluice.client.consumer.group_assignors import decode_assignment
from sluice.client.consumer.group_coordinator import OffsetAndMetadata
from sluice.client.errors import ConfigException, exception_for
from sluice.client.net.cluster import Node, PartitionInfo
from sluice.client.net.consumer_network_client import (
    ConsumerNetworkClient,
    coordinator_broker_id,
    coordinator_node,
)
from sluice.client.security import SECURITY_CONFIG_DEFAULTS, ClientSecurity
from sluice.protocol import ApiKey, ErrorCode
from sluice.security.acl import (
    ANY_FILTER,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from sluice.security.sasl.scram import mechanism_from_type, mechanism_type, salted_password

__all__ = [
    "Admin",
    "ClusterDescription",
    "ConfigEntry",
    "ConsumerGroupDescription",
    "GroupListing",
    "LogDirDescription",
    "MemberDescription",
    "NewTopic",
    "PartitionDescription",
    "ProducerState",
    "ReplicaInfo",
    "TopicDescription",
    "TopicPartitionReplica",
    "TransactionDescription",
    "TransactionListing",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
]

RESOURCE_TOPIC: Final = 2
RESOURCE_BROKER: Final = 4
_RETRY_COORDINATOR = {
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
}


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """A user's new SCRAM credential: the mechanism, the iterations and the password
    (Kafka's ``UserScramCredentialUpsertion``; a random salt unless given)."""

    user: str
    mechanism: str
    password: str
    iterations: int = 4096
    salt: bytes | None = None


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    """The removal of a user's credential for one mechanism."""

    user: str
    mechanism: str


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    config: dict[str, str] = field(default_factory=dict)
    replica_assignment: dict[int, list[int]] | None = None


@dataclass
class PartitionDescription:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...] = ()


@dataclass
class TopicDescription:
    name: str
    internal: bool
    partitions: list[PartitionDescription]


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool
    is_default: bool
    is_sensitive: bool
    source: int


@dataclass
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass
class MemberDescription:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    assignment: list[TopicPartition]


@dataclass
class ConsumerGroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]


@dataclass
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str  # Kafka's TransactionState name (Ongoing, CompleteCommit, ...)
    coordinator_id: int


@dataclass
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int | None  # None: no transaction open
    partitions: list[TopicPartition]


@dataclass(frozen=True)
class ProducerState:
    """A producer a partition leader knows (Kafka's ``ProducerState``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None  # None: no marker written for it yet
    current_transaction_start_offset: int | None  # None: no open transaction


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]


def _filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    """A DescribeAcls request's (and a DeleteAcls filter's) fields."""
    return {
        "resource_type_filter": int(f.pattern.resource_type),
        "resource_name_filter": f.pattern.name,
        "pattern_type_filter": int(f.pattern.pattern_type),
        "principal_filter": f.entry.principal,
        "host_filter": f.entry.host,
        "operation": int(f.entry.operation),
        "permission_type": int(f.entry.permission_type),
    }


@dataclass(frozen=True)
class TopicPartitionReplica:
    """A partition's replica on one broker (Java's ``TopicPartitionReplica``)."""

    topic: str
    partition: int
    broker_id: int


@dataclass
class ReplicaInfo:
    """A partition log in a log directory: its size in bytes, how far its end lies
    behind (the high watermark, or for a future log the current log's end) and whether it
    is the future log of a move between directories."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass
class LogDirDescription:
    """One directory of a broker's ``log.dirs``: its error code (KAFKA_STORAGE_ERROR when
    offline), its partition logs and its volume's total and usable bytes (-1: not told)."""

    error: int
    replicas: dict[TopicPartition, ReplicaInfo]
    total_bytes: int = -1
    usable_bytes: int = -1


def _has_leaders(partitions: list[PartitionInfo]) -> bool:
    return bool(partitions) and all(p.leader is not None for p in partitions)


def _producer_state(s: Any) -> ProducerState:
    """A DescribeProducers answer's producer (-1: no coordinator epoch, no transaction)."""
    coordinator_epoch, start = int(s.coordinator_epoch), int(s.current_txn_start_offset)
    return ProducerState(
        int(s.producer_id),
        int(s.producer_epoch),
        int(s.last_sequence),
        int(s.last_timestamp),
        None if coordinator_epoch < 0 else coordinator_epoch,
        None if start < 0 else start,
    )


def _check(code: int, message: str | None, what: str) -> None:
    if code:
        raise exception_for(code, f"{what}: {message or ErrorCode(code).name.upper()}")


class Admin:
    """Synchronous admin operations against a Kafka (or Sluice) cluster."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        known = {"bootstrap.servers", "client.id", "request.timeout.ms", "default.api.timeout.ms",
                 *SECURITY_CONFIG_DEFAULTS}  # fmt: skip
        unknown = set(config) - known
        if unknown:
            raise ConfigException(f"unknown admin configuration: {', '.join(sorted(unknown))}")
        if not config.get("bootstrap.servers"):
            raise ConfigException("bootstrap.servers is required")
        self.timeout_ms = int(config.get("default.api.timeout.ms", 60_000))
        self._client = ConsumerNetworkClient(
            str(config["bootstrap.servers"]),
            str(config.get("client.id", "sluice-admin")),
            int(config.get("request.timeout.ms", 30_000)),
            ClientSecurity.from_config(config),
        )

    # -- cluster -----------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        body = self._client.send(None, ApiKey.DESCRIBE_CLUSTER, endpoint_type=1)
        _check(body.error_code, body.error_message, "DescribeCluster")
        brokers = [BrokerInfo(int(b.broker_id), b.host, int(b.port), b.rack) for b in body.brokers]
        return ClusterDescription(body.cluster_id, int(body.controller_id), brokers)

    def _controller(self) -> int:
        self._client.refresh_metadata([])
        controller = self._client.cluster.controller
        return -1 if controller is None else controller.id

    # -- topics ------------------------------------------------------------------------

    def create_topics(
        self, topics: Iterable[NewTopic], validate_only: bool = False
    ) -> dict[str, int]:
        """Create topics; returns each topic's partition count."""
        new = list(topics)
        body = self._client.send(
            self._controller(),
            ApiKey.CREATE_TOPICS,
            topics=[
                {
                    "name": t.name,
                    "num_partitions": t.num_partitions if not t.replica_assignment else -1,
                    "replication_factor": t.replication_factor if not t.replica_assignment else -1,
                    "assignments": [
                        {"partition_index": p, "broker_ids": b}
                        for p, b in (t.replica_assignment or {}).items()
                    ],
                    "configs": [{"name": k, "value": str(v)} for k, v in t.config.items()],
                }
                for t in new
            ],
            timeout=self.timeout_ms,
            validate_only=validate_only,
        )
        out = {}
        for t in body.topics:
            _check(t.error_code, t.error_message, f"CreateTopics {t.name}")
            out[t.name] = int(t.num_partitions)
        self._wait_for_metadata([t.name for t in new], present=not validate_only)
        return out

    def _wait_for_metadata(self, topics: list[str], present: bool) -> None:
        deadline = time.monotonic() + self.timeout_ms / 1000
        while time.monotonic() < deadline:
            self._client.refresh_metadata(topics)
            cluster = self._client.cluster
            ok = all(_has_leaders(cluster.partitions_for_topic(t)) == present for t in topics)
            if ok:
                return
            time.sleep(0.02)

    def delete_topics(self, topics: Iterable[str]) -> None:
        names = list(topics)
        body = self._client.send(
            self._controller(), ApiKey.DELETE_TOPICS, topic_names=names, timeout=self.timeout_ms
        )
        for r in body.responses:
            _check(r.error_code, getattr(r, "error_message", None), f"DeleteTopics {r.name}")
        self._wait_for_metadata(names, present=False)

    def list_topics(self, internal: bool = False) -> list[str]:
        body = self._client.refresh_metadata(None)
        return sorted(t.name for t in body.topics if internal or not t.is_internal)

    def describe_topics(self, topics: Iterable[str]) -> dict[str, TopicDescription]:
        names = list(topics)
        body = self._client.refresh_metadata(names)
        out = {}
        for t in body.topics:
            _check(t.error_code, None, f"describe topic {t.name}")
            parts = sorted(
                (
                    PartitionDescription(
                        int(p.partition_index),
                        int(p.leader_id),
                        tuple(int(r) for r in p.replica_nodes),
                        tuple(int(r) for r in p.isr_nodes),
                    )
                    for p in t.partitions
                ),
                key=lambda p: p.partition,
            )
            out[t.name] = TopicDescription(t.name, bool(t.is_internal), parts)
        return out

    def create_partitions(self, new_counts: Mapping[str, int], validate_only: bool = False) -> None:
        """Increase topics' partition counts to ``new_counts``."""
        body = self._client.send(
            self._controller(),
            ApiKey.CREATE_PARTITIONS,
            topics=[{"name": t, "count": n, "assignments": None} for t, n in new_counts.items()],
            timeout=self.timeout_ms,
            validate_only=validate_only,
        )
        for r in body.results:
            _check(r.error_code, r.error_message, f"CreatePartitions {r.name}")
        if not validate_only:
            deadline = time.monotonic() + self.timeout_ms / 1000
            while time.monotonic() < deadline:
                self._client.refresh_metadata(list(new_counts))
                cluster = self._client.cluster
                if all(len(cluster.partitions_for_topic(t)) >= n for t, n in new_counts.items()):
                    return
                time.sleep(0.02)

    # -- configs -----------------------------------------------------------------------

    def describe_configs(
        self, topics: Iterable[str] = (), brokers: Iterable[int] = ()
    ) -> dict[tuple[int, str], dict[str, ConfigEntry]]:
        """Configs keyed by (resource type, name): 2 for topics, 4 for brokers."""
        resources = [
            {"resource_type": RESOURCE_TOPIC, "resource_name": t, "configuration_keys": None}
            for t in topics
        ] + [
            {"resource_type": RESOURCE_BROKER, "resource_name": str(b), "configuration_keys": None}
            for b in brokers
        ]
        body = self._client.send(
            None, ApiKey.DESCRIBE_CONFIGS, resources=resources,
            include_synonyms=False, include_documentation=False,
        )  # fmt: skip
        out: dict[tuple[int, str], dict[str, ConfigEntry]] = {}
        for r in body.results:
            _check(r.error_code, r.error_message, f"DescribeConfigs {r.resource_name}")
            out[(int(r.resource_type), r.resource_name)] = {
                c.name: ConfigEntry(
                    c.name,
                    c.value,
                    bool(c.read_only),
                    int(c.config_source) == 5,
                    bool(c.is_sensitive),
                    int(c.config_source),
                )
                for c in r.configs
            }
        return out

    def alter_configs(
        self,
        topic_configs: Mapping[str, Mapping[str, str | None]],
        incremental: bool = True,
    ) -> None:
        """Set topic configs (a value of None deletes the override). Incremental by
        default (IncrementalAlterConfigs); ``incremental=False`` replaces the whole
        set of overrides (legacy AlterConfigs)."""
        if incremental:
            body = self._client.send(
                None,
                ApiKey.INCREMENTAL_ALTER_CONFIGS,
                resources=[
                    {
                        "resource_type": RESOURCE_TOPIC,
                        "resource_name": t,
                        "configs": [
                            {"name": k, "config_operation": 1 if v is None else 0, "value": v}
                            for k, v in cfg.items()
                        ],
                    }
                    for t, cfg in topic_configs.items()
                ],
                validate_only=False,
            )
        else:
            body = self._client.send(
                None,
                ApiKey.ALTER_CONFIGS,
                resources=[
                    {
                        "resource_type": RESOURCE_TOPIC,
                        "resource_name": t,
                        "configs": [
                            {"name": k, "value": v} for k, v in cfg.items() if v is not None
                        ],
                    }
                    for t, cfg in topic_configs.items()
                ],
                validate_only=False,
            )
        for r in body.responses:
            _check(r.error_code, r.error_message, f"AlterConfigs {r.resource_name}")

    # -- client quotas -----------------------------------------------------------------

    def alter_client_quotas(
        self,
        alterations: Iterable[tuple[Mapping[str, str | None], Mapping[str, float | None]]],
        validate_only: bool = False,
    ) -> None:
        """Set or remove client quotas (Java's ``alterClientQuotas``). Each alteration is
        an entity (``{"user": "alice", "client-id": None}``: None is the default) and its
        quotas (``{"producer_byte_rate": 1048576.0, "consumer_byte_rate": None}``: None
        removes the key). Raises the first entity's error."""
        entries = [
            {
                "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
                "ops": [
                    {"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                    for k, v in ops.items()
                ],
            }
            for entity, ops in alterations
        ]
        body = self._client.send(
            None, ApiKey.ALTER_CLIENT_QUOTAS, entries=entries, validate_only=validate_only
        )
        for entry in body.entries:
            named = ",".join(f"{e.entity_type}={e.entity_name}" for e in entry.entity)
            _check(entry.error_code, entry.error_message, f"AlterClientQuotas {named}")

    def describe_client_quotas(
        self, components: Iterable[tuple[str, int, str | None]] = (), strict: bool = False
    ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        """The quotas of the entities a filter matches (Java's ``describeClientQuotas``):
        each component is (entity type, match type, name) with match type 0 (exactly
        ``name``), 1 (the default) or 2 (any named entity); no components match every
        entity unless ``strict``. Returns (entity, quotas) pairs."""
        body = self._client.send(
            None, ApiKey.DESCRIBE_CLIENT_QUOTAS,
            components=[
                {"entity_type": t, "match_type": m, "match": n} for t, m, n in components
            ],
            strict=strict,
        )  # fmt: skip
        _check(body.error_code, body.error_message, "DescribeClientQuotas")
        return [
            (
                {e.entity_type: e.entity_name for e in entry.entity},
                {v.key: float(v.value) for v in entry.values},
            )
            for entry in body.entries or ()
        ]

    # -- records -----------------------------------------------------------------------

    def delete_records(
        self, before: Mapping[TopicPartition | tuple[str, int], int]
    ) -> dict[TopicPartition, int]:
        """Delete records before the given offsets (-1: the high watermark); returns
        each partition's new low watermark."""
        tps = {TopicPartition(*tp): off for tp, off in before.items()}
        self._client.refresh_metadata(sorted({tp.topic for tp in tps}))
        by_node: dict[int, dict[str, list[dict[str, int]]]] = {}
        for tp, off in tps.items():
            node = self._client.leader_for(*tp)
            if node < 0:
                raise exception_for(ErrorCode.unknown_topic_or_partition, str(tp))
            by_node.setdefault(node, {}).setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "offset": off}
            )
        out = {}
        for node, topics in by_node.items():
            body = self._client.send(
                node,
                ApiKey.DELETE_RECORDS,
                topics=[{"name": t, "partitions": ps} for t, ps in topics.items()],
                timeout=self.timeout_ms,
            )
            for t in body.topics:
                for p in t.partitions:
                    _check(p.error_code, None, f"DeleteRecords {t.name}-{p.partition_index}")
                    out[TopicPartition(t.name, int(p.partition_index))] = int(p.low_watermark)
        return out

    def list_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]], spec: str | int = "latest"
    ) -> dict[TopicPartition, int | None]:
        """Offsets of ``partitions``: "earliest", "latest" or those for a timestamp."""
        ts = EARLIEST if spec == "earliest" else LATEST if spec == "latest" else int(spec)
        tps = [TopicPartition(*tp) for tp in partitions]
        self._client.refresh_metadata(sorted({tp.topic for tp in tps}))
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp in tps:
            by_node.setdefault(self._client.leader_for(*tp), {})[tp] = ts
        out: dict[TopicPartition, int | None] = {}
        for node, wanted in by_node.items():
            if node < 0:
                raise exception_for(ErrorCode.unknown_topic_or_partition, str(list(wanted)))
            out.update(list_offsets(self._client, node, wanted))
        return out

    # -- leaders ---------------------------------------------------------------------------

    def elect_leaders(
        self, election_type: int, partitions: Iterable[TopicPartition | tuple[str, int]] | None
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """Ask the controller for preferred (0) or unclean (1) leader elections of
        ``partitions`` (None: every partition); returns each partition's (error code,
        message): 0 elected, ELECTION_NOT_NEEDED when its leader already fits. Retries
        while the controller moves (NOT_CONTROLLER) until ``default.api.timeout.ms``."""
        by_topic: dict[str, list[int]] | None = None
        if partitions is not None:
            by_topic = {}
            for tp in map(TopicPartition._make, partitions):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            body = self._client.send(
                self._controller(),
                ApiKey.ELECT_LEADERS,
                election_type=election_type,
                topic_partitions=None if by_topic is None else [
                    {"topic": t, "partitions": ps} for t, ps in by_topic.items()
                ],
                timeout=self.timeout_ms,
            )  # fmt: skip
            code = int(getattr(body, "error_code", 0))
            if code != ErrorCode.not_controller or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        _check(code, None, "ElectLeaders")
        return {
            TopicPartition(r.topic, int(p.partition_id)): (int(p.error_code), p.error_message)
            for r in body.replica_election_results
            for p in r.partition_result
        }

    def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition | tuple[str, int], list[int] | None]
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """Start moving each partition to its target replicas (None: cancel its
        reassignment in progress); returns each partition's (error code, message)."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, replicas in targets.items():
            t = TopicPartition(*tp)
            by_topic.setdefault(t.topic, []).append(
                {"partition_index": t.partition, "replicas": replicas}
            )
        body = self._client.send(
            self._controller(),
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            timeout=self.timeout_ms,
            topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        )
        _check(body.error_code, body.error_message, "AlterPartitionReassignments")
        return {
            TopicPartition(r.name, int(p.partition_index)): (int(p.error_code), p.error_message)
            for r in body.responses
            for p in r.partitions
        }

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """Reassignments in progress (of ``partitions``; None: all): each partition's
        (replicas, adding replicas, removing replicas)."""
        topics: list[dict[str, Any]] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in map(TopicPartition._make, partitions):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        body = self._client.send(
            self._controller(),
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            timeout=self.timeout_ms,
            topics=topics,
        )
        _check(body.error_code, body.error_message, "ListPartitionReassignments")
        return {
            TopicPartition(t.name, int(p.partition_index)): (
                [int(r) for r in p.replicas],
                [int(r) for r in p.adding_replicas],
                [int(r) for r in p.removing_replicas],
            )
            for t in body.topics
            for p in t.partitions
        }

    # -- log dirs ----------------------------------------------------------------------

    def describe_log_dirs(
        self,
        brokers: Iterable[int] | None = None,
        partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
    ) -> dict[int, dict[str, LogDirDescription]]:
        """Each broker's log directories (default: every broker), by absolute path, with
        the logs of ``partitions`` in them (default: every log)."""
        self._client.refresh_metadata([])
        nodes = sorted(self._client.cluster.nodes) if brokers is None else list(brokers)
        topics: list[dict[str, Any]] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in map(TopicPartition._make, partitions):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
        out: dict[int, dict[str, LogDirDescription]] = {}
        for node in nodes:
            body = self._client.send(node, ApiKey.DESCRIBE_LOG_DIRS, topics=topics)
            _check(int(getattr(body, "error_code", 0)), None, f"DescribeLogDirs on {node}")
            dirs: dict[str, LogDirDescription] = {}
            for result in body.results:
                replicas = {
                    TopicPartition(t.name, int(p.partition_index)): ReplicaInfo(
                        int(p.partition_size), int(p.offset_lag), bool(p.is_future_key)
                    )
                    for t in result.topics
                    for p in t.partitions
                }
                dirs[result.log_dir] = LogDirDescription(
                    int(result.error_code), replicas,
                    int(getattr(result, "total_bytes", -1)),
                    int(getattr(result, "usable_bytes", -1)),
                )  # fmt: skip
            out[node] = dirs
        return out

    def alter_replica_log_dirs(self, assignments: Mapping[TopicPartitionReplica, str]) -> None:
        """Move each replica to the log directory (an absolute path) on its broker; a
        broker moves them in the background (see :meth:`describe_log_dirs`). Raises the
        first error a broker answers for a replica."""
        by_node: dict[int, dict[str, dict[str, list[int]]]] = {}
        for replica, path in assignments.items():
            topics = by_node.setdefault(replica.broker_id, {}).setdefault(path, {})
            topics.setdefault(replica.topic, []).append(replica.partition)
        self._client.refresh_metadata([])
        for node, dirs in by_node.items():
            body = self._client.send(
                node,
                ApiKey.ALTER_REPLICA_LOG_DIRS,
                dirs=[
                    {
                        "path": path,
                        "topics": [{"name": t, "partitions": ps} for t, ps in ts.items()],
                    }
                    for path, ts in dirs.items()
                ],
            )
            for t in body.results:
                for p in t.partitions:
                    where = f"AlterReplicaLogDirs {t.topic_name}-{p.partition_index} on {node}"
                    _check(p.error_code, None, where)

    # -- groups ------------------------------------------------------------------------

    def _coordinator(self, group_id: str, key_type: int = 0) -> Node:
        """The coordinator of a group (``key_type`` 0) or a transactional id (1)."""
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            body = self._client.send(None, ApiKey.FIND_COORDINATOR, key=group_id, key_type=key_type)
            if body.error_code == 0:
                return coordinator_node(body)
            if ErrorCode(body.error_code) not in _RETRY_COORDINATOR or time.monotonic() > deadline:
                _check(body.error_code, body.error_message, f"FindCoordinator {group_id}")
            time.sleep(0.05)

    def list_groups(self) -> list[GroupListing]:
        self._client.refresh_metadata([])
        out: list[GroupListing] = []
        for node in list(self._client.cluster.nodes.values()):
            body = self._client.send(node, ApiKey.LIST_GROUPS, states_filter=[])
            _check(body.error_code, None, "ListGroups")
            out.extend(
                GroupListing(g.group_id, g.protocol_type, getattr(g, "group_state", "") or "")
                for g in body.groups
            )
        return sorted(out, key=lambda g: g.group_id)

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, ConsumerGroupDescription]:
        out = {}
        for group_id in group_ids:
            body = self._client.send(
                self._coordinator(group_id), ApiKey.DESCRIBE_GROUPS,
                groups=[group_id], include_authorized_operations=False,
            )  # fmt: skip
            for g in body.groups:
                _check(g.error_code, None, f"DescribeGroups {g.group_id}")
                members = []
                for m in g.members:
                    assigned: list[TopicPartition] = []
                    if g.protocol_type == "consumer" and m.member_assignment:
                        assigned = [
                            TopicPartition(t, p)
                            for t, p in decode_assignment(m.member_assignment).partitions
                        ]
                    members.append(
                        MemberDescription(
                            m.member_id, m.client_id, m.client_host, m.group_instance_id, assigned
                        )
                    )
                out[g.group_id] = ConsumerGroupDescription(
                    g.group_id, g.group_state, g.protocol_type, g.protocol_data, members
                )
        return out

    def delete_groups(self, group_ids: Iterable[str]) -> None:
        for group_id in group_ids:
            body = self._client.send(
                self._coordinator(group_id), ApiKey.DELETE_GROUPS, groups_names=[group_id]
            )
            for r in body.results:
                _check(r.error_code, None, f"DeleteGroups {r.group_id}")

    def list_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all of them when ``partitions`` is None)."""
        topics: dict[str, list[int]] | None = None
        if partitions is not None:
            topics = {}
            for tp in partitions:
                topics.setdefault(tp.topic, []).append(tp.partition)
        body = self._client.send(
            self._coordinator(group_id),
            ApiKey.OFFSET_FETCH,
            group_id=group_id,
            topics=None
            if topics is None
            else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
            require_stable=False,
        )
        _check(body.error_code, None, f"OffsetFetch {group_id}")
        out = {}
        for t in body.topics:
            for p in t.partitions:
                _check(p.error_code, None, f"OffsetFetch {t.name}-{p.partition_index}")
                if int(p.committed_offset) >= 0:
                    out[TopicPartition(t.name, int(p.partition_index))] = OffsetAndMetadata(
                        int(p.committed_offset), p.metadata or ""
                    )
        return out

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` for the group as Kafka's admin client does (generation -1,
        no member id): the coordinator accepts it only while the group has no members,
        and answers UNKNOWN_MEMBER_ID otherwise."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, offset in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        body = self._client.send(
            self._coordinator(group_id),
            ApiKey.OFFSET_COMMIT,
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[{"name": t, "partitions": ps} for t, ps in topics.items()],
        )
        for t in body.topics:
            for p in t.partitions:
                _check(p.error_code, None, f"OffsetCommit {t.name}-{p.partition_index}")

    def group_coordinator(self, group_id: str) -> BrokerInfo:
        """The broker coordinating ``group_id``."""
        node = self._coordinator(group_id)
        return BrokerInfo(coordinator_broker_id(node), node.host, node.port, node.rack)

    # -- transactions ------------------------------------------------------------------

    def list_transactions(self) -> list[TransactionListing]:
        """Every transactional id, asking each broker for those it coordinates."""
        self._client.refresh_metadata([])
        out: list[TransactionListing] = []
        for node in sorted(self._client.cluster.nodes.values()):
            body = self._client.send(
                node, ApiKey.LIST_TRANSACTIONS, state_filters=[], producer_id_filters=[],
                duration_filter=-1,
            )  # fmt: skip
            _check(body.error_code, None, f"ListTransactions on {node.id}")
            out.extend(
                TransactionListing(
                    t.transactional_id, int(t.producer_id), t.transaction_state, node.id
                )
                for t in body.transaction_states
            )
        return sorted(out, key=lambda t: (t.coordinator_id, t.transactional_id))

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """The state of ``transactional_id`` as its coordinator holds it."""
        node = self._coordinator(transactional_id, key_type=1)
        body = self._client.send(
            node, ApiKey.DESCRIBE_TRANSACTIONS, transactional_ids=[transactional_id]
        )
        t = body.transaction_states[0]
        _check(t.error_code, None, f"DescribeTransactions {transactional_id}")
        # kio decodes the start time to a datetime (Kafka's -1, none, reaches it as the
        # epoch: see sluice.protocol.guard) and the timeout to a timedelta
        start = round(t.transaction_start_time.timestamp() * 1000)
        timeout_ms = round(t.transaction_timeout.total_seconds() * 1000)
        return TransactionDescription(
            coordinator_broker_id(node), t.transactional_id, int(t.producer_id),
            int(t.producer_epoch),
            t.transaction_state, timeout_ms, None if start <= 0 else start,
            [TopicPartition(x.topic, int(p)) for x in t.topics for p in x.partitions],
        )  # fmt: skip

    def describe_producers(
        self, partitions: Iterable[TopicPartition | tuple[str, int]], broker_id: int | None = None
    ) -> dict[TopicPartition, list[ProducerState]]:
        """The producers each partition's leader (or ``broker_id``) knows, with their open
        transactions (DescribeProducers, Kafka's ``describeProducers``); raises the first
        partition's error."""
        tps = [TopicPartition(*tp) for tp in partitions]
        by_node: dict[int, dict[str, list[int]]] = {}
        if broker_id is None:
            self._client.refresh_metadata(sorted({tp.topic for tp in tps}))
        for tp in tps:
            node = broker_id if broker_id is not None else self._client.leader_for(*tp)
            if node < 0:
                raise exception_for(ErrorCode.leader_not_available, f"no leader for {tp}")
            by_node.setdefault(node, {}).setdefault(tp.topic, []).append(tp.partition)
        out: dict[TopicPartition, list[ProducerState]] = {}
        for node, topics in by_node.items():
            body = self._client.send(
                node, ApiKey.DESCRIBE_PRODUCERS,
                topics=[{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
            )  # fmt: skip
            for topic in body.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, int(p.partition_index))
                    _check(p.error_code, p.error_message, f"DescribeProducers {tp}")
                    out[tp] = [_producer_state(s) for s in p.active_producers]
        return out

    def abort_transaction(
        self,
        partition: TopicPartition | tuple[str, int],
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
    ) -> None:
        """Abort a producer's open transaction on one partition: an ABORT marker written by
        its leader (WriteTxnMarkers, as Kafka's ``abortTransaction``; it needs
        CLUSTER_ACTION on the cluster). For a hanging transaction, which no coordinator
        will end."""
        tp = TopicPartition(*partition)
        self._client.refresh_metadata([tp.topic])
        node = self._client.leader_for(*tp)
        if node < 0:
            raise exception_for(ErrorCode.leader_not_available, f"no leader for {tp}")
        body = self._client.send(
            node, ApiKey.WRITE_TXN_MARKERS,
            markers=[{
                "producer_id": producer_id, "producer_epoch": producer_epoch,
                "transaction_result": False, "coordinator_epoch": coordinator_epoch,
                "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}],
            }],
        )  # fmt: skip
        for marker in body.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    _check(p.error_code, None, f"WriteTxnMarkers {tp}")

    def group_lag(self, group_id: str) -> dict[TopicPartition, int]:
        """Per partition: the high watermark minus the group's committed offset."""
        committed = self.list_group_offsets(group_id)
        if not committed:
            return {}
        ends = self.list_offsets(list(committed), "latest")
        return {tp: max((ends.get(tp) or 0) - om.offset, 0) for tp, om in sorted(committed.items())}

    # -- ACLs --------------------------------------------------------------------------

    def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Add ACL bindings (CreateAcls); raises the first binding's error."""
        bindings = list(bindings)
        body = self._client.send(
            None, ApiKey.CREATE_ACLS,
            creations=[
                {"resource_type": int(b.pattern.resource_type), "resource_name": b.pattern.name,
                 "resource_pattern_type": int(b.pattern.pattern_type),
                 "principal": b.entry.principal, "host": b.entry.host,
                 "operation": int(b.entry.operation),
                 "permission_type": int(b.entry.permission_type)}
                for b in bindings
            ],
        )  # fmt: skip
        for binding, result in zip(bindings, body.results, strict=False):
            _check(result.error_code, result.error_message, f"CreateAcls {binding}")

    def describe_acls(self, filter_: AclBindingFilter = ANY_FILTER) -> list[AclBinding]:
        """The ACL bindings the filter matches (DescribeAcls)."""
        body = self._client.send(None, ApiKey.DESCRIBE_ACLS, **_filter_fields(filter_))
        _check(body.error_code, body.error_message, "DescribeAcls")
        return [
            AclBinding(
                ResourcePattern(
                    ResourceType(int(r.resource_type)),
                    r.resource_name,
                    PatternType(int(r.pattern_type)),
                ),
                AccessControlEntry(
                    a.principal,
                    a.host,
                    AclOperation(int(a.operation)),
                    AclPermissionType(int(a.permission_type)),
                ),
            )
            for r in body.resources
            for a in r.acls
        ]

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        """Delete the ACL bindings the filters match (DeleteAcls); the deleted ones."""
        body = self._client.send(
            None, ApiKey.DELETE_ACLS, filters=[_filter_fields(f) for f in filters]
        )
        deleted = []
        for result in body.filter_results:
            _check(result.error_code, result.error_message, "DeleteAcls")
            for m in result.matching_acls:
                _check(m.error_code, m.error_message, "DeleteAcls")
                deleted.append(
                    AclBinding(
                        ResourcePattern(
                            ResourceType(int(m.resource_type)),
                            m.resource_name,
                            PatternType(int(m.pattern_type)),
                        ),
                        AccessControlEntry(
                            m.principal,
                            m.host,
                            AclOperation(int(m.operation)),
                            AclPermissionType(int(m.permission_type)),
                        ),
                    )
                )
        return deleted

    # -- SCRAM users ---------------------------------------------------------------------

    def alter_user_scram_credentials(
        self,
        upsertions: Iterable[UserScramCredentialUpsertion] = (),
        deletions: Iterable[UserScramCredentialDeletion] = (),
    ) -> None:
        """Create or replace users' SCRAM credentials, or delete them (Kafka's
        ``Admin.alterUserScramCredentials``): each password is salted (a random salt)
        and iterated here, and only the salted password travels. Raises the first
        user's error (UnacceptableCredentialException, ResourceNotFoundException, ...)."""
        ups = []
        for u in upsertions:
            salt = u.salt if u.salt is not None else secrets.token_bytes(32)
            ups.append({
                "name": u.user, "mechanism": mechanism_type(u.mechanism),
                "iterations": u.iterations, "salt": salt,
                "salted_password": salted_password(u.mechanism, u.password, salt, u.iterations),
            })  # fmt: skip
        dels = [{"name": d.user, "mechanism": mechanism_type(d.mechanism)} for d in deletions]
        body = self._client.send(
            None, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, upsertions=ups, deletions=dels
        )
        for r in body.results:
            _check(r.error_code, r.error_message, f"AlterUserScramCredentials {r.user}")

    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None
    ) -> dict[str, list[tuple[str, int]]]:
        """User -> their credentials' (mechanism, iterations); every user with one when
        ``users`` is None (Kafka's ``Admin.describeUserScramCredentials``)."""
        names = None if users is None else [{"name": u} for u in users]
        body = self._client.send(None, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, users=names)
        _check(body.error_code, body.error_message, "DescribeUserScramCredentials")
        out: dict[str, list[tuple[str, int]]] = {}
        for r in body.results:
            _check(r.error_code, r.error_message, f"DescribeUserScramCredentials {r.user}")
            out[r.user] = [
                (mechanism_from_type(int(c.mechanism)) or "UNKNOWN", int(c.iterations))
                for c in r.credential_infos
            ]
        return out

    # -- closing -----------------------------------------------------------------------

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
