"""Kafka's checks of a manual replica assignment (sluice.server.replica_assignment): the
accepted shapes, and each refusal with the message Kafka's controller gives."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.server.replica_assignment import (
    check_manual_partition_assignment,
    new_partitions_assignment,
    new_topic_assignment,
)
from sluice.server.topics import InvalidReplicaAssignment

BROKERS = (1, 2, 3)


def refused(call: object, *args: object) -> str:
    with pytest.raises(InvalidReplicaAssignment) as info:
        call(*args)  # type: ignore[operator]
    return str(info.value)


def test_a_topic_assignment_in_any_order_is_taken() -> None:
    got = new_topic_assignment([(1, [2, 3]), (0, [3, 1]), (2, [1, 2])], BROKERS)
    assert got == {0: [3, 1], 1: [2, 3], 2: [1, 2]}


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        ([(0, [1, 2]), (0, [2, 1])],
         "Found multiple manual partition assignments for partition 0"),
        ([(0, [])], "The manual partition assignment includes an empty replica list."),
        ([(0, [9, 1, 7])],
         "The manual partition assignment includes broker 7, but no such broker is registered."),
        ([(0, [2, 1, 2])],
         "The manual partition assignment includes the broker 2 more than once."),
        ([(0, [1, 2]), (1, [3])],
         "The manual partition assignment includes a partition with 1 replica(s), but this is "
         "not consistent with previous partitions, which have 2 replica(s)."),
        ([(0, [1]), (2, [2])], "partitions should be a consecutive 0-based integer sequence"),
        ([(1, [1])], "partitions should be a consecutive 0-based integer sequence"),
    ],
)  # fmt: skip
def test_a_bad_topic_assignment_is_refused_with_kafkas_message(
    assignments: list[tuple[int, list[int]]], message: str
) -> None:
    assert refused(new_topic_assignment, assignments, BROKERS) == message


def test_new_partitions_follow_the_existing_ones() -> None:
    got = new_partitions_assignment([[2, 1], [3, 2]], 3, 5, 2, BROKERS)
    assert got == {3: [2, 1], 4: [3, 2]}


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        ([[1, 2]],
         "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        ([[1, 2], [1, 2], [2, 3]],
         "Attempted to add 2 additional partition(s), but only 3 assignment(s) were specified."),
        ([[1, 2], [3]],
         "The manual partition assignment includes a partition with 1 replica(s), but this is "
         "not consistent with previous partitions, which have 2 replica(s)."),
        ([[1, 4], [1, 2]],
         "The manual partition assignment includes broker 4, but no such broker is registered."),
        ([[1, 1], [1, 2]],
         "The manual partition assignment includes the broker 1 more than once."),
        ([[], [1, 2]], "The manual partition assignment includes an empty replica list."),
    ],
)  # fmt: skip
def test_bad_new_partitions_are_refused_with_kafkas_message(
    assignments: list[list[int]], message: str
) -> None:
    assert refused(new_partitions_assignment, assignments, 1, 3, 2, BROKERS) == message


def test_the_broker_check_comes_before_the_duplicate_check_in_sorted_order() -> None:
    # Kafka walks the replicas sorted: the lowest offending broker is named.
    message = refused(check_manual_partition_assignment, [5, 1, 1], BROKERS, None)
    assert message.endswith("the broker 1 more than once.")
    message = refused(check_manual_partition_assignment, [5, 4, 1], BROKERS, None)
    assert "broker 4," in message


@given(
    st.lists(st.lists(st.integers(0, 5), min_size=0, max_size=4), min_size=1, max_size=6),
    st.permutations(range(6)),
)
def test_accepted_exactly_when_every_rule_holds(
    lists: list[list[int]], order: Sequence[int]
) -> None:
    """Against a reference statement of the rules: partitions 0..n-1 once each, every
    replica list non-empty, of registered brokers, without repeats, all one length."""
    indexes = [i for i in order if i < len(lists)]
    assignments = [(i, lists[i]) for i in indexes]
    ok = (
        all(r for r in lists)
        and all(set(r) <= set(BROKERS) for r in lists)
        and all(len(set(r)) == len(r) for r in lists)
        and len({len(r) for r in lists}) == 1
    )
    if ok:
        assert new_topic_assignment(assignments, BROKERS) == dict(enumerate(lists))
    else:
        with pytest.raises(InvalidReplicaAssignment):
            new_topic_assignment(assignments, BROKERS)
