"""The controller's topic, partition, ISR, election and controlled-shutdown handling.

:class:`PartitionEventHandler` is the half of :class:`~.kafka_controller.KafkaController`
that reacts to changes in topics and leadership; it runs on the controller's event
thread with the controller's context and state machines (Kafka keeps both halves in
``KafkaController``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sluice.base import TopicPartition

from ..protocol.errors import ErrorCode, KafkaError
from .errors import (
    BrokerNotAvailableError,
    ControllerMovedError,
    StaleBrokerEpochError,
    StateChangeFailedError,
)
from .events import (
    ControlledShutdown,
    ControlledShutdownResult,
    ControllerEvent,
    ElectionTrigger,
    ElectionType,
    IsrChangeNotification,
    PartitionModifications,
    ReplicaLeaderElection,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
)
from .leader_election import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
    preferred_replica_partition_leader_election,
)
from .model import LeaderAndIsr, ReplicaAssignment
from .partition_state_machine import StateChangeResults
from .states import PartitionAndReplica, PartitionState, ReplicaState
from .zk_data import new_topic_id

if TYPE_CHECKING:
    from .kafka_controller import KafkaController

__all__ = ["PartitionEventHandler"]

log = logging.getLogger("sluice.controller")

_P, _R = PartitionState, ReplicaState


class PartitionEventHandler:
    """Handles topic/partition/ISR changes, leader elections and controlled shutdown."""

    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller
        self.context = controller.context
        self.zk_client = controller.zk_client

    def process(self, event: ControllerEvent) -> None:
        if isinstance(event, ControlledShutdown):
            self._process_controlled_shutdown(event)
        elif isinstance(event, ReplicaLeaderElection):
            self._process_replica_leader_election(event)
        elif not self.controller.is_active:
            return
        elif isinstance(event, TopicChange):
            self._process_topic_change()
        elif isinstance(event, PartitionModifications):
            self._process_partition_modifications(event.topic)
        elif isinstance(event, TopicDeletion):
            self._process_topic_deletion()
        elif isinstance(event, IsrChangeNotification):
            self._process_isr_change_notification()
        elif isinstance(event, TopicDeletionStopReplicaResponseReceived):
            self._process_stop_replica_response(event)
        else:
            log.warning("unexpected controller event %r", event)

    # -- topics and partitions ------------------------------------------------------
    def load_topic_assignments(self, topics: set[str]) -> set[TopicPartition]:
        """Read (and watch) the assignments of ``topics`` into the context; return their
        partitions. A topic without an id gets one, written back as Kafka does."""
        added = set()
        for topic in sorted(topics):
            found = self.zk_client.get_topic_assignment(
                topic, watch=self.controller.partition_modifications_watch
            )
            if found is None:
                continue
            topic_id, assignment = found
            if topic_id is None:
                topic_id = new_topic_id()
                self.zk_client.set_topic_assignment(
                    topic, topic_id, assignment, self.context.epoch_zk_version
                )
            self.context.topic_ids[topic] = topic_id
            for partition, replicas in assignment.items():
                tp = TopicPartition(topic, partition)
                self.context.update_partition_full_replica_assignment(tp, replicas)
                if replicas.is_being_reassigned:
                    self.context.partitions_being_reassigned.add(tp)
                added.add(tp)
        return added

    def update_leader_and_isr_cache(self, partitions: set[TopicPartition] | None = None) -> None:
        wanted = self.context.all_partitions() if partitions is None else partitions
        states = self.zk_client.get_topic_partition_states(wanted)
        self.context.partition_leadership_info.update(states)

    def _process_topic_change(self) -> None:
        ctx = self.context
        topics = self.zk_client.get_all_topics_in_cluster(self.controller.topic_change_watch)
        new_topics, deleted = topics - ctx.all_topics, ctx.all_topics - topics
        ctx.all_topics = set(topics)
        for topic in deleted:
            ctx.remove_topic(topic)
        added = self.load_topic_assignments(new_topics)
        log.info("new topics: %s, deleted topics: %s", sorted(new_topics), sorted(deleted))
        if added:
            self.on_new_partition_creation(added)

    def _process_partition_modifications(self, topic: str) -> None:
        found = self.zk_client.get_topic_assignment(
            topic, watch=self.controller.partition_modifications_watch
        )
        if found is None or topic not in self.context.all_topics:
            return
        _, assignment = found
        to_add: dict[TopicPartition, ReplicaAssignment] = {
            TopicPartition(topic, p): a
            for p, a in assignment.items()
            if not self.context.partition_replica_assignment(TopicPartition(topic, p))
        }
        if self.controller.topic_deletion_manager.is_topic_queued_up_for_deletion(topic):
            if to_add:
                log.warning(
                    "not adding partitions %s: topic %s is being deleted", sorted(to_add), topic
                )
            return
        if to_add:
            log.info("new partitions to be added: %s", sorted(to_add))
            for tp, replicas in to_add.items():
                self.context.update_partition_full_replica_assignment(tp, replicas)
            self.on_new_partition_creation(set(to_add))

    def on_new_partition_creation(self, partitions: set[TopicPartition]) -> None:
        log.info("new partition creation callback for %s", sorted(partitions))
        psm, rsm = self.controller.partition_state_machine, self.controller.replica_state_machine
        psm.handle_state_changes(partitions, _P.NEW_PARTITION)
        rsm.handle_state_changes(self.context.replicas_for_partition(partitions), _R.NEW_REPLICA)
        psm.handle_state_changes(
            partitions, _P.ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy(False)
        )
        rsm.handle_state_changes(self.context.replicas_for_partition(partitions), _R.ONLINE_REPLICA)

    def _process_topic_deletion(self) -> None:
        zk, ctx = self.zk_client, self.context
        topics = set(zk.get_topic_deletions(self.controller.topic_deletion_watch))
        missing = topics - ctx.all_topics
        if missing:
            log.warning("ignoring request to delete non-existing topics %s", sorted(missing))
            zk.delete_topic_deletions(missing, ctx.epoch_zk_version)
        topics -= missing
        if not self.controller.config.delete_topic_enable:
            log.info("removing %s since delete.topic.enable is false", sorted(topics))
            zk.delete_topic_deletions(topics, ctx.epoch_zk_version)
        elif topics:
            log.info("starting topic deletion for topics %s", sorted(topics))
            reassigning = {tp.topic for tp in ctx.partitions_being_reassigned} & topics
            if reassigning:
                log.info("deletion of %s waits for their reassignments", sorted(reassigning))
                ctx.topics_ineligible_for_deletion |= reassigning
            self.controller.topic_deletion_manager.enqueue_topics_for_deletion(topics)

    def _process_stop_replica_response(
        self, event: TopicDeletionStopReplicaResponseReceived
    ) -> None:
        manager = self.controller.topic_deletion_manager
        failed = {
            PartitionAndReplica(tp, event.broker_id)
            for tp, error in event.partition_errors.items()
            if error is not ErrorCode.none
        }
        manager.fail_replica_deletion(failed)
        done = {PartitionAndReplica(tp, event.broker_id) for tp in event.partition_errors} - failed
        if done:
            manager.complete_replica_deletion(done)

    def _process_isr_change_notification(self) -> None:
        zk = self.zk_client
        sequence_numbers = zk.get_all_isr_change_notifications(self.controller.isr_change_watch)
        try:
            partitions = zk.get_partitions_from_isr_change_notifications(sequence_numbers)
            partitions &= self.context.all_partitions()
            if partitions:
                self.update_leader_and_isr_cache(partitions)
                self.controller.send_update_metadata(partitions)
                self.controller.reassignments.on_isr_change(partitions)
        finally:
            zk.delete_isr_change_notifications(sequence_numbers, self.context.epoch_zk_version)

    # -- leader elections -----------------------------------------------------------
    def _process_replica_leader_election(self, event: ReplicaLeaderElection) -> None:
        ctx = self.context
        if not self.controller.is_active:
            if event.callback is not None:
                error = ControllerMovedError("this broker is not the controller")
                event.callback({tp: error for tp in event.partitions or ()})
            return
        if event.partitions is not None:
            partitions = set(event.partitions)
        else:
            watch = self.controller.preferred_replica_election_watch
            partitions = self.zk_client.get_preferred_replica_election(watch) or set()
            if not partitions:
                return
        known = partitions & ctx.all_partitions()
        deleting = {tp for tp in known if ctx.is_topic_queued_up_for_deletion(tp.topic)}
        electable: set[TopicPartition] = set()
        not_needed: set[TopicPartition] = set()
        for tp in known - deleting:
            info = ctx.partition_leadership_info.get(tp)
            leader = info.leader_and_isr.leader if info is not None else -1
            if event.election_type is ElectionType.PREFERRED:
                needed = leader != ctx.partition_replica_assignment(tp)[0]
            else:
                needed = leader not in ctx.live_broker_ids
            (electable if needed else not_needed).add(tp)
        results: dict[TopicPartition, int | Exception] = {}
        for tp, outcome in self.on_replica_election(
            electable, event.election_type, event.trigger
        ).items():
            if isinstance(outcome, LeaderAndIsr):
                results[tp] = outcome.leader
            elif isinstance(outcome, StateChangeFailedError):
                code = (
                    ErrorCode.preferred_leader_not_available
                    if event.election_type is ElectionType.PREFERRED
                    else ErrorCode.eligible_leaders_not_available
                )
                results[tp] = KafkaError(str(outcome), code=code)
            else:
                results[tp] = outcome
        for tp in not_needed:
            results[tp] = KafkaError(code=ErrorCode.election_not_needed)
        for tp in deleting:
            results[tp] = KafkaError(
                "the topic is being deleted", code=ErrorCode.invalid_topic_exception
            )
        for tp in partitions - known:
            results[tp] = KafkaError(
                "the partition does not exist", code=ErrorCode.unknown_topic_or_partition
            )
        if event.callback is not None:
            event.callback(results)

    def on_replica_election(
        self, partitions: set[TopicPartition], election_type: ElectionType, trigger: ElectionTrigger
    ) -> StateChangeResults:
        log.info(
            "starting replica leader election (%s) for partitions %s triggered by %s",
            election_type.name,
            sorted(partitions),
            trigger.value,
        )
        strategy: PartitionLeaderElectionStrategy
        if election_type is ElectionType.PREFERRED:
            strategy = PreferredReplicaPartitionLeaderElectionStrategy()
        else:
            strategy = OfflinePartitionLeaderElectionStrategy(allow_unclean=True)
        try:
            return self.controller.partition_state_machine.handle_state_changes(
                partitions, _P.ONLINE_PARTITION, strategy
            )
        finally:
            if trigger is not ElectionTrigger.ADMIN_CLIENT_TRIGGERED:
                for tp in sorted(partitions):
                    info = self.context.partition_leadership_info.get(tp)
                    preferred = self.context.partition_replica_assignment(tp)[:1]
                    if (
                        info is not None
                        and preferred
                        and info.leader_and_isr.leader != preferred[0]
                    ):
                        log.warning(
                            "partition %s failed to complete preferred replica election to %d; "
                            "leader is still %d",
                            tp,
                            preferred[0],
                            info.leader_and_isr.leader,
                        )
                if trigger is ElectionTrigger.ZK_TRIGGERED:
                    self.zk_client.delete_preferred_replica_election(self.context.epoch_zk_version)

    def check_and_trigger_auto_leader_rebalance(self) -> set[TopicPartition]:
        """Elect preferred leaders on every broker whose share of partitions led by
        someone else exceeds leader.imbalance.per.broker.percentage; returns the
        partitions it tried."""
        ctx = self.context
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.all_partitions():
            replicas = ctx.partition_replica_assignment(tp)
            if replicas and not ctx.is_topic_queued_up_for_deletion(tp.topic):
                by_preferred.setdefault(replicas[0], []).append(tp)
        threshold = self.controller.config.leader_imbalance_per_broker_percentage / 100
        tried: set[TopicPartition] = set()
        for broker_id, partitions in sorted(by_preferred.items()):
            not_preferred = [
                tp
                for tp in partitions
                if (info := ctx.partition_leadership_info.get(tp)) is not None
                and info.leader_and_isr.leader != broker_id
            ]
            ratio = len(not_preferred) / len(partitions)
            log.debug("leader imbalance ratio for broker %d is %.3f", broker_id, ratio)
            if ratio <= threshold:
                continue
            candidates = {tp for tp in not_preferred if self._can_preferred_replica_be_leader(tp)}
            if candidates:
                self.on_replica_election(
                    candidates, ElectionType.PREFERRED, ElectionTrigger.AUTO_TRIGGERED
                )
                tried |= candidates
        return tried

    def _can_preferred_replica_be_leader(self, tp: TopicPartition) -> bool:
        ctx = self.context
        assignment = ctx.partition_replica_assignment(tp)
        live = [r for r in assignment if ctx.is_replica_online(r, tp)]
        info = ctx.partition_leadership_info[tp]
        return (
            preferred_replica_partition_leader_election(assignment, info.leader_and_isr.isr, live)
            is not None
        )

    # -- controlled shutdown --------------------------------------------------------
    def _process_controlled_shutdown(self, event: ControlledShutdown) -> None:
        try:
            remaining = self.do_controlled_shutdown(event.broker_id, event.broker_epoch)
        except KafkaError as exc:
            event.callback(ControlledShutdownResult(exc.code, frozenset(), str(exc)))
            if isinstance(exc, ControllerMovedError):
                raise  # the controller resigns
            return
        event.callback(ControlledShutdownResult(ErrorCode.none, frozenset(remaining)))

    def do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        """Move leadership off ``broker_id``; return the partitions it still leads."""
        ctx = self.context
        if not self.controller.is_active:
            raise ControllerMovedError(
                "controller moved to another broker; aborting controlled shutdown"
            )
        if broker_epoch != -1 and broker_epoch < ctx.live_broker_epochs.get(broker_id, -1):
            raise StaleBrokerEpochError(
                f"received a controlled shutdown request from broker {broker_id} with stale epoch "
                f"{broker_epoch}; current epoch is {ctx.live_broker_epochs[broker_id]}"
            )
        log.info("shutting down broker %d", broker_id)
        if broker_id not in ctx.live_or_shutting_down_broker_ids:
            raise BrokerNotAvailableError(f"broker id {broker_id} does not exist")
        ctx.shutting_down_broker_ids.add(broker_id)
        to_act_on = {
            tp
            for tp in ctx.partitions_on_broker(broker_id)
            if len(ctx.partition_replica_assignment(tp)) > 1
            and tp in ctx.partition_leadership_info
            and not ctx.is_topic_queued_up_for_deletion(tp.topic)
        }
        led = {
            tp
            for tp in to_act_on
            if ctx.partition_leadership_info[tp].leader_and_isr.leader == broker_id
        }
        followed = to_act_on - led
        self.controller.partition_state_machine.handle_state_changes(
            led, _P.ONLINE_PARTITION, ControlledShutdownPartitionLeaderElectionStrategy()
        )
        self.controller.replica_state_machine.handle_state_changes(
            {PartitionAndReplica(tp, broker_id) for tp in followed}, _R.OFFLINE_REPLICA
        )
        return {
            tp
            for tp in ctx.partitions_led_by_broker(broker_id)
            if len(ctx.partition_replica_assignment(tp)) > 1
        }
