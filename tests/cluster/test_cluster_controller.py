"""Exactly one controller among three brokers; killing it elects another, with a
higher /controller_epoch."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from sluice.testing import EmbeddedCluster
from support.waiting import wait_until


@pytest.fixture
def zk(cluster3: EmbeddedCluster) -> Iterator[object]:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=cluster3.zookeeper_connect)
    client.start(15)
    yield client
    client.stop()
    client.close()


def _controller(zk: object) -> tuple[int, int] | None:
    if not zk.exists("/controller"):  # type: ignore[attr-defined]
        return None
    data, _ = zk.get("/controller")  # type: ignore[attr-defined]
    epoch, _ = zk.get("/controller_epoch")  # type: ignore[attr-defined]
    return int(json.loads(data)["brokerid"]), int(epoch)


def _metadata_controllers(cluster: EmbeddedCluster, broker_ids: list[int]) -> set[int]:
    seen = set()
    for b in broker_ids:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(b), "log_level": 0})
        seen.add(admin.list_topics(timeout=5).controller_id)
    return seen


def _metadata_brokers(cluster: EmbeddedCluster, broker_id: int) -> list[int]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(broker_id), "log_level": 0})
    return sorted(admin.list_topics(timeout=5).brokers)


def test_one_controller_and_failover(cluster3: EmbeddedCluster, zk: object) -> None:
    ids = list(cluster3.broker_ids)
    controller, epoch = wait_until(lambda: _controller(zk), 30, "a controller")
    assert controller in ids
    # Every broker names the same controller.
    wait_until(lambda: _metadata_controllers(cluster3, ids) == {controller}, 30, "agreement")
    brokers = zk.get_children("/brokers/ids")  # type: ignore[attr-defined]
    assert sorted(int(b) for b in brokers) == sorted(ids)

    cluster3.kill(controller)
    new_controller, new_epoch = wait_until(
        lambda: (c := _controller(zk)) and c[0] != controller and c, 45, "a new controller"
    )
    assert new_controller in ids and new_epoch > epoch
    survivors = [b for b in ids if b != controller]
    wait_until(
        lambda: _metadata_controllers(cluster3, survivors) == {new_controller}, 30, "agreement"
    )
    wait_until(
        lambda: sorted(int(b) for b in zk.get_children("/brokers/ids")) == survivors,  # type: ignore[attr-defined]
        30, "the dead broker's registration gone",
    )  # fmt: skip
    # A broker learns the controller's id from ZooKeeper but its epoch only from the
    # controller's requests. Only the new controller can send an UpdateMetadata that
    # leaves the dead broker out, so once the target lists just the survivors it has
    # seen the new epoch.
    target = survivors[0]
    wait_until(lambda: _metadata_brokers(cluster3, target) == survivors, 30, "the new epoch seen")

    # The old controller's epoch is fenced: a LeaderAndIsr carrying it is refused...
    import asyncio

    from sluice.base import TopicPartition
    from sluice.controller.requests import LeaderAndIsrPartitionState, LeaderAndIsrRequest
    from sluice.protocol import ErrorCode
    from sluice.server.inter_broker import BrokerConnection

    stale = LeaderAndIsrRequest(
        controller_id=controller, controller_epoch=epoch, broker_epoch=-1,
        partition_states=(LeaderAndIsrPartitionState(
            TopicPartition("anything", 0), epoch, target, 99, (target,), 0, (target,),
        ),),
        topic_ids={}, live_leaders=(),
    )  # fmt: skip

    async def send() -> object:
        conn = BrokerConnection("127.0.0.1", cluster3.ports[target], "stale-controller")
        try:
            return await conn.send_controller(stale)
        finally:
            conn.close()

    response = asyncio.run(send())
    assert response.error_code == ErrorCode.stale_controller_epoch  # type: ignore[attr-defined]

    # ...and when the old controller comes back it follows the new one.
    cluster3.restart_broker(controller)
    cluster3.wait_ready()
    assert _controller(zk) == (new_controller, new_epoch)
    assert _metadata_controllers(cluster3, ids) == {new_controller}
