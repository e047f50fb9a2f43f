"""The controller against a real ZooKeeper: election, failover after session expiry,
fencing of the old controller, and a leader replaced when its broker's session ends."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from sluice.base import TopicPartition
from sluice.base.clock import SYSTEM_CLOCK
from sluice.controller import (
    AdminZkClient,
    Broker,
    ControllerConfig,
    ControllerMovedError,
    KafkaController,
    KafkaZkClient,
    LeaderAndIsr,
    RecordingControllerChannel,
)
from sluice.metastore.zk_server import ZooKeeperServer
from support.waiting import wait_until


@dataclass
class ZkNode:
    broker_id: int
    zk: KafkaZkClient
    controller: KafkaController


@dataclass
class ZkCluster:
    admin: KafkaZkClient
    nodes: dict[int, ZkNode]

    def active(self) -> list[ZkNode]:
        return [n for n in self.nodes.values() if n.controller.is_active]

    def controller_znode(self) -> tuple[int | None, int]:
        epoch = self.admin.get_controller_epoch()
        return self.admin.get_controller_id(), epoch[0] if epoch else 0

    def settled(self, epoch: int) -> bool:
        """Exactly one active controller, at ``epoch``, and /controller names it."""
        winners = self.active()
        if len(winners) != 1 or winners[0].controller.epoch != epoch:
            return False
        return self.controller_znode() == (winners[0].broker_id, epoch)


@pytest.fixture
def zk_cluster(zookeeper_server: ZooKeeperServer) -> Iterator[ZkCluster]:
    from sluice.metastore.zookeeper import ZooKeeperStore

    hosts = f"{zookeeper_server.connect_string}/sluice-{uuid.uuid4().hex[:8]}"
    admin = KafkaZkClient(ZooKeeperStore(hosts, session_timeout_ms=6_000))
    admin.create_top_level_paths()
    cluster = ZkCluster(admin, {})
    for broker_id in (1, 2, 3):
        zk = KafkaZkClient(ZooKeeperStore(hosts, session_timeout_ms=6_000))
        broker = Broker.plaintext(broker_id, "127.0.0.1", 9090 + broker_id)
        epoch = zk.register_broker(broker)
        controller = KafkaController(
            ControllerConfig(broker_id),
            zk,
            RecordingControllerChannel(),
            SYSTEM_CLOCK,
            broker=broker,
            broker_epoch=epoch,
        )
        cluster.nodes[broker_id] = ZkNode(broker_id, zk, controller)
    for node in cluster.nodes.values():
        node.controller.startup()
    yield cluster
    for node in cluster.nodes.values():
        node.controller.shutdown()
        node.zk.store.close()
    admin.store.close()


def test_election_and_failover_on_zookeeper(zk_cluster: ZkCluster) -> None:
    cluster = zk_cluster
    wait_until(lambda: cluster.settled(1), 30, "one controller with epoch 1")
    (first,) = cluster.active()
    for node in cluster.nodes.values():
        wait_until(
            lambda n=node: n.controller.active_controller_id == first.broker_id,  # type: ignore[misc]
            30,
            "every broker to know the controller",
        )

    first.zk.store.expire_session()

    wait_until(lambda: cluster.settled(2), 30, "a controller with epoch 2 after the expiry")


def test_another_broker_takes_over_and_fences_the_old_controller(zk_cluster: ZkCluster) -> None:
    cluster = zk_cluster
    wait_until(lambda: cluster.settled(1), 30, "one controller with epoch 1")
    (first,) = cluster.active()
    wait_until(
        lambda: (
            first.controller.context.live_broker_ids == {1, 2, 3}
            and first.controller.event_manager.is_empty()
        ),
        30,
        "the controller to finish taking office",
    )
    old_zk_version = first.controller.context.epoch_zk_version
    # The controller's broker loses its session but does not notice yet (a long pause).
    first.zk.store.remove_session_listener(first.controller.on_new_session)
    first.zk.store.expire_session()

    def taken_over() -> bool:
        owner, epoch = cluster.controller_znode()
        return owner not in (None, first.broker_id) and epoch == 2

    wait_until(taken_over, 30, "another broker to become controller with epoch 2")
    assert first.controller.is_active  # the zombie still believes it is in charge
    tp = TopicPartition("t", 0)
    with pytest.raises(ControllerMovedError):
        first.zk.update_leader_and_isr({tp: LeaderAndIsr(1, (1,))}, 1, old_zk_version)

    first.zk.store.add_session_listener(first.controller.on_new_session)
    first.controller.on_new_session()  # it finally notices: resign, register again, follow
    wait_until(lambda: cluster.settled(2), 30, "one controller with epoch 2")
    (second,) = cluster.active()
    assert second is not first
    wait_until(
        lambda: second.controller.context.live_broker_ids == {1, 2, 3},
        30,
        "the new controller to see the old one registered again",
    )


def test_a_leader_is_replaced_when_its_session_ends(zk_cluster: ZkCluster) -> None:
    cluster = zk_cluster
    wait_until(lambda: cluster.settled(1), 30, "one controller")
    (controller,) = cluster.active()
    leader, other = (b for b in (1, 2, 3) if b != controller.broker_id)
    AdminZkClient(cluster.admin).create_topic_with_assignment("t", {0: [leader, other]})
    tp = TopicPartition("t", 0)

    def state() -> tuple[int, tuple[int, ...], int] | None:
        found = cluster.admin.get_topic_partition_states([tp]).get(tp)
        if found is None:
            return None
        lai = found.leader_and_isr
        return lai.leader, lai.isr, lai.leader_epoch

    wait_until(lambda: state() == (leader, (leader, other), 0), 30, "the partition to come online")
    cluster.nodes[leader].controller.shutdown()
    cluster.nodes[leader].zk.store.close()
    wait_until(lambda: state() == (other, (other,), 1), 30, "a new leader with the next epoch")
