"""DelayedCreatePartitions: a CreateTopics/CreatePartitions answer held until this
broker's metadata cache has a live leader for every new partition, or its timeout."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from sluice.base import TopicPartition
from sluice.base.clock import ManualClock
from sluice.controller.model import Broker, EndPoint
from sluice.controller.requests import UpdateMetadataPartitionState
from sluice.purgatory import DelayedOperationPurgatory
from sluice.replication.delayed import DelayedCreatePartitions
from sluice.replication.metadata_cache import MetadataCache

Purgatory = DelayedOperationPurgatory[DelayedCreatePartitions]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(0)


@pytest.fixture
def purgatory(clock: ManualClock) -> Iterator[Purgatory]:
    p: Purgatory = DelayedOperationPurgatory(
        "topic", purge_interval=1000, reaper_enabled=False, clock=clock
    )
    yield p
    p.shutdown()


def broker(broker_id: int) -> Broker:
    return Broker(broker_id, (EndPoint("127.0.0.1", 9000 + broker_id),))


def state(topic: str, partition: int, leader: int) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(
        TopicPartition(topic, partition), 1, leader, 0, (1, 2), 0, (1, 2)
    )


def test_completes_when_every_new_partition_has_a_live_leader(purgatory: Purgatory) -> None:
    cache = MetadataCache(1)
    answers: list[set[str]] = []
    op = DelayedCreatePartitions(30_000, {"a": range(2), "b": [0]}, cache, answers.append)
    assert not purgatory.try_complete_else_watch(op, ["a", "b"])
    cache.update_metadata([broker(1), broker(2)], [state("a", 0, 1), state("b", 0, 2)])
    assert purgatory.check_and_complete("a") == 0  # a-1 has no state yet
    cache.update_metadata([], [state("a", 1, 3)])  # broker 3 is not live
    assert purgatory.check_and_complete("a") == 0
    cache.update_metadata([], [state("a", 1, 2)])
    assert purgatory.check_and_complete("a") == 1
    assert answers == [set()]


def test_expires_naming_the_topics_still_without_leaders(
    purgatory: Purgatory, clock: ManualClock
) -> None:
    cache = MetadataCache(1)
    cache.update_metadata([broker(1)], [state("led", 0, 1)])
    answers: list[set[str]] = []
    op = DelayedCreatePartitions(500, {"led": [0], "waiting": [0, 1]}, cache, answers.append)
    assert not purgatory.try_complete_else_watch(op, ["led", "waiting"])
    clock.advance(499)
    purgatory.advance_clock(0)
    assert answers == []
    clock.advance(1)
    purgatory.advance_clock(0)
    assert answers == [{"waiting"}]


def test_already_led_partitions_complete_at_once(purgatory: Purgatory) -> None:
    cache = MetadataCache(1)
    cache.put_topic("t", uuid.uuid4(), [state("t", 0, 1)])
    cache.register_local_broker(broker(1), alive=True)
    answers: list[set[str]] = []
    op = DelayedCreatePartitions(30_000, {"t": [0]}, cache, answers.append)
    assert purgatory.try_complete_else_watch(op, ["t"])
    assert answers == [set()] and purgatory.watched == 0
