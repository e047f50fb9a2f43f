"""The controller's events (Kafka's ``ControllerEvent`` subclasses).

ZooKeeper watches, broker requests, timers and session changes never touch the
controller's state directly: they put one of these on the
:class:`~.event_manager.ControllerEventManager` queue, and the event thread processes
them one at a time, in order.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sluice.base import TopicPartition

from ..protocol.errors import ErrorCode
from .model import ReplicaAssignment

__all__ = [
    "AlterReassignmentsCallback",
    "ApiError",
    "ApiPartitionReassignment",
    "AutoPreferredReplicaLeaderElection",
    "BrokerChange",
    "ControlledShutdown",
    "ControlledShutdownResult",
    "ControllerChange",
    "ControllerEvent",
    "ElectionTrigger",
    "ElectionType",
    "Expire",
    "IsrChangeNotification",
    "LeaderAndIsrResponseReceived",
    "ListPartitionReassignments",
    "ListReassignmentsCallback",
    "LogDirEventNotification",
    "PartitionModifications",
    "Reelect",
    "RegisterBrokerAndReelect",
    "ReplicaLeaderElection",
    "ReplicaLeaderElectionResults",
    "ShutdownEventThread",
    "Startup",
    "TopicChange",
    "TopicDeletion",
    "TopicDeletionStopReplicaResponseReceived",
]


class ElectionType(enum.Enum):
    """Which leaders an election asks for (Kafka's ``ElectionType``)."""

    PREFERRED = 0
    UNCLEAN = 1


class ElectionTrigger(enum.Enum):
    """Who asked for a replica leader election."""

    ZK_TRIGGERED = "zk"
    ADMIN_CLIENT_TRIGGERED = "admin"
    AUTO_TRIGGERED = "auto"


@dataclass(frozen=True, slots=True)
class ControlledShutdownResult:
    """What a ControlledShutdown response carries: an error and the partitions still led."""

    error_code: ErrorCode
    partitions_remaining: frozenset[TopicPartition] = frozenset()
    message: str = ""


@dataclass(frozen=True, slots=True)
class ApiError:
    """An error code with an optional message, as an admin API answers it (``ApiError``)."""

    code: ErrorCode = ErrorCode.none
    message: str | None = None

    @property
    def is_success(self) -> bool:
        return self.code is ErrorCode.none


# Either the outcome per partition, or one error for the whole request (NOT_CONTROLLER).
AlterReassignmentsCallback = Callable[[Mapping[TopicPartition, ApiError] | ApiError], None]
ListReassignmentsCallback = Callable[[Mapping[TopicPartition, ReplicaAssignment] | ApiError], None]

# Per partition: the new leader's id, or the error (a KafkaError carrying its code).
ReplicaLeaderElectionResults = Mapping[TopicPartition, int | Exception]


class ControllerEvent:
    """Base class of controller events."""

    __slots__ = ()

    def __repr__(self) -> str:
        return type(self).__name__


class Startup(ControllerEvent):
    """The controller module started: watch /controller and try to get elected."""

    __slots__ = ()


class ControllerChange(ControllerEvent):
    """/controller was created or changed: resign if it is no longer us."""

    __slots__ = ()


class Reelect(ControllerEvent):
    """/controller went away: resign if needed and run for election."""

    __slots__ = ()


class RegisterBrokerAndReelect(ControllerEvent):
    """A new session after expiry: register the broker again, then re-elect."""

    __slots__ = ()


class Expire(ControllerEvent):
    """The session expired: resign at once (queued ahead of everything else)."""

    __slots__ = ()


class BrokerChange(ControllerEvent):
    """/brokers/ids changed: brokers joined, left or bounced."""

    __slots__ = ()


class TopicChange(ControllerEvent):
    """/brokers/topics changed: topics were created or removed."""

    __slots__ = ()


class TopicDeletion(ControllerEvent):
    """/admin/delete_topics changed: topics were queued for deletion."""

    __slots__ = ()


class IsrChangeNotification(ControllerEvent):
    """Leaders changed ISRs and wrote /isr_change_notification entries."""

    __slots__ = ()


class LogDirEventNotification(ControllerEvent):
    """Brokers wrote /log_dir_event_notification entries: a log dir of theirs failed."""

    __slots__ = ()


class AutoPreferredReplicaLeaderElection(ControllerEvent):
    """The periodic auto.leader.rebalance check."""

    __slots__ = ()


class ShutdownEventThread(ControllerEvent):
    """Stop the event thread (always the last event processed)."""

    __slots__ = ()


@dataclass(slots=True, repr=True)
class PartitionModifications(ControllerEvent):
    """/brokers/topics/<topic> changed: partitions may have been added."""

    topic: str


@dataclass(slots=True, repr=True)
class ReplicaLeaderElection(ControllerEvent):
    """Elect leaders for ``partitions`` (None: read /admin/preferred_replica_election)."""

    partitions: frozenset[TopicPartition] | None = None
    election_type: ElectionType = ElectionType.PREFERRED
    trigger: ElectionTrigger = ElectionTrigger.ZK_TRIGGERED
    callback: Callable[[ReplicaLeaderElectionResults], None] | None = None


@dataclass(slots=True, repr=True)
class ControlledShutdown(ControllerEvent):
    """A broker asks to shut down: move its leaders away, then answer ``callback``."""

    broker_id: int
    broker_epoch: int
    callback: Callable[[ControlledShutdownResult], None]


@dataclass(slots=True, repr=True)
class TopicDeletionStopReplicaResponseReceived(ControllerEvent):
    """A broker answered a StopReplica(delete) request: the error per partition."""

    broker_id: int
    partition_errors: Mapping[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass(slots=True, repr=True)
class LeaderAndIsrResponseReceived(ControllerEvent):
    """A broker answered LeaderAndIsr: the error per partition (KAFKA_STORAGE_ERROR for
    a replica in one of its offline log dirs)."""

    broker_id: int
    error_code: ErrorCode = ErrorCode.none
    partition_errors: Mapping[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass(slots=True, repr=True)
class ApiPartitionReassignment(ControllerEvent):
    """AlterPartitionReassignments: move each partition to its target replicas (None:
    cancel the reassignment in progress), then answer ``callback``."""

    reassignments: Mapping[TopicPartition, tuple[int, ...] | None]
    callback: AlterReassignmentsCallback
    allow_replication_factor_change: bool = True


@dataclass(slots=True, repr=True)
class ListPartitionReassignments(ControllerEvent):
    """ListPartitionReassignments: the reassignments in progress among ``partitions``
    (None: all of them)."""

    partitions: frozenset[TopicPartition] | None
    callback: ListReassignmentsCallback
