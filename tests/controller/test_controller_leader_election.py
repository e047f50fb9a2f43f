"""The four leader election strategies as pure functions, and the ISR they produce."""

from __future__ import annotations

import pytest

from sluice.base import TopicPartition
from sluice.controller import (
    LeaderAndIsr,
    controlled_shutdown_partition_leader_election,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
    reassign_partition_leader_election,
)
from sluice.controller.leader_election import (
    elect_for_controlled_shutdown,
    elect_for_offline,
    elect_for_preferred,
    elect_for_reassignment,
)

TP = TopicPartition("t", 0)


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "unclean", "leader"),
    [
        ([1, 2, 3], [1, 3, 2], [2, 3], False, 2),  # the seed: AR order, not ISR order
        ([1, 2, 3], [1, 2, 3], [1, 2, 3], False, 1),
        ([3, 1, 2], [2], [1, 2, 3], False, 2),
        ([1, 2, 3], [1], [2, 3], False, None),  # no live ISR member, clean only
        ([1, 2, 3], [1], [2, 3], True, 2),  # unclean: first live in AR
        ([1, 2, 3], [1], [3], True, 3),
        ([1, 2, 3], [1], [], True, None),  # nobody alive
        ([1, 2, 3], [2, 3], [2, 3], True, 2),  # the ISR wins even when unclean is allowed
        ([], [], [], True, None),
    ],
)
def test_offline_partition_leader_election(
    assignment: list[int], isr: list[int], live: list[int], unclean: bool, leader: int | None
) -> None:
    assert offline_partition_leader_election(assignment, isr, live, unclean) == leader


def test_reassign_partition_leader_election() -> None:
    assert reassign_partition_leader_election([4, 5, 1], [1, 5], [1, 4, 5]) == 5
    assert reassign_partition_leader_election([4, 5], [1], [4, 5]) is None
    assert reassign_partition_leader_election([4, 5], [4, 5], [5]) == 5


def test_preferred_replica_partition_leader_election() -> None:
    assert preferred_replica_partition_leader_election([2, 1], [1, 2], [1, 2]) == 2
    assert preferred_replica_partition_leader_election([2, 1], [1], [1, 2]) is None  # not in ISR
    assert preferred_replica_partition_leader_election([2, 1], [1, 2], [1]) is None  # not live
    assert preferred_replica_partition_leader_election([], [1], [1]) is None


def test_controlled_shutdown_partition_leader_election() -> None:
    elect = controlled_shutdown_partition_leader_election
    assert elect([1, 2, 3], [1, 2, 3], [1, 2, 3], {1}) == 2
    assert elect([1, 2, 3], [1, 3], [1, 2, 3], {1}) == 3
    assert elect([1, 2, 3], [1, 2, 3], [1, 2, 3], {1, 2}) == 3
    assert elect([1, 2], [1], [1, 2], {1}) is None  # 2 is not in the ISR: no clean move
    assert elect([1, 2, 3], [1, 2, 3], [1, 3], {1}) == 3  # 2 is not live


def test_elect_for_offline_shrinks_the_isr_and_bumps_the_epoch() -> None:
    current = LeaderAndIsr(1, (1, 3, 2), leader_epoch=4, zk_version=7)
    result = elect_for_offline(TP, current, [1, 2, 3], {2, 3}, False)
    assert result.leader_and_isr == LeaderAndIsr(2, (3, 2), leader_epoch=5, zk_version=7)
    assert result.live_replicas == (2, 3)
    unclean = elect_for_offline(TP, LeaderAndIsr(1, (1,), 4), [1, 2, 3], {3}, True)
    assert unclean.leader_and_isr == LeaderAndIsr(3, (3,), 5)
    assert (
        elect_for_offline(TP, LeaderAndIsr(1, (1,), 4), [1, 2], {2}, False).leader_and_isr is None
    )


def test_elect_for_preferred_keeps_the_isr() -> None:
    result = elect_for_preferred(TP, LeaderAndIsr(3, (3, 2, 1), 2), [1, 2, 3], {1, 2, 3})
    assert result.leader_and_isr == LeaderAndIsr(1, (3, 2, 1), 3)
    assert elect_for_preferred(TP, LeaderAndIsr(3, (3,), 2), [1, 3], {1, 3}).leader_and_isr is None


def test_elect_for_controlled_shutdown_removes_shutting_down_brokers_from_the_isr() -> None:
    result = elect_for_controlled_shutdown(
        TP, LeaderAndIsr(1, (1, 2, 3), 0), [1, 2, 3], {1, 2, 3}, {1}
    )
    assert result.leader_and_isr == LeaderAndIsr(2, (2, 3), 1)
    assert result.live_replicas == (1, 2, 3)  # the shutting-down broker still hears of it


def test_elect_for_reassignment_uses_the_target_replicas() -> None:
    result = elect_for_reassignment(TP, LeaderAndIsr(1, (1, 4), 0), [4, 5], [1, 4, 5], {1, 4, 5})
    assert result.leader_and_isr == LeaderAndIsr(4, (1, 4), 1)
