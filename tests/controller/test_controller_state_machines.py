"""Partition and replica state machines: Kafka's transition tables, enforced."""

from __future__ import annotations

import itertools

import pytest

from sluice.base import TopicPartition
from sluice.controller import (
    AdminZkClient,
    Broker,
    ControllerBrokerRequestBatch,
    ControllerContext,
    IllegalStateError,
    KafkaZkClient,
    LeaderAndIsr,
    LeaderAndIsrRequest,
    OfflinePartitionLeaderElectionStrategy,
    PartitionState,
    PartitionStateMachine,
    RecordingControllerChannel,
    ReplicaAssignment,
    ReplicaState,
    ReplicaStateMachine,
    StateChangeFailedError,
    StopReplicaRequest,
)
from sluice.controller.states import (
    PARTITION_VALID_PREVIOUS_STATES,
    REPLICA_VALID_PREVIOUS_STATES,
    PartitionAndReplica,
)
from sluice.metastore import InProcessStore

P, R = PartitionState, ReplicaState
TP = TopicPartition("t", 0)

KAFKA_PARTITION_TRANSITIONS = {
    (P.NON_EXISTENT_PARTITION, P.NEW_PARTITION),
    (P.NEW_PARTITION, P.ONLINE_PARTITION),
    (P.NEW_PARTITION, P.OFFLINE_PARTITION),
    (P.ONLINE_PARTITION, P.ONLINE_PARTITION),
    (P.ONLINE_PARTITION, P.OFFLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.ONLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.OFFLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.NON_EXISTENT_PARTITION),
}
KAFKA_REPLICA_TRANSITIONS = {
    (R.NON_EXISTENT_REPLICA, R.NEW_REPLICA),
    *(
        (s, R.ONLINE_REPLICA)
        for s in (R.NEW_REPLICA, R.ONLINE_REPLICA, R.OFFLINE_REPLICA, R.REPLICA_DELETION_INELIGIBLE)
    ),
    *(
        (s, R.OFFLINE_REPLICA)
        for s in (R.NEW_REPLICA, R.ONLINE_REPLICA, R.OFFLINE_REPLICA, R.REPLICA_DELETION_INELIGIBLE)
    ),
    (R.OFFLINE_REPLICA, R.REPLICA_DELETION_STARTED),
    (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_SUCCESSFUL),
    (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_INELIGIBLE),
    (R.OFFLINE_REPLICA, R.REPLICA_DELETION_INELIGIBLE),
    (R.REPLICA_DELETION_SUCCESSFUL, R.NON_EXISTENT_REPLICA),
}


def test_the_transition_tables_are_kafkas() -> None:
    partition = {(s, t) for t, prev in PARTITION_VALID_PREVIOUS_STATES.items() for s in prev}
    replica = {(s, t) for t, prev in REPLICA_VALID_PREVIOUS_STATES.items() for s in prev}
    assert partition == KAFKA_PARTITION_TRANSITIONS
    assert replica == KAFKA_REPLICA_TRANSITIONS


class Machines:
    def __init__(self, live: tuple[int, ...] = (1, 2, 3), unclean: bool = False) -> None:
        self.zk = KafkaZkClient(InProcessStore())
        self.zk.create_top_level_paths()
        AdminZkClient(self.zk).create_topic_with_assignment("t", {0: [1, 2, 3]})
        self.zk.register_controller_and_increment_controller_epoch(1)
        epoch = self.zk.get_controller_epoch()
        assert epoch is not None
        self.context = ControllerContext()
        self.context.epoch, self.context.epoch_zk_version = epoch
        self.context.add_live_brokers({Broker.plaintext(b, "h", 9000 + b): 100 + b for b in live})
        self.context.update_partition_full_replica_assignment(TP, ReplicaAssignment((1, 2, 3)))
        self.context.all_topics.add("t")
        self.channel = RecordingControllerChannel()
        batch = ControllerBrokerRequestBatch(1, self.context, self.channel)
        self.psm = PartitionStateMachine(self.context, self.zk, batch, lambda topic: unclean)
        self.rsm = ReplicaStateMachine(self.context, self.zk, batch)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(list(P), list(P))))
def test_partition_transitions_outside_the_table_are_refused(source: P, target: P) -> None:
    if (source, target) in KAFKA_PARTITION_TRANSITIONS:
        return
    m = Machines()
    if source is not P.NON_EXISTENT_PARTITION:
        m.context.partition_states[TP] = source
    results = m.psm.handle_state_changes([TP], target)
    assert isinstance(results[TP], IllegalStateError)
    assert m.context.partition_state(TP) is source
    assert m.channel.sent == []


@pytest.mark.parametrize(("source", "target"), list(itertools.product(list(R), list(R))))
def test_replica_transitions_outside_the_table_are_refused(source: R, target: R) -> None:
    if (source, target) in KAFKA_REPLICA_TRANSITIONS:
        return
    m = Machines()
    replica = PartitionAndReplica(TP, 2)
    if source is not R.NON_EXISTENT_REPLICA:
        m.context.replica_states[replica] = source
    errors = m.rsm.handle_state_changes([replica], target)
    assert isinstance(errors[replica], StateChangeFailedError)
    assert m.context.replica_state(replica) is source
    assert m.channel.sent == []


