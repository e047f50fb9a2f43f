"""FindCoordinator (10): which broker coordinates a group or a transactional id (v0-v3
one key, v4+ a batch)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sluice.coordinator.group import GROUP_METADATA_TOPIC_NAME
from sluice.protocol import ErrorCode, Request
from sluice.server.messages import build, field
from sluice.server.txn_runtime import ensure_transaction_state

if TYPE_CHECKING:
    from sluice.server.broker import Broker

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def _coordinator(broker: Broker, key_type: int, key: str) -> dict[str, Any]:
    host, port = broker.advertised[0]
    if key_type == GROUP_KEY_TYPE and broker.cluster is not None:
        return _cluster_group_coordinator(broker, key)
    if key_type == GROUP_KEY_TYPE:
        coordinator = broker.group_coordinator
        if not coordinator.is_active or not coordinator.group_manager.is_group_local(key):
            message = "The coordinator is not available."
            return _error(key, ErrorCode.coordinator_not_available, message)
        return {
            "key": key, "node_id": broker.broker_id, "host": host, "port": port,
            "error_code": ErrorCode.none, "error_message": None,
        }  # fmt: skip
    if key_type == TRANSACTION_KEY_TYPE and broker.cluster is not None:
        return _cluster_txn_coordinator(broker, key)
    if key_type == TRANSACTION_KEY_TYPE:
        ensure_transaction_state(broker)
        if not broker.txn_coordinator.is_local(key):
            message = "The coordinator is not available."
            return _error(key, ErrorCode.coordinator_not_available, message)
        return {
            "key": key, "node_id": broker.broker_id, "host": host, "port": port,
            "error_code": ErrorCode.none, "error_message": None,
        }  # fmt: skip
    return _error(key, ErrorCode.invalid_request, f"Unknown coordinator key type {key_type}.")


def _cluster_group_coordinator(broker: Broker, key: str) -> dict[str, Any]:
    """In a cluster the coordinator is the leader of the group's offsets partition."""
    from sluice.server.group_runtime import OFFSETS_TOPIC_CONFIGS

    coordinator = broker.group_coordinator
    return _leader_of(
        broker, key, GROUP_METADATA_TOPIC_NAME, coordinator.partition_for(key),
        coordinator.group_manager.num_partitions,
        broker.config["offsets.topic.replication.factor"], OFFSETS_TOPIC_CONFIGS,
    )  # fmt: skip


def _cluster_txn_coordinator(broker: Broker, key: str) -> dict[str, Any]:
    """In a cluster the transaction coordinator is the leader of the id's
    ``__transaction_state`` partition (created on first use, like the offsets topic)."""
    from sluice.coordinator.transaction import TRANSACTION_STATE_TOPIC_NAME
    from sluice.server.txn_runtime import TRANSACTION_TOPIC_CONFIGS

    coordinator = broker.txn_coordinator
    return _leader_of(
        broker, key, TRANSACTION_STATE_TOPIC_NAME, coordinator.partition_for(key),
        coordinator.config.num_partitions,
        broker.config["transaction.state.log.replication.factor"], TRANSACTION_TOPIC_CONFIGS,
    )  # fmt: skip


def _leader_of(
    broker: Broker, key: str, topic: str, partition: int, num_partitions: int,
    replication_factor: int, configs: Mapping[str, str],
) -> dict[str, Any]:  # fmt: skip
    """The live leader of an internal topic's partition (the topic is created when
    missing), or COORDINATOR_NOT_AVAILABLE for the client to retry."""
    assert broker.cluster is not None
    leader = broker.cluster.internal_topic_leader(
        topic, partition, num_partitions, replication_factor, dict(configs)
    )
    if leader is None or not leader.endpoints:
        return _error(key, ErrorCode.coordinator_not_available, "The coordinator is not available.")
    ep = leader.endpoints[0]
    return {
        "key": key, "node_id": leader.id, "host": ep.host, "port": ep.port,
        "error_code": ErrorCode.none, "error_message": None,
    }  # fmt: skip


def _error(key: str, code: ErrorCode, message: str) -> dict[str, Any]:
    return {
        "key": key, "node_id": -1, "host": "", "port": -1,
        "error_code": code, "error_message": message,
    }  # fmt: skip


def handle(broker: Broker, request: Request) -> Any:
    body: Any = request.body
    key_type = int(field(body, "key_type", GROUP_KEY_TYPE))
    if request.api_version >= 4:
        coordinators = [_coordinator(broker, key_type, key) for key in body.coordinator_keys]
        return build(request.response_type, throttle_time=0, coordinators=coordinators)
    result = _coordinator(broker, key_type, body.key)
    return build(request.response_type, throttle_time=0, **result)
