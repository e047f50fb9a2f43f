"""Topic deletion (Kafka's ``TopicDeletionManager``).

A topic queued in /admin/delete_topics is deleted in steps: its partitions go
Offline then NonExistent, brokers get UpdateMetadata with leader -2, live replicas go
OfflineReplica then ReplicaDeletionStarted (StopReplica with ``delete_partition``).
When every replica answered successfully the topic's znodes are removed. Replicas on
dead brokers make the topic ineligible until those brokers return; failed replicas
are retried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from sluice.base import TopicPartition

from .context import ControllerContext
from .partition_state_machine import PartitionStateMachine
from .replica_state_machine import ReplicaStateMachine
from .states import PartitionAndReplica, PartitionState, ReplicaState

__all__ = ["DeletionClient", "TopicDeletionManager"]

log = logging.getLogger(__name__)

_R = ReplicaState


class DeletionClient:
    """What the deletion manager needs from the controller (Kafka's ``DeletionClient``)."""

    def __init__(
        self,
        delete_topic: Callable[[str], None],
        send_metadata_update: Callable[[set[TopicPartition]], None],
        mute_partition_modifications: Callable[[str], None],
    ) -> None:
        self.delete_topic = delete_topic
        self.send_metadata_update = send_metadata_update
        self.mute_partition_modifications = mute_partition_modifications


class TopicDeletionManager:
    """Runs topic deletions to completion across broker failures and restarts."""

    def __init__(
        self,
        delete_topic_enable: bool,
        context: ControllerContext,
        replica_state_machine: ReplicaStateMachine,
        partition_state_machine: PartitionStateMachine,
        client: DeletionClient,
    ) -> None:
        self.is_delete_topic_enabled = delete_topic_enable
        self.context = context
        self.replica_state_machine = replica_state_machine
        self.partition_state_machine = partition_state_machine
        self.client = client

    def init(self, topics_to_be_deleted: set[str], topics_ineligible: set[str]) -> None:
        """Pick up deletions that were in progress when this controller took over."""
        if self.is_delete_topic_enabled:
            self.context.queue_topic_deletion(topics_to_be_deleted)
            self.context.topics_ineligible_for_deletion |= topics_ineligible & topics_to_be_deleted

    def reset(self) -> None:
        self.context.topics_to_be_deleted.clear()
        self.context.topics_with_deletion_started.clear()
        self.context.topics_ineligible_for_deletion.clear()

    def try_topic_deletion(self) -> None:
        if self.is_delete_topic_enabled:
            self._resume_deletions()

    def enqueue_topics_for_deletion(self, topics: set[str]) -> None:
        if self.is_delete_topic_enabled:
            self.context.queue_topic_deletion(topics)
            self._resume_deletions()

    def resume_deletion_for_topics(self, topics: set[str]) -> None:
        if self.is_delete_topic_enabled:
            resumed = topics & self.context.topics_to_be_deleted
            if resumed:
                self.context.topics_ineligible_for_deletion -= resumed
                self._resume_deletions()

    def fail_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        """Replicas that failed to delete (or whose broker died) wait for a retry."""
        if not self.is_delete_topic_enabled:
            return
        failed = {
            r for r in replicas if self.is_topic_queued_up_for_deletion(r.topic_partition.topic)
        }
        if failed:
            self.replica_state_machine.handle_state_changes(failed, _R.REPLICA_DELETION_INELIGIBLE)
            topics = {r.topic_partition.topic for r in failed}
            self.mark_topic_ineligible_for_deletion(topics, "replica deletion failure")
            self._resume_deletions()

    def complete_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        done = {
            r for r in replicas if self.is_topic_queued_up_for_deletion(r.topic_partition.topic)
        }
        self.replica_state_machine.handle_state_changes(done, _R.REPLICA_DELETION_SUCCESSFUL)
        self._resume_deletions()

    def mark_topic_ineligible_for_deletion(self, topics: set[str], reason: str) -> None:
        if self.is_delete_topic_enabled:
            halted = self.context.topics_to_be_deleted & topics
            self.context.topics_ineligible_for_deletion |= halted
            if halted:
                log.info("halted deletion of topics %s: %s", sorted(halted), reason)

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return self.is_delete_topic_enabled and self.context.is_topic_queued_up_for_deletion(topic)

    def _is_topic_eligible_for_deletion(self, topic: str) -> bool:
        return (
            self.context.is_topic_queued_up_for_deletion(topic)
            and not self.context.is_any_replica_in_state(topic, _R.REPLICA_DELETION_STARTED)
            and topic not in self.context.topics_ineligible_for_deletion
        )

    def _resume_deletions(self) -> None:
        retry, eligible = set(), set()
        for topic in sorted(self.context.topics_to_be_deleted):
            if self.context.are_all_replicas_in_state(topic, _R.REPLICA_DELETION_SUCCESSFUL):
                self._complete_delete_topic(topic)
                log.info("deletion of topic %s successfully completed", topic)
                continue
            if not self.context.is_any_replica_in_state(
                topic, _R.REPLICA_DELETION_STARTED
            ) and self.context.is_any_replica_in_state(topic, _R.REPLICA_DELETION_INELIGIBLE):
                retry.add(topic)
            if self._is_topic_eligible_for_deletion(topic):
                log.info("deletion of topic %s (re)started", topic)
                eligible.add(topic)
        if retry:
            failed = set().union(
                *(self.context.replicas_in_state(t, _R.REPLICA_DELETION_INELIGIBLE) for t in retry)
            )
            self.replica_state_machine.handle_state_changes(failed, _R.OFFLINE_REPLICA)
        if eligible:
            self._on_topic_deletion(eligible)

    def _complete_delete_topic(self, topic: str) -> None:
        self.client.mute_partition_modifications(topic)
        deleted = self.context.replicas_in_state(topic, _R.REPLICA_DELETION_SUCCESSFUL)
        self.replica_state_machine.handle_state_changes(deleted, _R.NON_EXISTENT_REPLICA)
        self.client.delete_topic(topic)
        self.context.remove_topic(topic)
        self.context.topics_to_be_deleted.discard(topic)
        self.context.topics_with_deletion_started.discard(topic)
        self.context.topics_ineligible_for_deletion.discard(topic)

    def _on_topic_deletion(self, topics: set[str]) -> None:
        log.info("topic deletion callback for %s", sorted(topics))
        partitions = set().union(*(self.context.partitions_for_topic(t) for t in topics))
        unseen = topics - self.context.topics_with_deletion_started
        if unseen:
            unseen_partitions = set().union(*(self.context.partitions_for_topic(t) for t in unseen))
            psm = self.partition_state_machine
            psm.handle_state_changes(unseen_partitions, PartitionState.OFFLINE_PARTITION)
            psm.handle_state_changes(unseen_partitions, PartitionState.NON_EXISTENT_PARTITION)
            self.context.begin_topic_deletion(unseen)
        self.client.send_metadata_update(partitions)
        self._on_partition_deletion(topics)

    def _on_partition_deletion(self, topics: set[str]) -> None:
        dead: set[PartitionAndReplica] = set()
        retry: set[PartitionAndReplica] = set()
        ineligible: set[str] = set()
        for topic in sorted(topics):
            replicas = self.context.replicas_for_topic(topic)
            alive = {
                r for r in replicas if self.context.is_replica_online(r.replica, r.topic_partition)
            }
            deleted = self.context.replicas_in_state(topic, _R.REPLICA_DELETION_SUCCESSFUL)
            dead |= replicas - alive
            retry |= alive - deleted
            if replicas - alive:
                ineligible.add(topic)
        rsm = self.replica_state_machine
        rsm.handle_state_changes(dead, _R.REPLICA_DELETION_INELIGIBLE)
        rsm.handle_state_changes(retry, _R.OFFLINE_REPLICA)
        rsm.handle_state_changes(retry, _R.REPLICA_DELETION_STARTED)
        if ineligible:
            self.mark_topic_ineligible_for_deletion(ineligible, "offline replicas")
