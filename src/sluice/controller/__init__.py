"""The cluster controller, sans I/O: Kafka's ZooKeeper-based controller in Python.

:class:`KafkaController` is elected through a coordination store
(:mod:`sluice.metastore`), processes events on one thread
(:class:`ControllerEventManager`), drives the :class:`PartitionStateMachine` and
:class:`ReplicaStateMachine` with Kafka's leader election strategies, and emits
LeaderAndIsr / UpdateMetadata / StopReplica requests through a
:class:`ControllerChannel` that the broker implements.

The names below are imported on first use (PEP 562), so that a single-node broker,
which never runs a controller, does not pay for importing it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .admin_zk_client import AdminZkClient, assign_replicas_to_brokers
    from .context import ControllerContext
    from .controller_config import ControllerConfig
    from .errors import (
        BrokerNotAvailableError,
        ControllerMovedError,
        IllegalStateError,
        StaleBrokerEpochError,
        StaleControllerEpochError,
        StateChangeFailedError,
    )
    from .event_manager import ControllerEventManager, ControllerEventProcessor, QueuedEvent
    from .events import (
        ControlledShutdownResult,
        ControllerEvent,
        ElectionTrigger,
        ElectionType,
        ReplicaLeaderElectionResults,
    )
    from .fencing import ControllerEpochChecker
    from .kafka_controller import AUTO_LEADER_REBALANCE_TASK, KafkaController
    from .kafka_zk_client import KafkaZkClient, UpdateLeaderAndIsrResult
    from .leader_election import (
        ControlledShutdownPartitionLeaderElectionStrategy,
        OfflinePartitionLeaderElectionStrategy,
        PreferredReplicaPartitionLeaderElectionStrategy,
        ReassignPartitionLeaderElectionStrategy,
        controlled_shutdown_partition_leader_election,
        offline_partition_leader_election,
        preferred_replica_partition_leader_election,
        reassign_partition_leader_election,
    )
    from .model import (
        Broker,
        EndPoint,
        LeaderAndIsr,
        LeaderIsrAndControllerEpoch,
        ReplicaAssignment,
    )
    from .partition_state_machine import PartitionStateMachine
    from .replica_state_machine import ReplicaStateMachine
    from .request_batch import ControllerBrokerRequestBatch
    from .requests import (
        ControllerChannel,
        ControllerRequest,
        ControllerResponse,
        LeaderAndIsrPartitionState,
        LeaderAndIsrRequest,
        LeaderAndIsrResponse,
        RecordingControllerChannel,
        StopReplicaPartitionState,
        StopReplicaRequest,
        StopReplicaResponse,
        UpdateMetadataPartitionState,
        UpdateMetadataRequest,
        UpdateMetadataResponse,
    )
    from .states import PartitionAndReplica, PartitionState, ReplicaState

# name -> the submodule defining it
_SUBMODULES = {
    "AdminZkClient": "admin_zk_client",
    "assign_replicas_to_brokers": "admin_zk_client",
    "ControllerContext": "context",
    "ControllerConfig": "controller_config",
    "BrokerNotAvailableError": "errors",
    "ControllerMovedError": "errors",
    "IllegalStateError": "errors",
    "StaleBrokerEpochError": "errors",
    "StaleControllerEpochError": "errors",
    "StateChangeFailedError": "errors",
    "ControllerEventManager": "event_manager",
    "ControllerEventProcessor": "event_manager",
    "QueuedEvent": "event_manager",
    "ControlledShutdownResult": "events",
    "ControllerEvent": "events",
    "ElectionTrigger": "events",
    "ElectionType": "events",
    "ReplicaLeaderElectionResults": "events",
    "ControllerEpochChecker": "fencing",
    "AUTO_LEADER_REBALANCE_TASK": "kafka_controller",
    "KafkaController": "kafka_controller",
    "KafkaZkClient": "kafka_zk_client",
    "UpdateLeaderAndIsrResult": "kafka_zk_client",
    "ControlledShutdownPartitionLeaderElectionStrategy": "leader_election",
    "OfflinePartitionLeaderElectionStrategy": "leader_election",
    "PreferredReplicaPartitionLeaderElectionStrategy": "leader_election",
    "ReassignPartitionLeaderElectionStrategy": "leader_election",
    "controlled_shutdown_partition_leader_election": "leader_election",
    "offline_partition_leader_election": "leader_election",
    "preferred_replica_partition_leader_election": "leader_election",
    "reassign_partition_leader_election": "leader_election",
    "Broker": "model",
    "EndPoint": "model",
    "LeaderAndIsr": "model",
    "LeaderIsrAndControllerEpoch": "model",
    "ReplicaAssignment": "model",
    "PartitionStateMachine": "partition_state_machine",
    "ReplicaStateMachine": "replica_state_machine",
    "ControllerBrokerRequestBatch": "request_batch",
    "ControllerChannel": "requests",
    "ControllerRequest": "requests",
    "ControllerResponse": "requests",
    "LeaderAndIsrPartitionState": "requests",
    "LeaderAndIsrRequest": "requests",
    "LeaderAndIsrResponse": "requests",
    "RecordingControllerChannel": "requests",
    "StopReplicaPartitionState": "requests",
    "StopReplicaRequest": "requests",
    "StopReplicaResponse": "requests",
    "UpdateMetadataPartitionState": "requests",
    "UpdateMetadataRequest": "requests",
    "UpdateMetadataResponse": "requests",
    "PartitionAndReplica": "states",
    "PartitionState": "states",
    "ReplicaState": "states",
}

__all__ = [
    "AUTO_LEADER_REBALANCE_TASK",
    "AdminZkClient",
    "Broker",
    "BrokerNotAvailableError",
    "ControlledShutdownPartitionLeaderElectionStrategy",
    "ControlledShutdownResult",
    "ControllerBrokerRequestBatch",
    "ControllerChannel",
    "ControllerConfig",
    "ControllerContext",
    "ControllerEpochChecker",
    "ControllerEvent",
    "ControllerEventManager",
    "ControllerEventProcessor",
    "ControllerMovedError",
    "ControllerRequest",
    "ControllerResponse",
    "ElectionTrigger",
    "ElectionType",
    "EndPoint",
    "IllegalStateError",
    "KafkaController",
    "KafkaZkClient",
    "LeaderAndIsr",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "LeaderIsrAndControllerEpoch",
    "OfflinePartitionLeaderElectionStrategy",
    "PartitionAndReplica",
    "PartitionState",
    "PartitionStateMachine",
    "PreferredReplicaPartitionLeaderElectionStrategy",
    "QueuedEvent",
    "ReassignPartitionLeaderElectionStrategy",
    "RecordingControllerChannel",
    "ReplicaAssignment",
    "ReplicaLeaderElectionResults",
    "ReplicaState",
    "ReplicaStateMachine",
    "StaleBrokerEpochError",
    "StaleControllerEpochError",
    "StateChangeFailedError",
    "StopReplicaPartitionState",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "UpdateLeaderAndIsrResult",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
    "assign_replicas_to_brokers",
    "controlled_shutdown_partition_leader_election",
    "offline_partition_leader_election",
    "preferred_replica_partition_leader_election",
    "reassign_partition_leader_election",
]


def __getattr__(name: str) -> Any:
    submodule = _SUBMODULES.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
