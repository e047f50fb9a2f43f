"""Kafka's ZooKeeper layout (``kafka.zk.ZkData``): paths and the JSON Kafka 3.x writes.

Each ``*ZNode`` class is a namespace for one kind of znode: ``path(...)``, ``encode``
and ``decode``. JSON is written compactly with Kafka's keys and key order, so a real
Kafka tool reading this ZooKeeper finds what it expects.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from sluice.base import TopicPartition
from sluice.metastore import Stat

from .model import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)

__all__ = [
    "PERSISTENT_ZK_PATHS",
    "BrokerIdZNode",
    "BrokerIdsZNode",
    "ClusterIdZNode",
    "ConfigEntityChangeNotificationZNode",
    "ControllerEpochZNode",
    "ControllerZNode",
    "DeleteTopicsTopicZNode",
    "DeleteTopicsZNode",
    "IsrChangeNotificationSequenceZNode",
    "IsrChangeNotificationZNode",
    "LogDirEventNotificationSequenceZNode",
    "LogDirEventNotificationZNode",
    "PreferredReplicaElectionZNode",
    "ReassignPartitionsZNode",
    "TopicConfigZNode",
    "TopicPartitionStateZNode",
    "TopicPartitionZNode",
    "TopicPartitionsZNode",
    "TopicZNode",
    "TopicsZNode",
    "new_topic_id",
]


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _loads(data: bytes) -> Any:
    return json.loads(data.decode("utf-8")) if data else None


def new_topic_id() -> str:
    """A topic id as Kafka prints a ``Uuid``: URL-safe base64 of 16 bytes, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _partitions_json(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in partitions]


def _partitions_from_json(items: Iterable[Mapping[str, Any]]) -> set[TopicPartition]:
    return {TopicPartition(str(p["topic"]), int(p["partition"])) for p in items}


class ControllerZNode:
    """``/controller``: the ephemeral znode of the active controller."""

    path = "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int) -> bytes:
        return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})

    @staticmethod
    def decode(data: bytes) -> int | None:
        try:
            value = _loads(data)
        except ValueError:
            return None
        if isinstance(value, int):  # very old Kafka wrote the bare id
            return value
        if isinstance(value, dict) and isinstance(value.get("brokerid"), int):
            return int(value["brokerid"])
        return None


class ControllerEpochZNode:
    """``/controller_epoch``: the persistent controller epoch, a bare integer."""

    path = "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode()

    @staticmethod
    def decode(data: bytes) -> int:
        return int(data.decode())


class ClusterIdZNode:
    """``/cluster/id``: ``{"version":"1","id":"..."}``."""

    path = "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dumps({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes) -> str:
        return str(_loads(data)["id"])


class BrokerIdsZNode:
    """``/brokers/ids``: one ephemeral child per live broker."""

    path = "/brokers/ids"


class BrokerIdZNode:
    """``/brokers/ids/N``: a broker's registration (JSON version 5)."""

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BrokerIdsZNode.path}/{broker_id}"

    @staticmethod
    def encode(broker: Broker, timestamp_ms: int, jmx_port: int = -1) -> bytes:
        plaintext = next((e for e in broker.endpoints if e.security_protocol == "PLAINTEXT"), None)
        value: dict[str, Any] = {
            "features": {},
            "listener_security_protocol_map": {
                e.listener_name: e.security_protocol for e in broker.endpoints
            },
            "endpoints": [e.connection_string for e in broker.endpoints],
            "jmx_port": jmx_port,
            "port": plaintext.port if plaintext else -1,
            "host": plaintext.host if plaintext else None,
            "version": 5,
            "timestamp": str(timestamp_ms),
        }
        if broker.rack is not None:
            value["rack"] = broker.rack
        return _dumps(value)

    @staticmethod
    def decode(broker_id: int, data: bytes) -> Broker:
        value = _loads(data)
        protocols = value.get("listener_security_protocol_map") or {}
        endpoints = []
        for text in value.get("endpoints", []):
            listener, _, address = text.partition("://")
            host, _, port = address.rpartition(":")
            protocol = protocols.get(listener, listener)
            endpoints.append(EndPoint(host.strip("[]"), int(port), listener, protocol))
        if not endpoints and value.get("host"):
            endpoints.append(EndPoint(value["host"], int(value["port"])))
        return Broker(broker_id, tuple(endpoints), value.get("rack"))


