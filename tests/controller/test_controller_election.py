"""Controller election on one coordination store: one winner, epochs, failover, fencing."""

from __future__ import annotations

import json
import threading

import pytest

from sluice.base import TopicPartition
from sluice.base.clock import SYSTEM_CLOCK
from sluice.controller import (
    Broker,
    ControlledShutdownResult,
    ControllerConfig,
    ControllerEpochChecker,
    ControllerMovedError,
    KafkaController,
    KafkaZkClient,
    RecordingControllerChannel,
    StaleControllerEpochError,
    UpdateMetadataRequest,
)
from sluice.controller.zk_data import ControllerZNode
from sluice.metastore import DataTree, InProcessStore
from sluice.protocol.errors import ErrorCode
from support.controller import InProcessCluster
from support.waiting import wait_until


def test_three_candidates_elect_exactly_one_controller() -> None:
    cluster = InProcessCluster((1, 2, 3))
    cluster.run(first=[2])
    winner = cluster.active()
    assert winner.broker.id == 2
    assert cluster.controller_znode() == (2, 1)
    data, stat = cluster.admin_zk.store.get(ControllerZNode.path)
    body = json.loads(data)
    assert body["version"] == 1 and body["brokerid"] == 2 and body["timestamp"].isdigit()
    assert stat.ephemeral_owner == winner.store.session_id
    for node in cluster.nodes.values():
        assert node.controller.active_controller_id == 2
    assert winner.controller.epoch == 1


def test_the_winners_session_expiry_hands_over_with_the_next_epoch() -> None:
    cluster = InProcessCluster((1, 2, 3))
    cluster.run()
    assert cluster.controller_znode() == (1, 1)
    old = cluster.nodes[1]

    old.store.expire_session()
    assert cluster.controller_znode() == (None, 1)
    cluster.run(first=[2, 3])

    new = cluster.active()
    assert new.broker.id == 2
    assert cluster.controller_znode() == (2, 2)
    assert new.controller.epoch == 2
    assert not old.controller.is_active and old.controller.active_controller_id == 2
    # The expired broker registered again, and the new controller saw it come back.
    assert 1 in new.controller.context.live_brokers
    assert old.controller.broker_epoch == new.controller.context.live_broker_epochs[1]


def test_each_new_controller_bumps_the_epoch() -> None:
    cluster = InProcessCluster((1, 2, 3))
    cluster.run()
    epochs = [cluster.controller_znode()]
    for broker_id in (1, 2):
        cluster.kill(broker_id)
        cluster.run()
        epochs.append(cluster.controller_znode())
    assert epochs == [(1, 1), (2, 2), (3, 3)]


def test_deleting_the_controller_znode_triggers_a_new_election() -> None:
    cluster = InProcessCluster((1, 2))
    cluster.run()
    cluster.admin_zk.store.delete(ControllerZNode.path)
    cluster.run(first=[2])
    assert cluster.active().broker.id == 2
    assert cluster.controller_znode() == (2, 2)
    assert not cluster.nodes[1].controller.is_active


def test_brokers_fence_requests_from_a_stale_controller() -> None:
    cluster = InProcessCluster((1, 2, 3))
    cluster.run()
    first = [s.request for s in cluster.sent() if isinstance(s.request, UpdateMetadataRequest)]
    assert first and all(r.controller_epoch == 1 for r in first)
    cluster.kill(1)
    cluster.run()
    second = [s.request for s in cluster.sent() if isinstance(s.request, UpdateMetadataRequest)]
    assert second and all(r.controller_epoch == 2 and r.controller_id == 2 for r in second)

    checker = ControllerEpochChecker()
    assert checker.check_request(second[0]) is ErrorCode.none
    assert checker.check_request(first[0]) is ErrorCode.stale_controller_epoch
    with pytest.raises(StaleControllerEpochError):
        checker.ensure_current(first[0])
    assert checker.controller_epoch == 2 and checker.controller_id == 2


