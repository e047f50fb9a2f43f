"""Moving leaders on purpose: controlled shutdown, preferred replica election, auto
rebalance, unclean election."""

from __future__ import annotations

from sluice.base import TopicPartition
from sluice.controller import (
    AUTO_LEADER_REBALANCE_TASK,
    ControlledShutdownResult,
    ElectionType,
    PartitionState,
    ReplicaLeaderElectionResults,
)
from sluice.controller.zk_data import PreferredReplicaElectionZNode
from sluice.protocol.errors import ErrorCode, KafkaError
from support.controller import InProcessCluster, leader_and_isr_to, stop_replica_to


def shutdown(
    cluster: InProcessCluster, broker_id: int, epoch: int | None = None
) -> ControlledShutdownResult:
    results: list[ControlledShutdownResult] = []
    controller = cluster.active().controller
    if epoch is None:
        epoch = controller.context.live_broker_epochs.get(broker_id, -1)
    controller.controlled_shutdown(broker_id, epoch, results.append)
    cluster.run()
    (result,) = results
    return result


def test_controlled_shutdown_moves_leadership_away(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [3, 1, 2], 1: [1, 3, 2], 2: [3, 2, 1], 3: [3]})
    cluster.sent()
    result = shutdown(cluster, 3)
    assert result.error_code is ErrorCode.none
    assert result.partitions_remaining == frozenset()  # the single-replica partition cannot move
    p0, p1, p2, p3 = (cluster.state("t", p) for p in range(4))
    assert (p0.leader, p0.isr, p0.leader_epoch) == (1, (1, 2), 1)  # next in AR order
    assert (p1.leader, p1.isr, p1.leader_epoch) == (1, (1, 2), 1)  # follower removed
    assert (p2.leader, p2.isr, p2.leader_epoch) == (2, (2, 1), 1)
    assert (p3.leader, p3.isr) == (3, (3,))
    controller = cluster.active().controller
    assert controller.context.shutting_down_broker_ids == {3}
    assert 3 not in controller.context.live_broker_ids
    sent = cluster.sent()
    stops = {
        s.topic_partition.partition for r in stop_replica_to(sent, 3) for s in r.partition_states
    }
    assert stops == {1}
    assert all(not s.delete_partition for r in stop_replica_to(sent, 3) for s in r.partition_states)
    # A broker shutting down still hears about leadership (it is live until it dies).
    assert leader_and_isr_to(sent, 1) and leader_and_isr_to(sent, 2)

    cluster.kill(3)
    cluster.run()
    assert controller.context.shutting_down_broker_ids == set()
    assert cluster.state("t", 0).leader == 1


def test_controlled_shutdown_reports_what_could_not_move(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [3, 1]})
    cluster.leader_changes_isr("t", 0, [3])  # 1 fell out of the ISR
    result = shutdown(cluster, 3)
    assert result.error_code is ErrorCode.none
    assert result.partitions_remaining == frozenset({TopicPartition("t", 0)})
    assert cluster.state("t", 0).leader == 3


def test_controlled_shutdown_errors(cluster: InProcessCluster) -> None:
    assert shutdown(cluster, 9, epoch=-1).error_code is ErrorCode.broker_not_available
    stale = cluster.active().controller.context.live_broker_epochs[2] - 1
    assert shutdown(cluster, 2, epoch=stale).error_code is ErrorCode.stale_broker_epoch
    results: list[ControlledShutdownResult] = []
    cluster.nodes[2].controller.controlled_shutdown(3, -1, results.append)
    cluster.run()
    assert results[0].error_code is ErrorCode.not_controller


def test_preferred_replica_election_through_zookeeper(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [2, 3], 1: [3, 2]})
    cluster.kill(2)
    cluster.run()
    assert cluster.state("t", 0).leader == 3
    cluster.restart(2)
    cluster.run()
    assert cluster.state("t", 0).leader == 3  # no automatic move back without a request
    cluster.leader_changes_isr("t", 0, [3, 2])  # 2 caught up
    epoch = cluster.state("t", 0).leader_epoch

    cluster.admin.elect_preferred_leaders([TopicPartition("t", 0), TopicPartition("t", 1)])
    cluster.run()

    state = cluster.state("t", 0)
    assert (state.leader, state.leader_epoch) == (2, epoch + 1)
    assert cluster.state("t", 1).leader == 3  # already preferred: untouched
    assert cluster.admin_zk.store.exists(PreferredReplicaElectionZNode.path) is None
    # The watch is armed again for the next request.
    cluster.kill(2)
    cluster.run()
    cluster.restart(2)
    cluster.run()
    cluster.leader_changes_isr("t", 0, [3, 2])
    cluster.admin.elect_preferred_leaders([TopicPartition("t", 0)])
    cluster.run()
    assert cluster.state("t", 0).leader == 2