class TopicsZNode:
    """``/brokers/topics``: one child per topic."""

    path = "/brokers/topics"


class TopicZNode:
    """``/brokers/topics/<topic>``: the replica assignment (JSON version 3, with topic id)."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.path}/{topic}"

    @staticmethod
    def encode(topic_id: str | None, assignment: Mapping[int, ReplicaAssignment]) -> bytes:
        ordered = sorted(assignment.items())
        value: dict[str, Any] = {
            "partitions": {str(p): list(a.replicas) for p, a in ordered},
            "adding_replicas": {
                str(p): list(a.adding_replicas) for p, a in ordered if a.adding_replicas
            },
            "removing_replicas": {
                str(p): list(a.removing_replicas) for p, a in ordered if a.removing_replicas
            },
            "version": 3,
        }
        if topic_id is not None:
            value["topic_id"] = topic_id
        return _dumps(value)

    @staticmethod
    def decode(data: bytes) -> tuple[str | None, dict[int, ReplicaAssignment]]:
        value = _loads(data) or {}
        adding = value.get("adding_replicas") or {}
        removing = value.get("removing_replicas") or {}
        assignment = {
            int(p): ReplicaAssignment(
                tuple(replicas), tuple(adding.get(p, ())), tuple(removing.get(p, ()))
            )
            for p, replicas in (value.get("partitions") or {}).items()
        }
        return value.get("topic_id"), assignment


class TopicPartitionsZNode:
    """``/brokers/topics/<topic>/partitions``."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"


class TopicPartitionZNode:
    """``/brokers/topics/<topic>/partitions/<partition>``."""

    @staticmethod
    def path(tp: TopicPartition) -> str:
        return f"{TopicPartitionsZNode.path(tp.topic)}/{tp.partition}"


class TopicPartitionStateZNode:
    """``.../partitions/<partition>/state``: leader, leader epoch, ISR, controller epoch."""

    @staticmethod
    def path(tp: TopicPartition) -> str:
        return f"{TopicPartitionZNode.path(tp)}/state"

    @staticmethod
    def encode(state: LeaderIsrAndControllerEpoch) -> bytes:
        lai = state.leader_and_isr
        value: dict[str, Any] = {
            "controller_epoch": state.controller_epoch,
            "leader": lai.leader,
            "version": 1,
            "leader_epoch": lai.leader_epoch,
            "isr": list(lai.isr),
        }
        if lai.leader_recovery_state:
            value["leader_recovery_state"] = lai.leader_recovery_state
        return _dumps(value)

    @staticmethod
    def decode(data: bytes, stat: Stat) -> LeaderIsrAndControllerEpoch:
        value = _loads(data)
        lai = LeaderAndIsr(
            leader=int(value["leader"]),
            isr=tuple(int(r) for r in value["isr"]),
            leader_epoch=int(value["leader_epoch"]),
            zk_version=stat.version,
            leader_recovery_state=int(value.get("leader_recovery_state", 0)),
        )
        return LeaderIsrAndControllerEpoch(lai, int(value["controller_epoch"]), stat.mzxid)