def test_a_new_partition_goes_online_with_the_first_live_replica() -> None:
    m = Machines(live=(2, 3))
    m.psm.handle_state_changes([TP], P.NEW_PARTITION)
    results = m.psm.handle_state_changes([TP], P.ONLINE_PARTITION)
    assert results[TP] == LeaderAndIsr(2, (2, 3), 0, 0)
    assert m.context.partition_state(TP) is P.ONLINE_PARTITION
    assert m.zk.get_topic_partition_states([TP])[TP].leader_and_isr == LeaderAndIsr(2, (2, 3))
    recipients = {s.broker_id for s in m.channel.sent if isinstance(s.request, LeaderAndIsrRequest)}
    assert recipients == {2, 3}


def test_a_new_partition_without_live_replicas_stays_new() -> None:
    m = Machines(live=(4,))
    m.psm.handle_state_changes([TP], P.NEW_PARTITION)
    results = m.psm.handle_state_changes([TP], P.ONLINE_PARTITION)
    assert isinstance(results[TP], StateChangeFailedError)
    assert m.context.partition_state(TP) is P.NEW_PARTITION
    assert m.zk.get_topic_partition_states([TP]) == {}


def test_offline_partition_election_honours_unclean_from_the_topic() -> None:
    for unclean, expected in ((False, None), (True, 3)):
        m = Machines(unclean=unclean)
        m.psm.handle_state_changes([TP], P.NEW_PARTITION)
        m.psm.handle_state_changes([TP], P.ONLINE_PARTITION)
        # Broker 1 held the only ISR slot and died.
        m.zk.update_leader_and_isr({TP: LeaderAndIsr(1, (1,), 0, 0)}, 1, m.context.epoch_zk_version)
        m.context.remove_live_brokers([1, 2])
        m.psm.handle_state_changes([TP], P.OFFLINE_PARTITION)
        results = m.psm.handle_state_changes(
            [TP], P.ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy()
        )
        outcome = results[TP]
        if expected is None:
            assert isinstance(outcome, StateChangeFailedError)
            assert m.context.partition_state(TP) is P.OFFLINE_PARTITION
        else:
            assert outcome == LeaderAndIsr(3, (3,), 1, 2)
            assert m.context.partition_state(TP) is P.ONLINE_PARTITION


def test_an_offline_replica_leaves_the_isr_and_gets_stop_replica() -> None:
    m = Machines()
    m.psm.handle_state_changes([TP], P.NEW_PARTITION)
    replicas = [PartitionAndReplica(TP, r) for r in (1, 2, 3)]
    m.rsm.handle_state_changes(replicas, R.NEW_REPLICA)
    m.psm.handle_state_changes([TP], P.ONLINE_PARTITION)
    m.rsm.handle_state_changes(replicas, R.ONLINE_REPLICA)
    m.channel.take()

    m.rsm.handle_state_changes([replicas[1]], R.OFFLINE_REPLICA)
    state = m.zk.get_topic_partition_states([TP])[TP].leader_and_isr
    assert (state.leader, state.isr, state.leader_epoch) == (1, (1, 3), 1)
    sent = m.channel.take()
    stops = [s for s in sent if isinstance(s.request, StopReplicaRequest)]
    assert [(s.broker_id, s.request.partition_states[0].delete_partition) for s in stops] == [
        (2, False)
    ]
    told = {s.broker_id for s in sent if isinstance(s.request, LeaderAndIsrRequest)}
    assert told == {1, 3}
    # The leader going offline leaves no leader (it was not the last ISR member).
    m.rsm.handle_state_changes([replicas[0]], R.OFFLINE_REPLICA)
    state = m.zk.get_topic_partition_states([TP])[TP].leader_and_isr
    assert (state.leader, state.isr) == (-1, (3,))


def test_a_replica_deleted_for_good_leaves_the_assignment() -> None:
    m = Machines()
    replica = PartitionAndReplica(TP, 3)
    for target in (
        R.NEW_REPLICA,
        R.ONLINE_REPLICA,
        R.OFFLINE_REPLICA,
        R.REPLICA_DELETION_STARTED,
        R.REPLICA_DELETION_SUCCESSFUL,
        R.NON_EXISTENT_REPLICA,
    ):
        assert m.rsm.handle_state_changes([replica], target) == {}
    assert m.context.partition_replica_assignment(TP) == (1, 2)
    assert replica not in m.context.replica_states


def test_a_leader_cannot_become_a_new_replica() -> None:
    m = Machines()
    m.psm.handle_state_changes([TP], P.NEW_PARTITION)
    m.psm.handle_state_changes([TP], P.ONLINE_PARTITION)
    errors = m.rsm.handle_state_changes([PartitionAndReplica(TP, 1)], R.NEW_REPLICA)
    assert isinstance(errors[PartitionAndReplica(TP, 1)], StateChangeFailedError)