def test_broker_epoch_and_leader_epoch_fencing() -> None:
    checker = ControllerEpochChecker(broker_epoch=50)
    assert checker.check_broker_epoch(-1) is ErrorCode.none
    assert checker.check_broker_epoch(49) is ErrorCode.stale_broker_epoch
    assert checker.check_broker_epoch(50) is ErrorCode.none
    assert ControllerEpochChecker.check_leader_epoch(3, 2) is ErrorCode.none
    assert ControllerEpochChecker.check_leader_epoch(2, 2) is ErrorCode.stale_controller_epoch


def test_a_zombie_controller_cannot_write_and_resigns() -> None:
    cluster = InProcessCluster((1, 2, 3))
    cluster.run()
    cluster.create_topic("t", {0: [3, 2]})
    zombie = cluster.nodes[1]
    # Broker 1 loses its session but does not notice (a long pause); 2 takes over.
    zombie.store.remove_session_listener(zombie.controller.on_new_session)
    zombie.store.expire_session()
    zombie.alive = False
    cluster.run()
    assert cluster.controller_znode() == (2, 2)
    assert zombie.controller.is_active
    before = cluster.state("t", 0)
    assert (before.leader, before.isr) == (3, (3, 2))

    # A write fenced by the old epoch's zk version is refused...
    tp = TopicPartition("t", 0)
    zk, ctx = zombie.zk, zombie.controller.context
    with pytest.raises(ControllerMovedError):
        zk.update_leader_and_isr({tp: before.new_leader_and_isr(2, [2])}, 1, ctx.epoch_zk_version)
    # ...so a zombie decision changes nothing, and the zombie resigns.
    results: list[ControlledShutdownResult] = []
    zombie.controller.controlled_shutdown(3, -1, results.append)
    zombie.controller.event_manager.process_pending()
    assert results[0].error_code is ErrorCode.not_controller
    assert cluster.state("t", 0) == before
    assert not zombie.controller.is_active
    assert zombie.controller.active_controller_id == 2


def test_racing_candidates_on_threads_elect_exactly_one() -> None:
    tree = DataTree(SYSTEM_CLOCK)
    admin = KafkaZkClient(InProcessStore(tree))
    admin.create_top_level_paths()
    controllers = []
    for broker_id in range(1, 6):
        zk = KafkaZkClient(InProcessStore(tree))
        broker = Broker.plaintext(broker_id, "127.0.0.1", 9090 + broker_id)
        controllers.append(
            KafkaController(
                ControllerConfig(broker_id, auto_leader_rebalance_enable=False),
                zk,
                RecordingControllerChannel(),
                SYSTEM_CLOCK,
                broker=broker,
                broker_epoch=zk.register_broker(broker),
            )
        )
    start = threading.Barrier(len(controllers))

    def launch(controller: KafkaController) -> None:
        start.wait()
        controller.startup()

    threads = [threading.Thread(target=launch, args=(c,)) for c in controllers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        for expected_epoch in (1, 2, 3):
            running = [c for c in controllers if c.event_manager.is_running]

            def settled(
                running: list[KafkaController] = running, epoch: int = expected_epoch
            ) -> bool:
                winners = [c for c in running if c.is_active]
                current = admin.get_controller_epoch()
                return (
                    len(winners) == 1
                    and winners[0].epoch == epoch
                    and current is not None
                    and current[0] == epoch
                    and admin.get_controller_id() == winners[0].controller_id
                    and all(c.active_controller_id == winners[0].controller_id for c in running)
                )

            wait_until(settled, 30, f"one controller at epoch {expected_epoch}")
            (winner,) = [c for c in running if c.is_active]
            winner.shutdown()  # its broker stops: the session ends with it
            winner.zk_client.store.close()
    finally:
        for controller in controllers:
            controller.shutdown()
            controller.zk_client.store.close()