class ConfigEntityChangeNotificationZNode:
    """``/config/changes/config_change_<seq>``: ``{"version":2,"entity_path":"topics/t"}``,
    one per config change, which every broker watches."""

    path = "/config/changes"
    prefix = "config_change_"

    @staticmethod
    def encode(entity_path: str) -> bytes:
        return _dumps({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(data: bytes) -> str:
        return str((_loads(data) or {}).get("entity_path") or "")


class TopicConfigZNode:
    """``/config/topics/<topic>``: per-topic config overrides."""

    @staticmethod
    def path(topic: str) -> str:
        return f"/config/topics/{topic}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return _dumps({"version": 1, "config": dict(config)})

    @staticmethod
    def decode(data: bytes) -> dict[str, str]:
        return {str(k): str(v) for k, v in ((_loads(data) or {}).get("config") or {}).items()}


class EntityConfigZNode:
    """``/config/<entity path>``: a user's, client id's or (user, client id)'s dynamic
    config (``/config/users/alice``, ``/config/users/alice/clients/app``,
    ``/config/clients/<default>``), in the topic configs' format."""

    @staticmethod
    def path(entity_path: str) -> str:
        return f"/config/{entity_path}"

    encode = TopicConfigZNode.encode
    decode = TopicConfigZNode.decode


class DeleteTopicsZNode:
    """``/admin/delete_topics``: one child per topic queued for deletion."""

    path = "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    """``/admin/delete_topics/<topic>``."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{DeleteTopicsZNode.path}/{topic}"


class ReassignPartitionsZNode:
    """``/admin/reassign_partitions``: ``{"version":1,"partitions":[{..,"replicas":[..]}]}``."""

    path = "/admin/reassign_partitions"

    @staticmethod
    def encode(reassignment: Mapping[TopicPartition, Iterable[int]]) -> bytes:
        partitions = [
            {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
            for tp, replicas in sorted(reassignment.items())
        ]
        return _dumps({"version": 1, "partitions": partitions})

    @staticmethod
    def decode(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
        return {
            TopicPartition(str(p["topic"]), int(p["partition"])): tuple(p["replicas"])
            for p in (_loads(data) or {}).get("partitions", [])
        }


class PreferredReplicaElectionZNode:
    """``/admin/preferred_replica_election``: partitions whose preferred replica should lead."""

    path = "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return _dumps({"version": 1, "partitions": _partitions_json(sorted(partitions))})

    @staticmethod
    def decode(data: bytes) -> set[TopicPartition]:
        return _partitions_from_json((_loads(data) or {}).get("partitions", []))


class IsrChangeNotificationZNode:
    """``/isr_change_notification``: sequential children written by leaders on ISR change."""

    path = "/isr_change_notification"


class IsrChangeNotificationSequenceZNode:
    """``/isr_change_notification/isr_change_<seq>``: the partitions whose ISR changed."""

    SEQUENCE_NUMBER_PREFIX = "isr_change_"

    @staticmethod
    def path(sequence_number: str = "") -> str:
        prefix = IsrChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX
        return f"{IsrChangeNotificationZNode.path}/{prefix}{sequence_number}"

    @staticmethod
    def sequence_number(path_or_name: str) -> str:
        prefix = IsrChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX
        return path_or_name.rsplit("/", 1)[-1][len(prefix) :]

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return _dumps({"version": 1, "partitions": _partitions_json(sorted(partitions))})

    @staticmethod
    def decode(data: bytes) -> set[TopicPartition]:
        return _partitions_from_json((_loads(data) or {}).get("partitions", []))


class LogDirEventNotificationZNode:
    """``/log_dir_event_notification``: sequential children written by brokers whose log
    dir failed."""

    path = "/log_dir_event_notification"


class LogDirEventNotificationSequenceZNode:
    """``/log_dir_event_notification/log_dir_event_<seq>``: the broker with a failed log
    dir (Kafka's JSON: version, broker, event 1 for a log dir failure)."""

    SEQUENCE_NUMBER_PREFIX = "log_dir_event_"
    LOG_DIR_FAILURE_EVENT = 1

    @staticmethod
    def path(sequence_number: str = "") -> str:
        prefix = LogDirEventNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX
        return f"{LogDirEventNotificationZNode.path}/{prefix}{sequence_number}"

    @staticmethod
    def sequence_number(path_or_name: str) -> str:
        prefix = LogDirEventNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX
        return path_or_name.rsplit("/", 1)[-1][len(prefix) :]

    @staticmethod
    def encode(broker_id: int) -> bytes:
        event = LogDirEventNotificationSequenceZNode.LOG_DIR_FAILURE_EVENT
        return _dumps({"version": 1, "broker": broker_id, "event": event})

    @staticmethod
    def decode(data: bytes) -> int | None:
        broker = (_loads(data) or {}).get("broker")
        return broker if isinstance(broker, int) else None


# The persistent paths Kafka creates at startup (ZkData.PersistentZkPaths).
PERSISTENT_ZK_PATHS = (
    "/consumers",
    BrokerIdsZNode.path,
    TopicsZNode.path,
    "/config/changes",
    "/config/topics",
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
    DeleteTopicsZNode.path,
    "/brokers/seqid",
    IsrChangeNotificationZNode.path,
    "/latest_producer_id_block",
    LogDirEventNotificationZNode.path,
)
