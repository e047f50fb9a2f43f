"""Topic deletion: UpdateMetadata with leader -2, StopReplica(delete), cleanup, retries."""

from __future__ import annotations

from sluice.base import TopicPartition
from sluice.controller import ReplicaState, StopReplicaResponse
from sluice.controller.model import LEADER_DURING_DELETE
from sluice.controller.states import PartitionAndReplica
from sluice.controller.zk_data import DeleteTopicsTopicZNode, TopicConfigZNode, TopicZNode
from sluice.protocol.errors import ErrorCode
from support.controller import InProcessCluster, stop_replica_to, update_metadata_to


def znodes_of(cluster: InProcessCluster, topic: str) -> list[str]:
    store = cluster.admin_zk.store
    paths = [
        TopicZNode.path(topic),
        TopicConfigZNode.path(topic),
        DeleteTopicsTopicZNode.path(topic),
    ]
    return [p for p in paths if store.exists(p) is not None]


def test_topic_deletion_stops_and_deletes_every_replica(cluster: InProcessCluster) -> None:
    cluster.create_topic("doomed", {0: [1, 2], 1: [2, 3]})
    cluster.create_topic("kept", {0: [3, 1]})
    cluster.sent()
    cluster.admin.delete_topic("doomed")
    cluster.run()

    sent = cluster.sent()
    metadata = update_metadata_to(sent, 1)
    leaders = {s.topic_partition: s.leader for r in metadata for s in r.partition_states}
    assert leaders[TopicPartition("doomed", 0)] == LEADER_DURING_DELETE
    # As in Kafka: OfflineReplica (StopReplica, keep the log), then ReplicaDeletionStarted.
    for broker_id, partitions in ((1, [0]), (2, [0, 1]), (3, [1])):
        requests = stop_replica_to(sent, broker_id)
        assert [r.partition_states[0].delete_partition for r in requests] == [False, True]
        deleting = requests[1].partition_states
        assert [s.topic_partition.partition for s in deleting] == partitions
        assert all(s.delete_partition and s.leader_epoch == -2 for s in deleting)
    controller = cluster.active().controller
    replica = PartitionAndReplica(TopicPartition("doomed", 0), 1)
    assert controller.context.replica_state(replica) is ReplicaState.REPLICA_DELETION_STARTED
    assert znodes_of(cluster, "doomed")  # not before the brokers answer

    for node in cluster.nodes.values():
        node.channel.answer_all(node.history)
    cluster.run()

    assert znodes_of(cluster, "doomed") == []
    assert "doomed" not in controller.context.all_topics
    assert controller.context.partitions_for_topic("doomed") == set()
    assert cluster.admin_zk.get_all_topics_in_cluster() == {"kept"}
    assert cluster.state("kept", 0).leader == 3


def test_deletion_waits_for_a_dead_replica_and_retries_failures(cluster: InProcessCluster) -> None:
    cluster.create_topic("doomed", {0: [1, 3], 1: [2, 1]})
    cluster.kill(3)
    cluster.run()
    cluster.sent()
    cluster.admin.delete_topic("doomed")
    cluster.run()
    controller = cluster.active().controller
    assert "doomed" in controller.context.topics_ineligible_for_deletion
    dead = PartitionAndReplica(TopicPartition("doomed", 0), 3)
    assert controller.context.replica_state(dead) is ReplicaState.REPLICA_DELETION_INELIGIBLE

    # Broker 2 fails to delete partition 1; broker 1 succeeds.
    for sent in cluster.sent():
        if sent.callback is None:
            continue
        errors = {}
        if sent.broker_id == 2:
            errors = {TopicPartition("doomed", 1): ErrorCode.kafka_storage_error}
        sent.callback(StopReplicaResponse(partition_errors=errors))
    cluster.run()
    assert znodes_of(cluster, "doomed")

    cluster.restart(3)  # the dead replica's broker returns: deletion resumes and retries
    cluster.run()
    for sent in cluster.sent():
        if sent.callback is not None:
            sent.callback(StopReplicaResponse())
    cluster.run()
    assert znodes_of(cluster, "doomed") == []
    assert "doomed" not in controller.context.topics_to_be_deleted


def test_deleting_a_missing_topic_just_clears_the_request(cluster: InProcessCluster) -> None:
    cluster.admin.delete_topic("ghost")
    cluster.run()
    assert znodes_of(cluster, "ghost") == []


def test_deletion_disabled_clears_the_request() -> None:
    cluster = InProcessCluster((1, 2), delete_topic_enable=False)
    cluster.run()
    cluster.create_topic("t", {0: [1, 2]})
    cluster.admin.delete_topic("t")
    cluster.run()
    assert znodes_of(cluster, "t") == [TopicZNode.path("t"), TopicConfigZNode.path("t")]
    assert cluster.state("t", 0).leader == 1
