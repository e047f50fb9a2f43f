"""``SingleNodeController``: the controller of a broker that is not in a cluster.

A single node is a one-broker cluster and its own active controller. It leads every
partition it hosts, so a preferred or unclean election is never needed; a partition can
only be "moved" to this broker, where it already is; and no reassignment is ever in
progress. It answers the controller's admin APIs (ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments) as a one-broker Kafka cluster
does, through the same callbacks as :class:`~sluice.controller.KafkaController`, at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sluice.base import TopicPartition
from sluice.controller.events import (
    AlterReassignmentsCallback,
    ApiError,
    ElectionType,
    ListReassignmentsCallback,
    ReplicaLeaderElectionResults,
)
from sluice.protocol import ErrorCode
from sluice.protocol.errors import KafkaError

if TYPE_CHECKING:
    from sluice.replication.replica_manager import ReplicaManager

__all__ = ["SingleNodeController"]


class SingleNodeController:
    """See the module."""

    __slots__ = ("broker_id", "replica_manager")

    def __init__(self, broker_id: int, replica_manager: ReplicaManager) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager

    @property
    def active_controller(self) -> SingleNodeController:
        return self

    def _hosted(self, tp: TopicPartition) -> bool:
        return self.replica_manager.get_partition(tp) is not None

    def elect_leaders(
        self,
        partitions: set[TopicPartition],
        election_type: ElectionType,
        callback: Callable[[ReplicaLeaderElectionResults], None],
    ) -> None:
        """This broker leads every partition: no election is needed."""
        missing = ErrorCode.unknown_topic_or_partition
        callback(
            {
                tp: KafkaError(code=ErrorCode.election_not_needed)
                if self._hosted(tp)
                else KafkaError("the partition does not exist", code=missing)
                for tp in partitions
            }
        )

    def alter_partition_reassignments(
        self,
        reassignments: dict[TopicPartition, tuple[int, ...] | None],
        callback: AlterReassignmentsCallback,
        *,
        allow_replication_factor_change: bool = True,
    ) -> None:
        """Moving a partition to this broker changes nothing (NONE), any other broker id
        is not alive (INVALID_REPLICA_ASSIGNMENT), and there is never a reassignment to
        cancel (NO_REASSIGNMENT_IN_PROGRESS)."""
        invalid = ErrorCode.invalid_replica_assignment
        results: dict[TopicPartition, ApiError] = {}
        for tp, target in reassignments.items():
            if target is not None and not target:
                results[tp] = ApiError(
                    invalid, "Empty replica list specified in partition reassignment."
                )
            elif target is not None and len(set(target)) != len(target):
                results[tp] = ApiError(invalid, f"Duplicate replica ids in {list(target)}")
            elif target is not None and any(r != self.broker_id for r in target):
                results[tp] = ApiError(
                    invalid, f"Replica assignment has brokers that are not alive: {list(target)}"
                )
            elif target is None:  # checked before the partition's existence, as in Kafka
                results[tp] = ApiError(ErrorCode.no_reassignment_in_progress)
            elif not self._hosted(tp):
                results[tp] = ApiError(
                    ErrorCode.unknown_topic_or_partition, "The partition does not exist."
                )
            else:
                results[tp] = ApiError()  # already there
        callback(results)

    def list_partition_reassignments(
        self, partitions: set[TopicPartition] | None, callback: ListReassignmentsCallback
    ) -> None:
        """Never a reassignment in progress."""
        callback({})
