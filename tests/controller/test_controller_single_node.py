"""A single broker with no ZooKeeper: the same controller on an InProcessStore, threaded."""

from __future__ import annotations

from sluice.base import TopicPartition
from sluice.base.clock import SYSTEM_CLOCK
from sluice.controller import (
    AdminZkClient,
    Broker,
    ControlledShutdownResult,
    ControllerConfig,
    KafkaController,
    KafkaZkClient,
    LeaderAndIsrRequest,
    RecordingControllerChannel,
)
from sluice.metastore import InProcessStore
from sluice.protocol.errors import ErrorCode
from support.waiting import wait_until


def test_a_single_node_broker_controls_itself() -> None:
    zk = KafkaZkClient(InProcessStore())
    zk.create_top_level_paths()
    broker = Broker.plaintext(0, "127.0.0.1", 9092)
    channel = RecordingControllerChannel()
    controller = KafkaController(
        ControllerConfig(0),
        zk,
        channel,
        SYSTEM_CLOCK,
        broker=broker,
        broker_epoch=zk.register_broker(broker),
    )
    controller.startup()
    try:
        wait_until(lambda: controller.is_active, 30, "the broker to elect itself")
        AdminZkClient(zk).create_topic("events", partitions=3, replication_factor=1)
        tps = [TopicPartition("events", p) for p in range(3)]

        def led() -> bool:
            states = zk.get_topic_partition_states(tps)
            return len(states) == 3 and all(s.leader_and_isr.leader == 0 for s in states.values())

        wait_until(led, 30, "the partitions to be led by broker 0")
        wait_until(lambda: controller.event_manager.is_empty(), 30, "the controller to go idle")
        became_leader = {
            s.topic_partition
            for sent in channel.sent
            if isinstance(sent.request, LeaderAndIsrRequest)
            for s in sent.request.partition_states
        }
        assert became_leader == set(tps)

        answers: list[ControlledShutdownResult] = []
        controller.controlled_shutdown(0, controller.broker_epoch, answers.append)
        wait_until(lambda: bool(answers), 30, "the controlled shutdown answer")
        assert answers[0].error_code is ErrorCode.none
        assert answers[0].partitions_remaining == frozenset()  # single replicas cannot move
    finally:
        controller.shutdown()
        zk.store.close()
