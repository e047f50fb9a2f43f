"""Topic creation, broker failure and return, ISR notifications: the controller's core duty."""

from __future__ import annotations

from sluice.base import TopicPartition
from sluice.controller import PartitionState, ReplicaState
from sluice.controller.states import PartitionAndReplica
from sluice.controller.zk_data import IsrChangeNotificationZNode, TopicZNode
from support.controller import InProcessCluster, leader_and_isr_to, update_metadata_to

# The seed's example (kafka-topics --describe --topic topic-leader).
SEED_ASSIGNMENT = {0: [3, 1, 2], 1: [1, 2, 3], 2: [2, 3, 1]}
SEED_ISRS = {0: [3, 1, 2], 1: [1, 3, 2], 2: [3, 1, 2]}


def test_a_new_topic_gets_leaders_and_brokers_hear_of_it(cluster: InProcessCluster) -> None:
    cluster.sent()
    cluster.create_topic("orders", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    controller = cluster.active().controller
    for p, leader in ((0, 1), (1, 2), (2, 3)):
        state = cluster.state("orders", p)
        assert (state.leader, state.leader_epoch, state.zk_version) == (leader, 0, 0)
        assert set(state.isr) == {1, 2, 3}
        tp = TopicPartition("orders", p)
        assert controller.context.partition_state(tp) is PartitionState.ONLINE_PARTITION
        for r in (1, 2, 3):
            replica = PartitionAndReplica(tp, r)
            assert controller.context.replica_state(replica) is ReplicaState.ONLINE_REPLICA
    sent = cluster.sent()
    for broker_id in (1, 2, 3):
        states = [s for r in leader_and_isr_to(sent, broker_id) for s in r.partition_states]
        assert sorted(s.topic_partition.partition for s in states) == [0, 1, 2]
        assert all(s.is_new and s.controller_epoch == 1 for s in states)
        request = leader_and_isr_to(sent, broker_id)[0]
        assert request.topic_ids == {"orders": controller.context.topic_ids["orders"]}
        assert request.broker_epoch == controller.context.live_broker_epochs[broker_id]
        metadata = update_metadata_to(sent, broker_id)
        assert metadata and {b.id for b in metadata[-1].live_brokers} == {1, 2, 3}
    _, assignment = TopicZNode.decode(cluster.admin_zk.store.get(TopicZNode.path("orders"))[0])
    assert assignment[1].replicas == (2, 3, 1)


def test_the_seed_example_leaders_follow_assignment_order(cluster: InProcessCluster) -> None:
    cluster.create_topic("topic-leader", SEED_ASSIGNMENT)
    for p, isr in SEED_ISRS.items():
        cluster.leader_changes_isr("topic-leader", p, isr)
    before = {p: cluster.state("topic-leader", p) for p in SEED_ASSIGNMENT}

    cluster.kill(1)  # broker 1 is also the controller: 2 takes over first
    cluster.run()

    assert cluster.active().broker.id == 2
    after = {p: cluster.state("topic-leader", p) for p in SEED_ASSIGNMENT}
    assert (after[0].leader, after[0].isr) == (3, (3, 2))
    assert (after[1].leader, after[1].isr) == (2, (3, 2))  # AR order: 2, not ISR's 3
    assert (after[2].leader, after[2].isr) == (2, (3, 2))
    # A controller failover first takes the dead replica out of every ISR (the leader
    # of partition 1 becomes -1), then elects: two new epochs there, as in Kafka.
    assert [after[p].leader_epoch - before[p].leader_epoch for p in range(3)] == [1, 2, 1]


def test_broker_failure_takes_partitions_offline_then_online(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [2, 3], 1: [3, 2], 2: [2]})
    controller = cluster.active().controller
    cluster.sent()

    cluster.kill(2)
    cluster.run()

    p0, p1, p2 = (cluster.state("t", p) for p in range(3))
    assert (p0.leader, p0.isr, p0.leader_epoch) == (3, (3,), 1)  # re-elected
    assert (p1.leader, p1.isr, p1.leader_epoch) == (3, (3,), 1)  # follower dropped
    assert (p2.leader, p2.isr, p2.leader_epoch) == (-1, (2,), 1)  # nobody left to lead
    ctx = controller.context
    assert ctx.partition_state(TopicPartition("t", 0)) is PartitionState.ONLINE_PARTITION
    assert ctx.partition_state(TopicPartition("t", 2)) is PartitionState.OFFLINE_PARTITION
    replica = PartitionAndReplica(TopicPartition("t", 0), 2)
    assert ctx.replica_state(replica) is ReplicaState.OFFLINE_REPLICA
    sent = cluster.sent()
    assert not leader_and_isr_to(sent, 2) and not update_metadata_to(sent, 2)
    states = {
        s.topic_partition.partition: s
        for r in leader_and_isr_to(sent, 3)
        for s in r.partition_states
    }
    assert states[0].leader == 3 and states[0].leader_epoch == 1
    metadata = update_metadata_to(sent, 1)[-1]
    assert {b.id for b in metadata.live_brokers} == {1, 3}
    offline = {s.topic_partition.partition: s.offline_replicas for s in metadata.partition_states}
    assert offline[2] == (2,)

    cluster.restart(2)
    cluster.run()
    p2 = cluster.state("t", 2)
    assert (p2.leader, p2.isr, p2.leader_epoch) == (2, (2,), 2)  # the last ISR member returns
    assert ctx.partition_state(TopicPartition("t", 2)) is PartitionState.ONLINE_PARTITION
    sent = cluster.sent()
    to_2 = {
        s.topic_partition.partition: s
        for r in leader_and_isr_to(sent, 2)
        for s in r.partition_states
    }
    assert to_2[0].leader == 3 and to_2[2].leader == 2  # follower of 0, leader of 2
    full = update_metadata_to(sent, 2)[0]
    assert {s.topic_partition.partition for s in full.partition_states} == {0, 1, 2}


