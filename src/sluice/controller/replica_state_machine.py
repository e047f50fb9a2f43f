"""The replica state machine (Kafka's ``ZkReplicaStateMachine``).

Moves replicas through NewReplica, OnlineReplica, OfflineReplica,
ReplicaDeletionStarted/Successful/Ineligible and NonExistentReplica. Going offline
sends StopReplica (keep the log) and takes the replica out of the ISR of every
partition it follows (a partition it led loses its leader, leader -1, unless it was
the last ISR member); deletion sends StopReplica with ``delete_partition``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

from sluice.base import TopicPartition

from .context import ControllerContext
from .errors import ControllerMovedError, StateChangeFailedError
from .kafka_zk_client import KafkaZkClient
from .model import NO_LEADER, LeaderAndIsr, LeaderIsrAndControllerEpoch
from .request_batch import ControllerBrokerRequestBatch
from .states import REPLICA_VALID_PREVIOUS_STATES, PartitionAndReplica, ReplicaState

__all__ = ["ReplicaStateMachine"]

log = logging.getLogger("sluice.controller.state.change")

_R = ReplicaState


class ReplicaStateMachine:
    """Drives replica state transitions for the controller."""

    def __init__(
        self,
        context: ControllerContext,
        zk_client: KafkaZkClient,
        batch: ControllerBrokerRequestBatch,
    ) -> None:
        self.context = context
        self.zk_client = zk_client
        self.batch = batch

    def startup(self) -> None:
        online, offline = set(), set()
        for tp in self.context.all_partitions():
            for replica_id in self.context.partition_replica_assignment(tp):
                replica = PartitionAndReplica(tp, replica_id)
                if self.context.is_replica_online(replica_id, tp):
                    self.context.replica_states[replica] = _R.ONLINE_REPLICA
                    online.add(replica)
                else:
                    # Kafka starts unreachable replicas as deletion-ineligible.
                    self.context.replica_states[replica] = _R.REPLICA_DELETION_INELIGIBLE
                    offline.add(replica)
        self.handle_state_changes(online, _R.ONLINE_REPLICA)
        self.handle_state_changes(offline, _R.OFFLINE_REPLICA)

    def shutdown(self) -> None:
        self.context.replica_states.clear()

    def handle_state_changes(
        self, replicas: Iterable[PartitionAndReplica], target_state: ReplicaState
    ) -> dict[PartitionAndReplica, Exception]:
        """Move ``replicas`` to ``target_state``; returns the refused ones with the reason."""
        replicas = sorted(set(replicas))
        if not replicas:
            return {}
        self.batch.new_batch()
        errors: dict[PartitionAndReplica, Exception] = {}
        try:
            by_broker: dict[int, list[PartitionAndReplica]] = {}
            for replica in replicas:
                by_broker.setdefault(replica.replica, []).append(replica)
            for replica_id, group in sorted(by_broker.items()):
                errors.update(self._do_handle_state_changes(replica_id, group, target_state))
            self.batch.send_requests_to_brokers(self.context.epoch)
        except ControllerMovedError:
            self.batch.clear()
            raise
        except Exception:
            log.exception("error while moving replicas %s to %s", replicas, target_state)
            self.batch.clear()
        return errors

    def _do_handle_state_changes(
        self, replica_id: int, replicas: list[PartitionAndReplica], target: ReplicaState
    ) -> dict[PartitionAndReplica, Exception]:
        ctx = self.context
        errors: dict[PartitionAndReplica, Exception] = {}
        valid = []
        for replica in replicas:
            current = ctx.replica_state(replica)
            if current in REPLICA_VALID_PREVIOUS_STATES[target]:
                valid.append(replica)
            else:
                errors[replica] = StateChangeFailedError(
                    f"replica {replica} should be in one of "
                    f"{sorted(map(str, REPLICA_VALID_PREVIOUS_STATES[target]))} before moving "
                    f"to {target}; it is in {current}"
                )
                log.error("invalid replica state transition: %s", errors[replica])
        if target is _R.NEW_REPLICA:
            for replica in valid:
                tp = replica.topic_partition
                info = ctx.partition_leadership_info.get(tp)
                if info is not None and info.leader_and_isr.leader == replica_id:
                    errors[replica] = StateChangeFailedError(
                        f"replica {replica} cannot become NewReplica: it is already the leader"
                    )
                    continue
                if info is not None:
                    self.batch.add_leader_and_isr_request_for_brokers(
                        [replica_id], tp, info, ctx.partition_full_replica_assignment(tp), True
                    )
                self._change_state(replica, target)
        elif target is _R.ONLINE_REPLICA:
            for replica in valid:
                tp = replica.topic_partition
                assignment = ctx.partition_full_replica_assignment(tp)
                if ctx.replica_state(replica) is _R.NEW_REPLICA:
                    if replica_id not in assignment.replicas:
                        replicas_now = (*assignment.replicas, replica_id)
                        ctx.update_partition_full_replica_assignment(
                            tp, replace(assignment, replicas=replicas_now)
                        )
                else:
                    info = ctx.partition_leadership_info.get(tp)
                    if info is not None:
                        self.batch.add_leader_and_isr_request_for_brokers(
                            [replica_id], tp, info, assignment, False
                        )
                self._change_state(replica, target)
        elif target is _R.OFFLINE_REPLICA:
            for replica in valid:
                self.batch.add_stop_replica_request_for_brokers(
                    [replica_id], replica.topic_partition, delete_partition=False
                )
            with_leadership = [
                r for r in valid if r.topic_partition in ctx.partition_leadership_info
            ]
            updated = self._remove_replicas_from_isr(
                replica_id, [r.topic_partition for r in with_leadership]
            )
            for replica in valid:
                tp = replica.topic_partition
                if tp in updated and not ctx.is_topic_queued_up_for_deletion(tp.topic):
                    recipients = [
                        r for r in ctx.partition_replica_assignment(tp) if r != replica_id
                    ]
                    self.batch.add_leader_and_isr_request_for_brokers(
                        recipients,
                        tp,
                        updated[tp],
                        ctx.partition_full_replica_assignment(tp),
                        False,
                    )
                elif tp not in ctx.partition_leadership_info:
                    self.batch.add_update_metadata_request_for_brokers(
                        ctx.live_or_shutting_down_broker_ids, [tp]
                    )
                self._change_state(replica, target)
        elif target is _R.REPLICA_DELETION_STARTED:
            for replica in valid:
                self.batch.add_stop_replica_request_for_brokers(
                    [replica_id], replica.topic_partition, delete_partition=True
                )
                self._change_state(replica, target)
        elif target is _R.NON_EXISTENT_REPLICA:
            for replica in valid:
                tp = replica.topic_partition
                assignment = ctx.partition_full_replica_assignment(tp)
                remaining = tuple(r for r in assignment.replicas if r != replica_id)
                ctx.update_partition_full_replica_assignment(
                    tp, replace(assignment, replicas=remaining)
                )
                self._change_state(replica, target)
        else:
            for replica in valid:
                self._change_state(replica, target)
        return errors

    def _change_state(self, replica: PartitionAndReplica, target: ReplicaState) -> None:
        current = self.context.replica_state(replica)
        if target is _R.NON_EXISTENT_REPLICA:
            self.context.replica_states.pop(replica, None)
        else:
            self.context.replica_states[replica] = target
        log.debug("changed state of replica %s from %s to %s", replica, current, target)

    def _remove_replicas_from_isr(
        self, replica_id: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Take ``replica_id`` out of the ISR (and leadership) of ``partitions`` in ZooKeeper."""
        results: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        remaining = partitions
        while remaining:
            remaining = self._do_remove_replicas_from_isr(replica_id, remaining, results)
        return results

    def _do_remove_replicas_from_isr(
        self,
        replica_id: int,
        partitions: list[TopicPartition],
        results: dict[TopicPartition, LeaderIsrAndControllerEpoch],
    ) -> list[TopicPartition]:
        ctx = self.context
        adjusted: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, info in self.zk_client.get_topic_partition_states(partitions).items():
            if info.controller_epoch > ctx.epoch:
                log.error(
                    "not removing replica %d from the ISR of %s: newer controller epoch %d",
                    replica_id,
                    tp,
                    info.controller_epoch,
                )
                continue
            lai = info.leader_and_isr
            if replica_id not in lai.isr:
                results[tp] = info
                continue
            new_leader = NO_LEADER if lai.leader == replica_id else lai.leader
            new_isr = lai.isr if len(lai.isr) == 1 else tuple(r for r in lai.isr if r != replica_id)
            adjusted[tp] = lai.new_leader_and_isr(new_leader, new_isr)
        if not adjusted:
            return []
        update = self.zk_client.update_leader_and_isr(adjusted, ctx.epoch, ctx.epoch_zk_version)
        for tp, outcome in update.finished.items():
            if isinstance(outcome, Exception):
                log.error(
                    "failed to remove replica %d from the ISR of %s: %s", replica_id, tp, outcome
                )
                continue
            info = LeaderIsrAndControllerEpoch(outcome, ctx.epoch)
            ctx.partition_leadership_info[tp] = info
            results[tp] = info
        return update.partitions_to_retry
