"""The partition state machine (Kafka's ``ZkPartitionStateMachine``).

Moves partitions between NewPartition, OnlinePartition, OfflinePartition and
NonExistentPartition. Going online elects a leader: a new partition's first live
replica with all live replicas as ISR; an existing partition by the given
:mod:`election strategy <.leader_election>`. Each election is written to the
partition's state znode (fenced by the controller epoch) before the context and the
brokers (LeaderAndIsr to the live replicas, UpdateMetadata to all) hear of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from sluice.base import TopicPartition
from sluice.base.log_summary import summarize

from .context import ControllerContext
from .errors import ControllerMovedError, IllegalStateError, StateChangeFailedError
from .kafka_zk_client import KafkaZkClient
from .leader_election import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    ElectionResult,
    OfflinePartitionLeaderElectionStrategy,
    PartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
    elect_for_controlled_shutdown,
    elect_for_offline,
    elect_for_preferred,
    elect_for_reassignment,
)
from .model import LeaderAndIsr, LeaderIsrAndControllerEpoch
from .request_batch import ControllerBrokerRequestBatch
from .states import PARTITION_VALID_PREVIOUS_STATES, PartitionState

__all__ = ["PartitionStateMachine", "StateChangeResults"]

log = logging.getLogger("sluice.controller.state.change")

StateChangeResults = dict[TopicPartition, LeaderAndIsr | Exception]
_P = PartitionState


class PartitionStateMachine:
    """Drives partition state transitions and leader election for the controller."""

    def __init__(
        self,
        context: ControllerContext,
        zk_client: KafkaZkClient,
        batch: ControllerBrokerRequestBatch,
        unclean_leader_election_enabled: Callable[[str], bool],
    ) -> None:
        self.context = context
        self.zk_client = zk_client
        self.batch = batch
        self.unclean_leader_election_enabled = unclean_leader_election_enabled
        # Leaders this state machine elected, and those of them out of the ISR (Kafka's
        # LeaderElectionRateAndTimeMs and UncleanLeaderElectionsPerSec counts).
        self.leader_elections = 0
        self.unclean_leader_elections = 0

    def startup(self) -> None:
        self._initialize_partition_state()
        self.trigger_online_partition_state_change()

    def shutdown(self) -> None:
        self.context.partition_states.clear()

    def _initialize_partition_state(self) -> None:
        for tp in self.context.all_partitions():
            info = self.context.partition_leadership_info.get(tp)
            if info is None:
                self.context.partition_states[tp] = _P.NEW_PARTITION
            elif self.context.is_replica_online(info.leader_and_isr.leader, tp):
                self.context.partition_states[tp] = _P.ONLINE_PARTITION
            else:
                self.context.partition_states[tp] = _P.OFFLINE_PARTITION

    def trigger_online_partition_state_change(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> StateChangeResults:
        """Try to bring New and Offline partitions (not being deleted) online."""
        candidates = self.context.partitions_in_states(_P.OFFLINE_PARTITION, _P.NEW_PARTITION)
        if partitions is not None:
            candidates &= set(partitions)
        candidates = {
            tp for tp in candidates if not self.context.is_topic_queued_up_for_deletion(tp.topic)
        }
        return self.handle_state_changes(
            candidates, _P.ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy(False)
        )

    def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target_state: PartitionState,
        strategy: PartitionLeaderElectionStrategy | None = None,
    ) -> StateChangeResults:
        """Move ``partitions`` to ``target_state``; the result per partition that was elected
        (its LeaderAndIsr) or refused (the error). Requests go out at the end."""
        partitions = sorted(set(partitions))
        if not partitions:
            return {}
        self.batch.new_batch()
        try:
            results = self._do_handle_state_changes(partitions, target_state, strategy)
            self.batch.send_requests_to_brokers(self.context.epoch)
            return results
        except ControllerMovedError:
            self.batch.clear()
            raise
        except Exception:
            log.exception("error while moving partitions %s to %s", partitions, target_state)
            self.batch.clear()
            return {}

    def _do_handle_state_changes(
        self,
        partitions: list[TopicPartition],
        target: PartitionState,
        strategy: PartitionLeaderElectionStrategy | None,
    ) -> StateChangeResults:
        results: StateChangeResults = {}
        valid = []
        for tp in partitions:
            current = self.context.partition_state(tp)
            if current in PARTITION_VALID_PREVIOUS_STATES[target]:
                valid.append(tp)
            else:
                results[tp] = IllegalStateError(
                    f"partition {tp} should be in one of "
                    f"{sorted(map(str, PARTITION_VALID_PREVIOUS_STATES[target]))} before moving "
                    f"to {target}; it is in {current}"
                )
                log.error("invalid partition state transition: %s", results[tp])
        if target is _P.ONLINE_PARTITION:
            new = [tp for tp in valid if self.context.partition_state(tp) is _P.NEW_PARTITION]
            new_set = set(new)
            existing = [tp for tp in valid if tp not in new_set]
            results.update(self._initialize_leader_and_isr_for_partitions(new))
            if existing:
                elections = self._elect_leader_for_partitions(
                    existing, strategy or OfflinePartitionLeaderElectionStrategy(False)
                )
                results.update(elections)
            elected: dict[PartitionState, list[tuple[TopicPartition, LeaderAndIsr]]] = {}
            for tp, outcome in results.items():
                if isinstance(outcome, LeaderAndIsr):
                    elected.setdefault(self.context.partition_state(tp), []).append((tp, outcome))
                    self._change_state(tp, _P.ONLINE_PARTITION, outcome)
            for previous, changes in elected.items():
                self._log_elected(previous, changes)
        else:
            for tp in valid:
                self._change_state(tp, target)
        return results

    def _change_state(
        self, tp: TopicPartition, target: PartitionState, lai: LeaderAndIsr | None = None
    ) -> None:
        current = self.context.partition_state(tp)
        if target is _P.NON_EXISTENT_PARTITION:
            self.context.partition_states.pop(tp, None)
        else:
            self.context.partition_states[tp] = target
        if lai is not None:
            log.debug(
                "changed partition %s from %s to %s with leader %d, leader epoch %d, isr %s",
                tp,
                current,
                target,
                lai.leader,
                lai.leader_epoch,
                list(lai.isr),
            )
        else:
            log.debug("changed partition %s from %s to %s", tp, current, target)

    def _log_elected(
        self, previous: PartitionState, changes: list[tuple[TopicPartition, LeaderAndIsr]]
    ) -> None:
        """One line for the partitions one state change brought online from ``previous``
        (a topic's creation, a failover), each also at DEBUG above."""
        controller_id = self.batch.controller_id
        epoch = self.context.epoch
        fields: dict[str, object] = {
            "event": "leaders_elected", "controller_id": controller_id, "controller_epoch": epoch,
            "from_state": str(previous), "partition_count": len(changes),
        }  # fmt: skip
        if len(changes) == 1:
            tp, lai = changes[0]
            fields.update(topic=tp.topic, partition=tp.partition, leader_id=lai.leader,
                          leader_epoch=lai.leader_epoch, isr=list(lai.isr))  # fmt: skip
        log.info(
            "[Controller id=%d epoch=%d] Elected leaders of %d partitions (%s to %s): %s",
            controller_id, epoch, len(changes), previous, _P.ONLINE_PARTITION,
            summarize(changes, _describe_election),
            extra=fields,
        )  # fmt: skip

    def _initialize_leader_and_isr_for_partitions(
        self, partitions: list[TopicPartition]
    ) -> StateChangeResults:
        results: StateChangeResults = {}
        states = {}
        for tp in partitions:
            replicas = self.context.partition_replica_assignment(tp)
            live = [r for r in replicas if self.context.is_replica_online(r, tp)]
            if not live:
                results[tp] = StateChangeFailedError(
                    f"controller failed to elect a leader for new partition {tp}: "
                    f"none of the assigned replicas {list(replicas)} is alive"
                )
                continue
            lai = LeaderAndIsr(leader=live[0], isr=tuple(live))
            states[tp] = LeaderIsrAndControllerEpoch(lai, self.context.epoch)
        _log_unelected("new partitions with no live replica", list(results))
        created = self.zk_client.create_topic_partition_states(
            states, self.context.epoch_zk_version
        )
        for tp, outcome in created.items():
            if isinstance(outcome, Exception):
                results[tp] = StateChangeFailedError(
                    f"could not write the initial state of partition {tp}: {outcome}"
                )
                log.error("%s", results[tp])
                continue
            info = LeaderIsrAndControllerEpoch(outcome, self.context.epoch)
            self.context.partition_leadership_info[tp] = info
            self.batch.add_leader_and_isr_request_for_brokers(
                outcome.isr, tp, info, self.context.partition_full_replica_assignment(tp), True
            )
            results[tp] = outcome
        return results

    def _elect_leader_for_partitions(
        self, partitions: list[TopicPartition], strategy: PartitionLeaderElectionStrategy
    ) -> StateChangeResults:
        finished: StateChangeResults = {}
        remaining = partitions
        while remaining:
            done, remaining = self._do_elect_leader_for_partitions(remaining, strategy)
            finished.update(done)
        return finished

    def _do_elect_leader_for_partitions(
        self, partitions: list[TopicPartition], strategy: PartitionLeaderElectionStrategy
    ) -> tuple[StateChangeResults, list[TopicPartition]]:
        results: StateChangeResults = {}
        current = self.zk_client.get_topic_partition_states(partitions)
        valid: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in partitions:
            info = current.get(tp)
            if info is None:
                results[tp] = StateChangeFailedError(f"LeaderAndIsr of {tp} does not exist")
            elif info.controller_epoch > self.context.epoch:
                results[tp] = StateChangeFailedError(
                    f"aborted leader election for {tp}: its state was written by controller "
                    f"epoch {info.controller_epoch}, newer than ours ({self.context.epoch})"
                )
            else:
                valid[tp] = info.leader_and_isr
        elections = [self._elect(tp, lai, strategy) for tp, lai in valid.items()]
        unelected: list[TopicPartition] = []
        adjusted: dict[TopicPartition, LeaderAndIsr] = {}
        recipients: dict[TopicPartition, tuple[int, ...]] = {}
        for election in elections:
            tp = election.topic_partition
            if election.leader_and_isr is None:
                results[tp] = StateChangeFailedError(
                    f"failed to elect a leader for partition {tp} under strategy "
                    f"{type(strategy).__name__}"
                )
                unelected.append(tp)
            else:
                adjusted[tp] = election.leader_and_isr
                recipients[tp] = election.live_replicas
        _log_unelected(f"partitions under {type(strategy).__name__}", unelected)
        if not adjusted:
            return results, []
        update = self.zk_client.update_leader_and_isr(
            adjusted, self.context.epoch, self.context.epoch_zk_version
        )
        for tp, outcome in update.finished.items():
            if isinstance(outcome, Exception):
                results[tp] = outcome
                continue
            self.leader_elections += 1
            if outcome.leader not in valid[tp].isr:
                self.unclean_leader_elections += 1
            info = LeaderIsrAndControllerEpoch(outcome, self.context.epoch)
            self.context.partition_leadership_info[tp] = info
            self.batch.add_leader_and_isr_request_for_brokers(
                recipients[tp], tp, info, self.context.partition_full_replica_assignment(tp), False
            )
            results[tp] = outcome
        return results, update.partitions_to_retry

    def _elect(
        self, tp: TopicPartition, lai: LeaderAndIsr, strategy: PartitionLeaderElectionStrategy
    ) -> ElectionResult:
        ctx = self.context
        assignment = ctx.partition_replica_assignment(tp)
        if isinstance(strategy, OfflinePartitionLeaderElectionStrategy):
            unclean = strategy.allow_unclean
            if not unclean and not any(ctx.is_replica_online(r, tp) for r in lai.isr):
                unclean = self.unclean_leader_election_enabled(tp.topic)
            return elect_for_offline(tp, lai, assignment, ctx.online_replicas(tp), unclean)
        if isinstance(strategy, PreferredReplicaPartitionLeaderElectionStrategy):
            return elect_for_preferred(tp, lai, assignment, ctx.online_replicas(tp))
        if isinstance(strategy, ControlledShutdownPartitionLeaderElectionStrategy):
            return elect_for_controlled_shutdown(
                tp,
                lai,
                assignment,
                ctx.online_replicas(tp, include_shutting_down=True),
                ctx.shutting_down_broker_ids,
            )
        target = ctx.partition_full_replica_assignment(tp).target_replicas
        return elect_for_reassignment(tp, lai, target, assignment, ctx.online_replicas(tp))


_SAMPLE = 5


def _describe_election(change: tuple[TopicPartition, LeaderAndIsr]) -> str:
    tp, lai = change
    return f"{tp} (leader {lai.leader}, leader epoch {lai.leader_epoch}, ISR {list(lai.isr)})"


def _log_unelected(what: str, partitions: list[TopicPartition]) -> None:
    """One line for every partition left without a leader by one election round (when
    the last brokers stop, every partition they led), not one per partition."""
    if not partitions:
        return
    shown = ", ".join(str(tp) for tp in sorted(partitions)[:_SAMPLE])
    more = f" and {len(partitions) - _SAMPLE} more" if len(partitions) > _SAMPLE else ""
    log.warning("no leader elected for %d %s: %s%s", len(partitions), what, shown, more)