def test_a_bounced_broker_is_seen_as_failed_and_back(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [3, 2]})
    node = cluster.nodes[3]
    old_epoch = cluster.active().controller.context.live_broker_epochs[3]
    cluster.sent()
    node.store.expire_session()  # 3 re-registers with a new czxid before the controller runs
    cluster.run(first=[3])
    ctx = cluster.active().controller.context
    assert ctx.live_broker_epochs[3] > old_epoch
    state = cluster.state("t", 0)
    assert state.leader == 2 and state.leader_epoch == 1  # leadership moved off the old 3
    (request,) = leader_and_isr_to(cluster.sent(), 3)
    assert [(s.leader, s.leader_epoch) for s in request.partition_states] == [(2, 1)]


def test_isr_change_notifications_update_every_broker(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [1, 2, 3]})
    cluster.sent()
    cluster.leader_changes_isr("t", 0, [1, 3])
    controller = cluster.active().controller
    tp = TopicPartition("t", 0)
    assert controller.context.partition_leadership_info[tp].leader_and_isr.isr == (1, 3)
    sent = cluster.sent()
    for broker_id in (1, 2, 3):
        (request,) = update_metadata_to(sent, broker_id)
        assert [s.isr for s in request.partition_states] == [(1, 3)]
    assert cluster.admin_zk.store.get_children(IsrChangeNotificationZNode.path) == []


def test_new_partitions_are_created_and_led(cluster: InProcessCluster) -> None:
    cluster.create_topic("t", {0: [1, 2]})
    cluster.admin.add_partitions("t", {1: [2, 3], 2: [3, 1]})
    cluster.run()
    assert [cluster.state("t", p).leader for p in range(3)] == [1, 2, 3]
    ctx = cluster.active().controller.context
    assert ctx.partition_replica_assignment(TopicPartition("t", 2)) == (3, 1)


def test_a_new_controller_reads_the_cluster_back(cluster: InProcessCluster) -> None:
    cluster.create_topic("a", {0: [1, 2], 1: [2, 3]})
    cluster.create_topic("b", {0: [3]})
    cluster.kill(1)
    cluster.run()
    ctx = cluster.active().controller.context
    assert ctx.all_topics == {"a", "b"}
    assert set(ctx.live_brokers) == {2, 3}
    assert ctx.partition_leadership_info[TopicPartition("a", 1)].leader_and_isr.leader == 2
    assert cluster.state("a", 0).leader == 2
    assert ctx.partition_state(TopicPartition("b", 0)) is PartitionState.ONLINE_PARTITION


def test_a_new_controller_sees_a_restart_it_did_not_witness(cluster: InProcessCluster) -> None:
    """Broker 1 (controller and leader) dies and registers again before any other broker
    takes office: the newcomer finds it live, and the partition state still names it
    leader with the ISR of before its restart. Its log may have lost an unflushed tail,
    so it must not lead from that state: it is handled as a bounce (failed, then back)."""
    cluster.create_topic("t", {0: [1, 2, 3]})
    before = cluster.state("t", 0)
    assert before.leader == 1
    cluster.kill(1)
    cluster.restart(1)  # registered again; no controller has run since the death
    cluster.sent()
    cluster.run(first=[2])

    assert cluster.active().broker.id == 2
    after = cluster.state("t", 0)
    assert after.leader == 2 and 1 not in after.isr
    assert after.leader_epoch > before.leader_epoch
    to_1 = [s for r in leader_and_isr_to(cluster.sent(), 1) for s in r.partition_states]
    assert to_1 and all(s.leader == 2 for s in to_1)  # back as a follower of the new leader
