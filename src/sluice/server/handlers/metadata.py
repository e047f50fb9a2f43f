"""Metadata (3): brokers, controller and the partitions of the requested topics."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ErrorCode, Request
from sluice.server.messages import build, field
from sluice.server.topics import InvalidTopicError, TopicInfo, validate_topic_name

if TYPE_CHECKING:
    from sluice.server.broker import Broker


def _topic_entry(broker: Broker, info: TopicInfo) -> dict[str, Any]:
    partitions = []
    for p, replicas in sorted(info.assignment.items()):
        partition = broker.replica_manager.get_partition(TopicPartition(info.name, p))
        leader = partition.leader_id if partition is not None else -1
        epoch = partition.leader_epoch if partition is not None else -1
        isr = sorted(partition.isr) if partition is not None else []
        partitions.append(
            {
                "error_code": ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available,
                "partition_index": p,
                "leader_id": leader,
                "leader_epoch": epoch,
                "replica_nodes": replicas,
                "isr_nodes": isr,
                "offline_replicas": [],
            }
        )
    return {
        "error_code": ErrorCode.none,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.is_internal,
        "partitions": partitions,
    }


def _error_entry(name: str | None, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": None, "partitions": []}


def _cluster_topic_entry(broker: Broker, name: str) -> dict[str, Any] | None:
    cluster = broker.cluster
    states = sorted(
        (s for tp, s in cluster.partition_states.items() if tp.topic == name),
        key=lambda s: s.topic_partition.partition,
    )
    if not states:
        return None
    live = set(cluster.live_brokers)
    partitions = []
    for s in states:
        leader = s.leader if s.leader in live else -1
        partitions.append(
            {
                "error_code": ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available,
                "partition_index": s.topic_partition.partition,
                "leader_id": leader,
                "leader_epoch": s.leader_epoch,
                "replica_nodes": list(s.replicas),
                "isr_nodes": list(s.isr),
                "offline_replicas": [r for r in s.replicas if r not in live],
            }
        )
    return {
        "error_code": ErrorCode.none,
        "name": name,
        "topic_id": cluster.topic_ids.get(name),
        "is_internal": name.startswith("__"),
        "partitions": partitions,
    }


def _handle_cluster(broker: Broker, request: Request) -> Any:
    cluster = broker.cluster
    body: Any = request.body
    requested = field(body, "topics")
    all_topics = requested is None or (request.api_version == 0 and not requested)
    allow_create = field(body, "allow_auto_topic_creation", True)
    topics: list[dict[str, Any]] = []
    if all_topics:
        names = sorted({tp.topic for tp in cluster.partition_states})
        topics = [e for e in (_cluster_topic_entry(broker, n) for n in names) if e is not None]
    else:
        for item in requested:
            name = field(item, "name")
            if name is None:
                topic_id = field(item, "topic_id")
                name = next((t for t, i in cluster.topic_ids.items() if i == topic_id), None)
            if name is None:
                topics.append(_error_entry(None, ErrorCode.unknown_topic_id))
                continue
            try:
                validate_topic_name(name)
            except InvalidTopicError:
                topics.append(_error_entry(name, ErrorCode.invalid_topic_exception))
                continue
            entry = _cluster_topic_entry(broker, name)
            if entry is None:
                created = allow_create and broker.config["auto.create.topics.enable"]
                if created:
                    broker.maybe_auto_create(name)
                code = ErrorCode.leader_not_available if created else (
                    ErrorCode.unknown_topic_or_partition
                )  # fmt: skip
                entry = _error_entry(name, code)
            topics.append(entry)
    brokers = [
        {"node_id": b.id, "host": b.endpoints[0].host, "port": b.endpoints[0].port,
         "rack": b.rack}
        for b in sorted(cluster.live_brokers.values(), key=lambda b: b.id) if b.endpoints
    ]  # fmt: skip
    if not brokers:
        host, port = broker.advertised[0]
        brokers = [{"node_id": broker.broker_id, "host": host, "port": port, "rack": None}]
    return build(
        request.response_type,
        throttle_time=0,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=cluster.active_controller_id,
        topics=topics,
        cluster_authorized_operations=-2147483648,
    )


def handle(broker: Broker, request: Request) -> Any:
    if broker.cluster is not None:
        return _handle_cluster(broker, request)
    body: Any = request.body
    requested = field(body, "topics")
    # v0: an empty list means all topics; v1+: null means all topics.
    all_topics = requested is None or (request.api_version == 0 and not requested)
    allow_create = field(body, "allow_auto_topic_creation", True)
    topics: list[dict[str, Any]] = []
    if all_topics:
        topics = [_topic_entry(broker, t) for t in broker.registry.topics.values()]
    else:
        for item in requested:
            name = field(item, "name")
            topic_id = field(item, "topic_id")
            info = broker.registry.by_id(topic_id) if name is None and topic_id else None
            if info is None and name is not None:
                try:
                    validate_topic_name(name)
                except InvalidTopicError:
                    topics.append(_error_entry(name, ErrorCode.invalid_topic_exception))
                    continue
                info = broker.maybe_auto_create(name) if allow_create else broker.registry.get(name)
            if info is None:
                topics.append(_error_entry(name, ErrorCode.unknown_topic_or_partition))
            else:
                topics.append(_topic_entry(broker, info))
    host, port = broker.advertised[0]
    return build(
        request.response_type,
        throttle_time=0,
        brokers=[{"node_id": broker.broker_id, "host": host, "port": port, "rack": None}],
        cluster_id=broker.cluster_id,
        controller_id=broker.broker_id,
        topics=topics,
        cluster_authorized_operations=-2147483648,
    )
