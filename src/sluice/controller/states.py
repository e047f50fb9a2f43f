"""Partition and replica states with Kafka's valid previous states for each target.

These tables are the whole of what makes a transition valid; the state machines
(:mod:`.partition_state_machine`, :mod:`.replica_state_machine`) refuse the rest.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from sluice.base import TopicPartition

__all__ = [
    "PARTITION_VALID_PREVIOUS_STATES",
    "REPLICA_VALID_PREVIOUS_STATES",
    "PartitionAndReplica",
    "PartitionState",
    "ReplicaState",
]


class PartitionState(enum.Enum):
    """Kafka's ``PartitionState``s."""

    NEW_PARTITION = "NewPartition"
    ONLINE_PARTITION = "OnlinePartition"
    OFFLINE_PARTITION = "OfflinePartition"
    NON_EXISTENT_PARTITION = "NonExistentPartition"

    def __str__(self) -> str:
        return self.value


class ReplicaState(enum.Enum):
    """Kafka's ``ReplicaState``s."""

    NEW_REPLICA = "NewReplica"
    ONLINE_REPLICA = "OnlineReplica"
    OFFLINE_REPLICA = "OfflineReplica"
    REPLICA_DELETION_STARTED = "ReplicaDeletionStarted"
    REPLICA_DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    REPLICA_DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT_REPLICA = "NonExistentReplica"

    def __str__(self) -> str:
        return self.value


_P = PartitionState
PARTITION_VALID_PREVIOUS_STATES: dict[PartitionState, frozenset[PartitionState]] = {
    _P.NEW_PARTITION: frozenset({_P.NON_EXISTENT_PARTITION}),
    _P.ONLINE_PARTITION: frozenset({_P.NEW_PARTITION, _P.ONLINE_PARTITION, _P.OFFLINE_PARTITION}),
    _P.OFFLINE_PARTITION: frozenset({_P.NEW_PARTITION, _P.ONLINE_PARTITION, _P.OFFLINE_PARTITION}),
    _P.NON_EXISTENT_PARTITION: frozenset({_P.OFFLINE_PARTITION}),
}

_R = ReplicaState
REPLICA_VALID_PREVIOUS_STATES: dict[ReplicaState, frozenset[ReplicaState]] = {
    _R.NEW_REPLICA: frozenset({_R.NON_EXISTENT_REPLICA}),
    _R.ONLINE_REPLICA: frozenset(
        {_R.NEW_REPLICA, _R.ONLINE_REPLICA, _R.OFFLINE_REPLICA, _R.REPLICA_DELETION_INELIGIBLE}
    ),
    _R.OFFLINE_REPLICA: frozenset(
        {_R.NEW_REPLICA, _R.ONLINE_REPLICA, _R.OFFLINE_REPLICA, _R.REPLICA_DELETION_INELIGIBLE}
    ),
    _R.REPLICA_DELETION_STARTED: frozenset({_R.OFFLINE_REPLICA}),
    _R.REPLICA_DELETION_SUCCESSFUL: frozenset({_R.REPLICA_DELETION_STARTED}),
    _R.REPLICA_DELETION_INELIGIBLE: frozenset({_R.OFFLINE_REPLICA, _R.REPLICA_DELETION_STARTED}),
    _R.NON_EXISTENT_REPLICA: frozenset({_R.REPLICA_DELETION_SUCCESSFUL}),
}


class PartitionAndReplica(NamedTuple):
    """One replica of one partition: the key of the replica state machine."""

    topic_partition: TopicPartition
    replica: int

    def __str__(self) -> str:
        return f"[{self.topic_partition},{self.replica}]"
