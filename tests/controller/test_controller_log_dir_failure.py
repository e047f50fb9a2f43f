"""A broker's log dir fails (Kafka's LogDirEventNotification path): the broker writes
/log_dir_event_notification, the controller sends it LeaderAndIsr for every replica it
hosts, the replicas it answers KAFKA_STORAGE_ERROR for go offline (their leadership moves
to an online replica of the ISR, the broker gets StopReplica and leaves the ISRs), and a
restart of the broker brings them back."""

from __future__ import annotations

from sluice.base import TopicPartition
from sluice.controller import LeaderAndIsrRequest, PartitionState, ReplicaState
from sluice.controller.requests import LeaderAndIsrResponse, SentRequest
from sluice.controller.states import PartitionAndReplica
from sluice.controller.zk_data import LogDirEventNotificationZNode
from sluice.protocol import ErrorCode
from support.controller import (
    InProcessCluster,
    leader_and_isr_to,
    stop_replica_to,
    update_metadata_to,
)

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


def _answer(sent: list[SentRequest], broker_id: int, offline: set[TopicPartition]) -> None:
    """Broker ``broker_id`` answers its LeaderAndIsr requests: KAFKA_STORAGE_ERROR for
    the ``offline`` partitions, no error for the others; the rest is answered as usual."""
    for item in sent:
        if item.callback is None:
            continue
        request = item.request
        if item.broker_id == broker_id and isinstance(request, LeaderAndIsrRequest):
            errors = {
                s.topic_partition: ErrorCode.kafka_storage_error
                if s.topic_partition in offline
                else ErrorCode.none
                for s in request.partition_states
            }
            item.callback(LeaderAndIsrResponse(ErrorCode.none, errors))


def test_replicas_in_a_failed_log_dir_go_offline_and_lose_leadership(
    cluster: InProcessCluster,
) -> None:
    # Broker 2 leads t-0 and t-2 and follows t-1; t-0 and t-1 are in its failed dir.
    cluster.create_topic("t", {0: [2, 3], 1: [3, 2], 2: [2, 1]})
    controller = cluster.active().controller
    cluster.sent()

    cluster.nodes[2].zk.propagate_log_dir_event(2)
    cluster.run()
    sent = cluster.sent()
    (request,) = leader_and_isr_to(sent, 2)  # asked about every replica it hosts
    assert {s.topic_partition for s in request.partition_states} == {T0, T1, T2}
    assert not cluster.admin_zk.store.get_children(LogDirEventNotificationZNode.path)

    _answer(sent, 2, offline={T0, T1})
    cluster.run()
    p0, p1, p2 = (cluster.state("t", p) for p in range(3))
    assert (p0.leader, p0.isr, p0.leader_epoch) == (3, (3,), 1)  # moved to the ISR's other
    assert (p1.leader, p1.isr) == (3, (3,))  # the offline follower left the ISR
    assert (p2.leader, p2.isr, p2.leader_epoch) == (2, (2, 1), 0)  # its dir is online
    ctx = controller.context
    assert ctx.replicas_on_offline_dirs == {2: {T0, T1}}
    assert not ctx.is_replica_online(2, T0) and ctx.is_replica_online(2, T2)
    assert ctx.replica_state(PartitionAndReplica(T0, 2)) is ReplicaState.OFFLINE_REPLICA
    assert ctx.partition_state(T0) is PartitionState.ONLINE_PARTITION
    sent = cluster.sent()
    stopped = {s.topic_partition: s for r in stop_replica_to(sent, 2) for s in r.partition_states}
    assert set(stopped) == {T0, T1} and not any(s.delete_partition for s in stopped.values())
    to_3 = {s.topic_partition: s for r in leader_and_isr_to(sent, 3) for s in r.partition_states}
    assert to_3[T0].leader == 3
    metadata = update_metadata_to(sent, 1)[-1]
    offline = {s.topic_partition: s.offline_replicas for s in metadata.partition_states}
    assert offline[T0] == offline[T1] == (2,)

    # An election never picks a replica in an offline dir, even a preferred one.
    cluster.admin.elect_preferred_leaders({T0})
    cluster.run()
    assert cluster.state("t", 0).leader == 3

    # The broker restarts with the dir fixed: its replicas are online again.
    cluster.kill(2)
    cluster.run()
    assert 2 not in ctx.replicas_on_offline_dirs
    cluster.restart(2)
    cluster.run()
    assert ctx.is_replica_online(2, T0)
    assert ctx.replica_state(PartitionAndReplica(T0, 2)) is ReplicaState.ONLINE_REPLICA
