"""The cluster controller, sans I/O: Kafka's ZooKeeper-based controller in Python.

:class:`KafkaController` is elected through a coordination store
(:mod:`sluice.coordination`), processes events on one thread
(:class:`ControllerEventManager`), drives the :class:`PartitionStateMachine` and
:class:`ReplicaStateMachine` with Kafka's leader election strategies, and emits
LeaderAndIsr / UpdateMetadata / StopReplica requests through a
:class:`ControllerChannel` that the broker implements.
"""

from __future__ import annotations

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
