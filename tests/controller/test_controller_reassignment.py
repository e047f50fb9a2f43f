"""Partition reassignment (KIP-455): adding replicas, waiting for the ISR, removing."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from sluice.base import TopicPartition
from sluice.controller import KafkaController, ReplicaAssignment, ReplicaState
from sluice.controller.events import ApiError
from sluice.controller.states import PartitionAndReplica
from sluice.protocol.errors import ErrorCode
from support.controller import (
    InProcessCluster,
    leader_and_isr_to,
    stop_replica_to,
    update_metadata_to,
)

TP = TopicPartition("t", 0)


def alter(
    controller: KafkaController,
    cluster: InProcessCluster,
    reassignments: Mapping[TopicPartition, tuple[int, ...] | None],
    allow_rf_change: bool = True,
) -> Mapping[TopicPartition, ApiError] | ApiError:
    answers: list[Mapping[TopicPartition, ApiError] | ApiError] = []
    controller.alter_partition_reassignments(
        dict(reassignments), answers.append, allow_replication_factor_change=allow_rf_change
    )
    cluster.run()
    assert len(answers) == 1
    return answers[0]


def listed(
    controller: KafkaController, cluster: InProcessCluster, partitions: set[TopicPartition] | None
) -> Mapping[TopicPartition, ReplicaAssignment] | ApiError:
    answers: list[Mapping[TopicPartition, ReplicaAssignment] | ApiError] = []
    controller.list_partition_reassignments(partitions, answers.append)
    cluster.run()
    assert len(answers) == 1
    return answers[0]


def codes(result: Mapping[TopicPartition, ApiError] | ApiError) -> dict[TopicPartition, ErrorCode]:
    assert isinstance(result, Mapping)
    return {tp: error.code for tp, error in result.items()}


def assignment(cluster: InProcessCluster, topic: str = "t") -> dict[int, ReplicaAssignment]:
    found = cluster.admin_zk.get_topic_assignment(topic)
    assert found is not None
    return found[1]


def test_reassignment_adds_waits_for_the_isr_then_removes(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [1, 2]})
    controller = cluster.active().controller
    before = cluster.state("t", 0)
    assert (before.leader, before.isr) == (1, (1, 2))
    cluster.sent()

    assert codes(alter(controller, cluster, {TP: (2, 3)})) == {TP: ErrorCode.none}

    # RS = TRS + ORS, adding = TRS - ORS, removing = ORS - TRS: in ZooKeeper and memory.
    moving = ReplicaAssignment((2, 3, 1), (3,), (1,))
    assert assignment(cluster)[0] == moving
    assert controller.context.partition_full_replica_assignment(TP) == moving
    assert listed(controller, cluster, None) == {TP: moving}
    assert listed(controller, cluster, {TP, TopicPartition("t", 7)}) == {TP: moving}
    # The leader epoch is bumped and every replica of RS hears of the new assignment.
    state = cluster.state("t", 0)
    assert (state.leader, state.isr, state.leader_epoch) == (1, (1, 2), before.leader_epoch + 1)
    sent = cluster.sent()
    for broker_id in (1, 2, 3):
        [request, *_] = leader_and_isr_to(sent, broker_id)
        [ps] = request.partition_states
        assert (ps.leader, ps.leader_epoch, ps.replicas) == (1, state.leader_epoch, (2, 3, 1))
        assert (ps.adding_replicas, ps.removing_replicas) == ((3,), (1,))
        assert ps.is_new == (broker_id == 3)
    assert stop_replica_to(sent, 1) == []
    new_replica = PartitionAndReplica(TP, 3)
    assert controller.context.replica_state(new_replica) is ReplicaState.NEW_REPLICA

    # Not yet: only one of the target replicas joined the ISR.
    cluster.leader_changes_isr("t", 0, [1, 2])
    assert assignment(cluster)[0] == moving

    cluster.leader_changes_isr("t", 0, [1, 2, 3])

    assert assignment(cluster)[0] == ReplicaAssignment((2, 3))
    assert controller.context.partition_full_replica_assignment(TP) == ReplicaAssignment((2, 3))
    assert TP not in controller.context.partitions_being_reassigned
    assert listed(controller, cluster, None) == {}
    state = cluster.state("t", 0)
    assert (state.leader, state.isr) == (2, (2, 3))  # the first live TRS replica in the ISR
    sent = cluster.sent()
    stops = stop_replica_to(sent, 1)
    assert [r.partition_states[0].delete_partition for r in stops] == [False, True]
    assert stop_replica_to(sent, 2) == stop_replica_to(sent, 3) == []
    last = leader_and_isr_to(sent, 3)[-1].partition_states[0]
    assert (last.leader, last.isr, last.replicas) == (2, (2, 3), (2, 3))
    assert last.leader_epoch == state.leader_epoch
    for broker_id in (1, 2, 3):
        final = update_metadata_to(sent, broker_id)[-1].partition_states
        assert [(s.leader, s.isr, s.replicas) for s in final] == [(2, (2, 3), (2, 3))]
    ctx = controller.context
    assert ctx.replica_state(new_replica) is ReplicaState.ONLINE_REPLICA
    assert ctx.replica_state(PartitionAndReplica(TP, 1)) is ReplicaState.NON_EXISTENT_REPLICA


def test_a_leader_in_the_target_keeps_leading_with_a_new_epoch(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [1, 2]})
    controller = cluster.active().controller
    alter(controller, cluster, {TP: (1, 3)})
    epoch = cluster.state("t", 0).leader_epoch
    cluster.sent()

    cluster.leader_changes_isr("t", 0, [1, 2, 3])

    state = cluster.state("t", 0)
    assert (state.leader, state.isr) == (1, (1, 3))
    assert state.leader_epoch > epoch
    assert assignment(cluster)[0] == ReplicaAssignment((1, 3))
    sent = cluster.sent()
    assert [r.partition_states[0].delete_partition for r in stop_replica_to(sent, 2)] == [
        False,
        True,
    ]
    assert all(s.leader == 1 for r in leader_and_isr_to(sent, 3) for s in r.partition_states)


def test_a_reassignment_already_satisfied_completes_at_once(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [1, 2]})
    controller = cluster.active().controller

    assert codes(alter(controller, cluster, {TP: (2, 1)})) == {TP: ErrorCode.none}

    assert assignment(cluster)[0] == ReplicaAssignment((2, 1))
    assert listed(controller, cluster, None) == {}
    assert cluster.state("t", 0).leader == 1  # the leader is in the target: it stays


def test_cancelling_reverts_to_the_original_replicas(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [1, 2]})
    controller = cluster.active().controller
    alter(controller, cluster, {TP: (2, 3)})
    cluster.leader_changes_isr("t", 0, [1, 2, 3])  # completes; now move from [2, 3]
    assert assignment(cluster)[0] == ReplicaAssignment((2, 3))
    alter(controller, cluster, {TP: (3, 1)})
    assert assignment(cluster)[0] == ReplicaAssignment((3, 1, 2), (1,), (2,))
    cluster.sent()

    assert codes(alter(controller, cluster, {TP: None})) == {TP: ErrorCode.none}

    # ORS is RS minus the adding replicas, in RS order (as Kafka computes it).
    assert assignment(cluster)[0] == ReplicaAssignment((3, 2))
    assert listed(controller, cluster, None) == {}
    sent = cluster.sent()
    assert [r.partition_states[0].delete_partition for r in stop_replica_to(sent, 1)] == [
        False,
        True,
    ]
    ctx = controller.context
    assert ctx.replica_state(PartitionAndReplica(TP, 1)) is ReplicaState.NON_EXISTENT_REPLICA
    assert cluster.state("t", 0).leader == 2

    # Nothing left to cancel.
    result = alter(controller, cluster, {TP: None})
    assert codes(result) == {TP: ErrorCode.no_reassignment_in_progress}


def test_a_new_target_replaces_the_one_in_progress(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [1]})
    controller = cluster.active().controller
    alter(controller, cluster, {TP: (2,)})
    assert assignment(cluster)[0] == ReplicaAssignment((2, 1), (2,), (1,))
    cluster.sent()

    alter(controller, cluster, {TP: (3,)})

    # Broker 2 was only being added: it is dropped (and its replica deleted) at once.
    assert assignment(cluster)[0] == ReplicaAssignment((3, 1), (3,), (1,))
    sent = cluster.sent()
    assert [r.partition_states[0].delete_partition for r in stop_replica_to(sent, 2)] == [
        False,
        True,
    ]
    cluster.leader_changes_isr("t", 0, [1, 3])
    assert assignment(cluster)[0] == ReplicaAssignment((3,))
    assert (cluster.state("t", 0).leader, cluster.state("t", 0).isr) == (3, (3,))


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ((), ErrorCode.invalid_replica_assignment),
        ((2, 2), ErrorCode.invalid_replica_assignment),
        ((2, -1), ErrorCode.invalid_replica_assignment),
        ((2, 9), ErrorCode.invalid_replica_assignment),
    ],
)
def test_bad_targets_are_refused(
    cluster: InProcessCluster, target: tuple[int, ...], expected: ErrorCode
) -> None:
    cluster.create_topic("t", {0: [1, 2]})
    controller = cluster.active().controller
    result = alter(controller, cluster, {TP: target})
    assert codes(result) == {TP: expected}
    assert isinstance(result, Mapping) and result[TP].message
    assert assignment(cluster)[0] == ReplicaAssignment((1, 2))


def test_unknown_partitions_and_replication_factor_changes(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [1, 2]})
    controller = cluster.active().controller
    missing, other = TopicPartition("t", 5), TopicPartition("nope", 0)

    result = alter(controller, cluster, {missing: (1, 2), other: (1,), TP: (3,)}, False)

    assert codes(result) == {
        missing: ErrorCode.unknown_topic_or_partition,
        other: ErrorCode.unknown_topic_or_partition,
        TP: ErrorCode.invalid_replica_assignment,
    }
    result = alter(controller, cluster, {TP: (3, 2)}, False)
    assert codes(result) == {TP: ErrorCode.none}
    # Cancelling is checked before existence, as in Kafka.
    assert codes(alter(controller, cluster, {missing: None})) == {
        missing: ErrorCode.no_reassignment_in_progress
    }


def test_only_the_controller_answers(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [1, 2]})
    follower = cluster.nodes[2].controller
    assert alter(follower, cluster, {TP: (2, 3)}) == ApiError(ErrorCode.not_controller)
    assert listed(follower, cluster, None) == ApiError(ErrorCode.not_controller)


def test_a_new_controller_resumes_the_reassignment() -> None:
    cluster = InProcessCluster((1, 2, 3, 4))
    cluster.run()
    cluster.create_topic("t", {0: [2, 3]})
    alter(cluster.active().controller, cluster, {TP: (3, 4)})
    moving = ReplicaAssignment((3, 4, 2), (4,), (2,))
    assert assignment(cluster)[0] == moving

    cluster.kill(1)
    cluster.run(first=[2])

    new = cluster.active()
    assert new.broker.id == 2
    assert listed(new.controller, cluster, None) == {TP: moving}
    sent = cluster.sent()
    resumed = [s for r in leader_and_isr_to(sent, 4) for s in r.partition_states]
    assert resumed and resumed[-1].adding_replicas == (4,)

    cluster.leader_changes_isr("t", 0, [2, 3, 4])

    assert assignment(cluster)[0] == ReplicaAssignment((3, 4))
    state = cluster.state("t", 0)
    assert (state.leader, state.isr) == (3, (3, 4))
    assert listed(new.controller, cluster, None) == {}


def test_deleting_a_topic_waits_for_its_reassignment(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [1, 2]})
    controller = cluster.active().controller
    alter(controller, cluster, {TP: (2, 3)})
    cluster.admin.delete_topic("t")
    cluster.run()
    assert "t" in controller.context.topics_ineligible_for_deletion

    # Reassigning a topic queued for deletion is refused.
    assert codes(alter(controller, cluster, {TP: (3,)})) == {
        TP: ErrorCode.unknown_topic_or_partition
    }
    # Once the reassignment completes, the deletion goes ahead.
    cluster.leader_changes_isr("t", 0, [1, 2, 3])
    assert "t" not in controller.context.topics_ineligible_for_deletion
    assert controller.context.is_topic_deletion_in_progress("t")


def test_an_adding_replica_that_dies_and_returns_gets_the_reassignment_again(
    cluster: InProcessCluster,
) -> None:
    cluster.create_topic("t", {0: [1, 2]})
    controller = cluster.active().controller
    alter(controller, cluster, {TP: (2, 3)})
    cluster.kill(3)
    cluster.run()
    ctx = controller.context
    assert ctx.replica_state(PartitionAndReplica(TP, 3)) is ReplicaState.OFFLINE_REPLICA
    assert listed(controller, cluster, None) == {TP: ReplicaAssignment((2, 3, 1), (3,), (1,))}
    cluster.sent()

    cluster.restart(3)
    cluster.run()

    sent = cluster.sent()
    resumed = [s for r in leader_and_isr_to(sent, 3) for s in r.partition_states]
    assert resumed and resumed[-1].replicas == (2, 3, 1)
    assert resumed[-1].leader_epoch == cluster.state("t", 0).leader_epoch
    cluster.leader_changes_isr("t", 0, [1, 2, 3])
    assert assignment(cluster)[0] == ReplicaAssignment((2, 3))
    assert (cluster.state("t", 0).leader, cluster.state("t", 0).isr) == (2, (2, 3))
