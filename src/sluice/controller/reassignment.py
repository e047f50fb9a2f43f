"""Partition reassignment (KIP-455), as Kafka's ZooKeeper-mode controller runs it.

:class:`PartitionReassignmentHandler` is the part of
:class:`~.kafka_controller.KafkaController` that moves a partition from its original
replicas (ORS) to target replicas (TRS), in Kafka's ``onPartitionReassignment`` steps:

1. write RS = TRS + ORS with adding = TRS - ORS and removing = ORS - TRS to the topic
   znode and the context;
2. bump the leader epoch and send LeaderAndIsr to every replica of RS; the adding
   replicas go NewReplica and start fetching from the leader;
3. once every TRS replica is in the ISR (checked when the reassignment starts and on
   every ISR change notification): the adding replicas go OnlineReplica, the context
   assignment becomes TRS, a leader is elected from TRS if the current one is not in
   TRS or not alive (else the leader epoch is bumped), the removing replicas go
   Offline, ReplicaDeletionStarted (StopReplica with delete), NonExistent, TRS is
   written to ZooKeeper and every broker gets UpdateMetadata.

A null target cancels a reassignment (back to ORS). A new controller resumes the
reassignments it finds in the topic znodes' ``adding_replicas``/``removing_replicas``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from sluice.base import TopicPartition

from ..protocol.errors import ErrorCode
from .errors import ControllerMovedError, IllegalStateError, StateChangeFailedError
from .events import ApiError, ApiPartitionReassignment, ListPartitionReassignments
from .leader_election import ReassignPartitionLeaderElectionStrategy
from .model import LeaderIsrAndControllerEpoch, ReplicaAssignment
from .states import PartitionAndReplica, PartitionState, ReplicaState

if TYPE_CHECKING:
    from .kafka_controller import KafkaController

__all__ = ["PartitionReassignmentHandler"]

log = logging.getLogger("sluice.controller")

_R = ReplicaState


class PartitionReassignmentHandler:
    """Runs partition reassignments for the controller, on its event thread."""

    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller
        self.context = controller.context
        self.zk_client = controller.zk_client

    # -- API events -------------------------------------------------------------------
    def process(self, event: ApiPartitionReassignment | ListPartitionReassignments) -> None:
        if isinstance(event, ListPartitionReassignments):
            self._process_list(event)
        else:
            self._process_alter(event)

    def _process_list(self, event: ListPartitionReassignments) -> None:
        if not self.controller.is_active:
            event.callback(ApiError(ErrorCode.not_controller))
            return
        ctx = self.context
        wanted = ctx.partitions_being_reassigned if event.partitions is None else event.partitions
        results = {}
        for tp in sorted(wanted):
            assignment = ctx.partition_full_replica_assignment(tp)
            if assignment.is_being_reassigned:
                results[tp] = assignment
        event.callback(results)

    def _process_alter(self, event: ApiPartitionReassignment) -> None:
        if not self.controller.is_active:
            event.callback(ApiError(ErrorCode.not_controller))
            return
        results: dict[TopicPartition, ApiError] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in sorted(event.reassignments.items()):
            error = None
            if target is not None:
                error = self._validate_replicas(tp, target, event.allow_replication_factor_change)
            if error is not None:
                results[tp] = error
                continue
            reassignment = self._maybe_build_reassignment(tp, target)
            if reassignment is None:
                results[tp] = ApiError(
                    ErrorCode.no_reassignment_in_progress,
                    f"no reassignment of {tp} is in progress",
                )
            else:
                to_reassign[tp] = reassignment
        try:
            results.update(self._maybe_trigger_partition_reassignment(to_reassign))
        except ControllerMovedError:
            event.callback(ApiError(ErrorCode.not_controller))
            raise
        event.callback(results)

    def _validate_replicas(
        self, tp: TopicPartition, replicas: tuple[int, ...], allow_rf_change: bool
    ) -> ApiError | None:
        invalid = ErrorCode.invalid_replica_assignment
        if not replicas:
            return ApiError(invalid, "Empty replica list specified in partition reassignment.")
        if len(set(replicas)) != len(replicas):
            return ApiError(
                invalid,
                f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}",
            )
        if any(r < 0 for r in replicas):
            return ApiError(invalid, f"Invalid broker id in replica list: {list(replicas)}")
        current = self.context.partition_full_replica_assignment(tp)
        if not current.replicas:
            return None  # answered UNKNOWN_TOPIC_OR_PARTITION when triggered
        if not allow_rf_change and len(replicas) != len(current.origin_replicas):
            return ApiError(
                invalid,
                f"The replication factor is changed from {len(current.origin_replicas)} "
                f"to {len(replicas)}",
            )
        adding = current.reassign_to(replicas).adding_replicas
        live = self.context.live_broker_ids
        if not set(adding) <= live:
            return ApiError(
                invalid,
                f"Replica assignment has brokers that are not alive. Replica list: "
                f"{list(adding)}, live broker list: {sorted(live)}",
            )
        return None

    def _maybe_build_reassignment(
        self, tp: TopicPartition, target: tuple[int, ...] | None
    ) -> ReplicaAssignment | None:
        current = self.context.partition_full_replica_assignment(tp)
        if current.is_being_reassigned:
            return current.reassign_to(current.origin_replicas if target is None else target)
        if target is None:
            return None
        return current.reassign_to(target)

    def _maybe_trigger_partition_reassignment(
        self, reassignments: Mapping[TopicPartition, ReplicaAssignment]
    ) -> dict[TopicPartition, ApiError]:
        results: dict[TopicPartition, ApiError] = {}
        unknown = ApiError(ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
        for tp, reassignment in reassignments.items():
            if self.controller.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic):
                log.info("skipping reassignment of %s: the topic is being deleted", tp)
                results[tp] = unknown
            elif not self.context.partition_replica_assignment(tp):
                results[tp] = unknown
            else:
                try:
                    self.on_partition_reassignment(tp, reassignment)
                    results[tp] = ApiError()
                except ControllerMovedError:
                    log.info("controller moved while reassigning %s", tp)
                    raise
                except Exception as exc:
                    log.exception("error reassigning partition %s", tp)
                    results[tp] = ApiError(ErrorCode.unknown_server_error, str(exc) or None)
        return results

    # -- the reassignment itself ----------------------------------------------------
    def initialize_partition_reassignments(self) -> None:
        """On failover: resume every reassignment found in the topic znodes."""
        self.maybe_resume_reassignments(lambda tp, assignment: True)

    def maybe_resume_reassignments(
        self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]
    ) -> None:
        for tp in sorted(self.context.partitions_being_reassigned):
            assignment = self.context.partition_full_replica_assignment(tp)
            if should_resume(tp, assignment):
                self.on_partition_reassignment(tp, assignment)

    def on_isr_change(self, partitions: Iterable[TopicPartition]) -> None:
        """ISRs changed: complete the reassignments whose target replicas all caught up."""
        for tp in sorted(set(partitions) & self.context.partitions_being_reassigned):
            reassignment = self.context.partition_full_replica_assignment(tp)
            if self._is_reassignment_complete(tp, reassignment):
                log.info(
                    "target replicas %s of reassigning partition %s have caught up with the leader",
                    list(reassignment.target_replicas),
                    tp,
                )
                self.on_partition_reassignment(tp, reassignment)

    def on_partition_reassignment(
        self, tp: TopicPartition, reassignment: ReplicaAssignment
    ) -> None:
        """Kafka's ``onPartitionReassignment``: start, or complete, moving ``tp``."""
        ctrl = self.controller
        ctrl.topic_deletion_manager.mark_topic_ineligible_for_deletion(
            {tp.topic}, "topic reassignment in progress"
        )
        self._update_current_reassignment(tp, reassignment)
        adding = [PartitionAndReplica(tp, r) for r in reassignment.adding_replicas]
        if not self._is_reassignment_complete(tp, reassignment):
            log.info(
                "reassigning partition %s: replicas %s, adding %s, removing %s",
                tp,
                list(reassignment.replicas),
                list(reassignment.adding_replicas),
                list(reassignment.removing_replicas),
            )
            self._update_leader_epoch_and_send_request(tp, reassignment)
            # A resumed reassignment's adding replicas may already be online.
            new = [r for r in adding if self.context.replica_state(r) is _R.NON_EXISTENT_REPLICA]
            ctrl.replica_state_machine.handle_state_changes(new, _R.NEW_REPLICA)
            return
        ctrl.replica_state_machine.handle_state_changes(adding, _R.ONLINE_REPLICA)
        completed = ReplicaAssignment(reassignment.target_replicas)
        self.context.update_partition_full_replica_assignment(tp, completed)
        self._move_reassigned_partition_leader_if_required(tp, completed)
        self._stop_removed_replicas(tp, reassignment.removing_replicas)
        self._update_replica_assignment_for_partition(tp, completed)
        self.context.partitions_being_reassigned.discard(tp)
        ctrl.send_update_metadata({tp})
        log.info("reassignment of partition %s to %s completed", tp, list(completed.replicas))
        ctrl.topic_deletion_manager.resume_deletion_for_topics({tp.topic})

    def _update_current_reassignment(
        self, tp: TopicPartition, reassignment: ReplicaAssignment
    ) -> None:
        current = self.context.partition_full_replica_assignment(tp)
        if current != reassignment:
            log.debug("updating assignment of %s from %s to %s", tp, current, reassignment)
            self._update_replica_assignment_for_partition(tp, reassignment)
            self.context.update_partition_full_replica_assignment(tp, reassignment)
            # Replicas added by an earlier reassignment that the new one does not want.
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            if unneeded:
                self._stop_removed_replicas(tp, unneeded)
        self.context.partitions_being_reassigned.add(tp)

    def _is_reassignment_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        if not assignment.is_being_reassigned:
            return True
        state = self.zk_client.get_topic_partition_states([tp]).get(tp)
        return state is not None and set(assignment.target_replicas) <= set(
            state.leader_and_isr.isr
        )

    def _update_replica_assignment_for_partition(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        ctx = self.context
        topic_assignment = ctx.partition_full_replica_assignment_for_topic(tp.topic)
        topic_assignment[tp.partition] = assignment
        self.zk_client.set_topic_assignment(
            tp.topic, ctx.topic_ids.get(tp.topic), topic_assignment, ctx.epoch_zk_version
        )
        log.info("updated the assignment of partition %s to %s", tp, assignment)

    def _update_leader_epoch(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        """Bump the leader epoch in ZooKeeper (so the leader learns the new replica set)."""
        ctx = self.context
        while True:
            found = self.zk_client.get_topic_partition_states([tp]).get(tp)
            if found is None:
                raise IllegalStateError(
                    f"cannot update the leader epoch of {tp}: its state znode does not exist"
                )
            if found.controller_epoch > ctx.epoch:
                raise StateChangeFailedError(
                    f"the state of {tp} was written by controller epoch "
                    f"{found.controller_epoch}, newer than ours ({ctx.epoch})"
                )
            new = found.leader_and_isr.new_epoch()
            update = self.zk_client.update_leader_and_isr(
                {tp: new}, ctx.epoch, ctx.epoch_zk_version
            )
            outcome = update.finished.get(tp)
            if isinstance(outcome, Exception):
                raise outcome
            if outcome is not None:
                info = LeaderIsrAndControllerEpoch(outcome, ctx.epoch)
                ctx.partition_leadership_info[tp] = info
                return info

    def _update_leader_epoch_and_send_request(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        info = self._update_leader_epoch(tp)
        if info is None:
            return
        batch = self.controller.batch
        batch.new_batch()
        try:
            batch.add_leader_and_isr_request_for_brokers(
                assignment.origin_replicas, tp, info, assignment, False
            )
            batch.add_leader_and_isr_request_for_brokers(
                assignment.adding_replicas, tp, info, assignment, True
            )
            batch.send_requests_to_brokers(self.context.epoch)
        except Exception:
            batch.clear()
            raise
        log.info(
            "sent LeaderAndIsr (leader %d, leader epoch %d) with assignment %s for partition %s",
            info.leader_and_isr.leader,
            info.leader_and_isr.leader_epoch,
            list(assignment.replicas),
            tp,
        )

    def _move_reassigned_partition_leader_if_required(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        ctx = self.context
        info = ctx.partition_leadership_info.get(tp)
        leader = info.leader_and_isr.leader if info is not None else -1
        if leader in assignment.replicas and ctx.is_replica_online(leader, tp):
            log.info("leader %d of reassigned partition %s stays; bumping its epoch", leader, tp)
            self._update_leader_epoch_and_send_request(tp, assignment)
            return
        log.info(
            "leader %d of reassigned partition %s is not a live replica of %s; electing",
            leader,
            tp,
            list(assignment.replicas),
        )
        self.controller.partition_state_machine.handle_state_changes(
            [tp], PartitionState.ONLINE_PARTITION, ReassignPartitionLeaderElectionStrategy()
        )

    def _stop_removed_replicas(self, tp: TopicPartition, removed: Iterable[int]) -> None:
        """Offline (out of the ISR), StopReplica with delete, then gone."""
        replicas = [PartitionAndReplica(tp, r) for r in removed]
        rsm = self.controller.replica_state_machine
        rsm.handle_state_changes(replicas, _R.OFFLINE_REPLICA)
        rsm.handle_state_changes(replicas, _R.REPLICA_DELETION_STARTED)
        rsm.handle_state_changes(replicas, _R.REPLICA_DELETION_SUCCESSFUL)
        rsm.handle_state_changes(replicas, _R.NON_EXISTENT_REPLICA)
