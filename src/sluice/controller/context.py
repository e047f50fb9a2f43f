"""The controller's in-memory view of the cluster (Kafka's ``ControllerContext``).

Only the controller's event thread touches it, so it has no locks: live brokers and
their epochs, the replicas in their offline log dirs, topics and replica assignments,
each partition's leader and ISR, the partition and replica states, and the topics
queued for deletion.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sluice.base import TopicPartition

from .model import (
    INITIAL_CONTROLLER_EPOCH,
    INITIAL_CONTROLLER_EPOCH_ZK_VERSION,
    Broker,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from .states import PartitionAndReplica, PartitionState, ReplicaState

__all__ = ["ControllerContext"]


class ControllerContext:
    """Everything the active controller knows, read from ZooKeeper on failover."""

    def __init__(self) -> None:
        self.epoch = INITIAL_CONTROLLER_EPOCH
        self.epoch_zk_version = INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        self.reset_context()

    def reset_context(self) -> None:
        """Forget everything (on resignation); the epoch is kept."""
        self.live_brokers: dict[int, Broker] = {}
        self.live_broker_epochs: dict[int, int] = {}
        self.shutting_down_broker_ids: set[int] = set()
        self.all_topics: set[str] = set()
        self.topic_ids: dict[str, str] = {}
        self.partition_assignments: dict[str, dict[int, ReplicaAssignment]] = {}
        self.partition_leadership_info: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.partition_states: dict[TopicPartition, PartitionState] = {}
        self.replica_states: dict[PartitionAndReplica, ReplicaState] = {}
        self.topics_to_be_deleted: set[str] = set()
        self.topics_with_deletion_started: set[str] = set()
        self.topics_ineligible_for_deletion: set[str] = set()
        self.partitions_being_reassigned: set[TopicPartition] = set()
        # Per broker, the replicas it answered KAFKA_STORAGE_ERROR for (an offline log dir).
        self.replicas_on_offline_dirs: dict[int, set[TopicPartition]] = {}

    # -- brokers --------------------------------------------------------------------
    @property
    def live_broker_ids(self) -> set[int]:
        """Live brokers that are not shutting down."""
        return set(self.live_brokers) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    def add_live_brokers(self, brokers: Mapping[Broker, int]) -> None:
        for broker, epoch in brokers.items():
            self.live_brokers[broker.id] = broker
            self.live_broker_epochs[broker.id] = epoch

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self.live_brokers.pop(broker_id, None)
            self.live_broker_epochs.pop(broker_id, None)

    def is_replica_online(
        self, broker_id: int, tp: TopicPartition, include_shutting_down: bool = False
    ) -> bool:
        """Whether the broker is live (or shutting down, with ``include_shutting_down``)
        and its replica of ``tp`` is not in one of its offline log dirs."""
        if include_shutting_down:
            live = broker_id in self.live_brokers
        else:
            live = broker_id in self.live_broker_ids
        offline = self.replicas_on_offline_dirs.get(broker_id)
        return live and (offline is None or tp not in offline)

    def online_replicas(self, tp: TopicPartition, include_shutting_down: bool = False) -> set[int]:
        """The replicas of ``tp`` that are online (:meth:`is_replica_online`)."""
        return {
            r for r in self.partition_replica_assignment(tp)
            if self.is_replica_online(r, tp, include_shutting_down)
        }  # fmt: skip

    # -- topics and assignments -----------------------------------------------------
    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        assignment = self.partition_assignments.get(tp.topic, {}).get(tp.partition)
        return assignment.replicas if assignment is not None else ()

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        assignment = self.partition_assignments.get(tp.topic, {}).get(tp.partition)
        return assignment if assignment is not None else ReplicaAssignment(())

    def partition_full_replica_assignment_for_topic(
        self, topic: str
    ) -> dict[int, ReplicaAssignment]:
        return dict(self.partition_assignments.get(topic, {}))

    def update_partition_full_replica_assignment(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        self.partition_assignments.setdefault(tp.topic, {})[tp.partition] = assignment

    def partitions_for_topic(self, topic: str) -> set[TopicPartition]:
        return {TopicPartition(topic, p) for p in self.partition_assignments.get(topic, {})}

    def all_partitions(self) -> set[TopicPartition]:
        return {
            TopicPartition(topic, p)
            for topic, parts in self.partition_assignments.items()
            for p in parts
        }

    def partitions_on_broker(self, broker_id: int) -> set[TopicPartition]:
        return {
            tp for tp in self.all_partitions() if broker_id in self.partition_replica_assignment(tp)
        }

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> set[PartitionAndReplica]:
        wanted = set(broker_ids)
        return {
            PartitionAndReplica(tp, r)
            for tp in self.all_partitions()
            for r in self.partition_replica_assignment(tp)
            if r in wanted
        }

    def replicas_for_partition(
        self, partitions: Iterable[TopicPartition]
    ) -> set[PartitionAndReplica]:
        return {
            PartitionAndReplica(tp, r)
            for tp in partitions
            for r in self.partition_replica_assignment(tp)
        }

    def replicas_for_topic(self, topic: str) -> set[PartitionAndReplica]:
        return self.replicas_for_partition(self.partitions_for_topic(topic))

    def partitions_led_by_broker(self, broker_id: int) -> set[TopicPartition]:
        return {
            tp
            for tp, info in self.partition_leadership_info.items()
            if info.leader_and_isr.leader == broker_id
        }

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_for_topic(topic):
            self.partition_leadership_info.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
        for replica in [r for r in self.replica_states if r.topic_partition.topic == topic]:
            del self.replica_states[replica]
        self.partition_assignments.pop(topic, None)
        self.all_topics.discard(topic)
        self.topic_ids.pop(topic, None)

    # -- states ---------------------------------------------------------------------
    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, PartitionState.NON_EXISTENT_PARTITION)

    def replica_state(self, replica: PartitionAndReplica) -> ReplicaState:
        return self.replica_states.get(replica, ReplicaState.NON_EXISTENT_REPLICA)

    def partitions_in_states(self, *states: PartitionState) -> set[TopicPartition]:
        return {tp for tp, state in self.partition_states.items() if state in states}

    def replicas_in_state(self, topic: str, state: ReplicaState) -> set[PartitionAndReplica]:
        return {r for r in self.replicas_for_topic(topic) if self.replica_state(r) is state}

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return bool(self.replicas_in_state(topic, state))

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return all(self.replica_state(r) is state for r in self.replicas_for_topic(topic))

    # -- topic deletion -------------------------------------------------------------
    def queue_topic_deletion(self, topics: Iterable[str]) -> None:
        self.topics_to_be_deleted.update(topics)

    def begin_topic_deletion(self, topics: Iterable[str]) -> None:
        self.topics_with_deletion_started.update(topics)

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return topic in self.topics_with_deletion_started