def test_preferred_replica_election_from_the_admin_api(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [2, 3], 1: [3, 2], 2: [1, 2]})
    shutdown(cluster, 2)
    cluster.kill(2)
    cluster.run()
    cluster.restart(2)
    cluster.run()
    cluster.leader_changes_isr("t", 2, [1])  # partition 2 is fine; make 1 the only ISR member
    results: list[ReplicaLeaderElectionResults] = []
    wanted = {TopicPartition("t", p) for p in (0, 1, 2)} | {TopicPartition("nope", 0)}
    cluster.active().controller.elect_leaders(wanted, ElectionType.PREFERRED, results.append)
    cluster.run()
    (outcome,) = results
    # 2 is not back in the ISR of partition 0, so it cannot lead yet.
    error = outcome[TopicPartition("t", 0)]
    assert isinstance(error, KafkaError) and error.code is ErrorCode.preferred_leader_not_available
    not_needed = outcome[TopicPartition("t", 1)]
    assert isinstance(not_needed, KafkaError) and not_needed.code is ErrorCode.election_not_needed
    unknown = outcome[TopicPartition("nope", 0)]
    assert isinstance(unknown, KafkaError) and unknown.code is ErrorCode.unknown_topic_or_partition

    cluster.leader_changes_isr("t", 0, [3, 2])
    cluster.active().controller.elect_leaders(
        {TopicPartition("t", 0)}, ElectionType.PREFERRED, results.append
    )
    cluster.run()
    assert results[1] == {TopicPartition("t", 0): 2}
    assert cluster.state("t", 0).leader == 2


def test_auto_rebalance_elects_preferred_leaders_on_imbalanced_brokers() -> None:
    cluster = InProcessCluster((1, 2, 3), leader_imbalance_per_broker_percentage=20)
    cluster.run()
    # Broker 2 prefers 5 partitions, broker 3 prefers 5.
    assignment = {p: [2, 1] for p in range(5)} | {p: [3, 1] for p in range(5, 10)}
    cluster.create_topic("t", assignment)
    controller = cluster.active().controller
    interval = controller.config.leader_imbalance_check_interval_seconds * 1000
    assert [name for _, name in controller.event_manager.scheduled()] == [
        AUTO_LEADER_REBALANCE_TASK
    ]
    # Leadership of 2 of broker 2's partitions (40%) and 1 of broker 3's (20%) is on 1.
    for p in (0, 1, 5):
        cluster.move_leader_behind_the_controllers_back("t", p, 1)
    epochs = {p: cluster.state("t", p).leader_epoch for p in (0, 1, 5)}
    assert all(
        controller.context.partition_leadership_info[TopicPartition("t", p)].leader_and_isr.leader
        == 1
        for p in (0, 1, 5)
    )

    cluster.clock.advance(4_999)
    cluster.run()
    assert cluster.state("t", 0).leader == 1  # not yet due
    cluster.clock.advance(1)
    cluster.run()

    assert cluster.state("t", 0).leader == 2 and cluster.state("t", 1).leader == 2
    assert cluster.state("t", 0).leader_epoch == epochs[0] + 1
    assert cluster.state("t", 5).leader == 1  # 20% is not more than 20%: left alone
    deadline, name = controller.event_manager.scheduled()[0]
    assert (
        name == AUTO_LEADER_REBALANCE_TASK
        and deadline == cluster.clock.hi_res_clock_ms() + interval
    )


def test_unclean_leader_election_off_leaves_the_partition_offline(
    cluster: InProcessCluster,
) -> None:
    cluster.create_topic("t", {0: [1, 2]})
    cluster.leader_changes_isr("t", 0, [1])
    cluster.kill(1)
    cluster.run()
    state = cluster.state("t", 0)
    assert (state.leader, state.isr) == (-1, (1,))
    tp = TopicPartition("t", 0)
    assert (
        cluster.active().controller.context.partition_state(tp) is PartitionState.OFFLINE_PARTITION
    )
    cluster.restart(1)
    cluster.run()
    assert (cluster.state("t", 0).leader, cluster.state("t", 0).isr) == (1, (1,))


def test_unclean_leader_election_from_the_topic_config(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [1, 2]}, config={"unclean.leader.election.enable": "true"})
    cluster.leader_changes_isr("t", 0, [1])
    cluster.kill(1)
    cluster.run()
    state = cluster.state("t", 0)
    assert (state.leader, state.isr) == (2, (2,))


def test_unclean_leader_election_from_the_broker_config() -> None:
    cluster = InProcessCluster((1, 2, 3), unclean_leader_election_enable=True)
    cluster.run()
    cluster.create_topic("t", {0: [1, 3, 2]})
    cluster.leader_changes_isr("t", 0, [1])
    cluster.kill(1)
    cluster.run()
    assert (cluster.state("t", 0).leader, cluster.state("t", 0).isr) == (3, (3,))
