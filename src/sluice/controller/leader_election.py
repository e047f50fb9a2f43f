"""Partition leader election: Kafka's four strategies as pure functions.

The ``*_leader_election`` functions (``PartitionLeaderElectionAlgorithms``) pick a
leader from the assigned replicas (AR) in AR order, never ISR order. The ``elect_*``
functions (``Election``) also compute the new ISR and bump the leader epoch. The
strategy classes tell the partition state machine which one to run.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sluice.base import TopicPartition

from .model import LeaderAndIsr

__all__ = [
    "ControlledShutdownPartitionLeaderElectionStrategy",
    "ElectionResult",
    "OfflinePartitionLeaderElectionStrategy",
    "PartitionLeaderElectionStrategy",
    "PreferredReplicaPartitionLeaderElectionStrategy",
    "ReassignPartitionLeaderElectionStrategy",
    "controlled_shutdown_partition_leader_election",
    "elect_for_controlled_shutdown",
    "elect_for_offline",
    "elect_for_preferred",
    "elect_for_reassignment",
    "offline_partition_leader_election",
    "preferred_replica_partition_leader_election",
    "reassign_partition_leader_election",
]


def offline_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    unclean_leader_election_enabled: bool,
) -> int | None:
    """The first live AR replica in the ISR; failing that, if unclean election is
    enabled, the first live AR replica at all (which may lose committed data)."""
    for replica in assignment:
        if replica in live_replicas and replica in isr:
            return replica
    if unclean_leader_election_enabled:
        for replica in assignment:
            if replica in live_replicas:
                return replica
    return None


def reassign_partition_leader_election(
    reassignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    """The first replica of the new assignment that is live and in the ISR."""
    for replica in reassignment:
        if replica in live_replicas and replica in isr:
            return replica
    return None


def preferred_replica_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    """The preferred replica (the first of AR), if it is live and in the ISR."""
    if assignment and assignment[0] in live_replicas and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    shutting_down_brokers: Collection[int],
) -> int | None:
    """As for an offline partition, but skipping brokers that are shutting down."""
    for replica in assignment:
        if replica in live_replicas and replica in isr and replica not in shutting_down_brokers:
            return replica
    return None


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """A partition's election outcome: the new LeaderAndIsr, or None if nobody can lead."""

    topic_partition: TopicPartition
    leader_and_isr: LeaderAndIsr | None
    live_replicas: tuple[int, ...]


def elect_for_offline(
    tp: TopicPartition,
    current: LeaderAndIsr,
    assignment: Sequence[int],
    live_brokers: Collection[int],
    unclean_leader_election_enabled: bool,
) -> ElectionResult:
    """OfflinePartition: the ISR shrinks to its live members (or to the unclean leader)."""
    live = tuple(r for r in assignment if r in live_brokers)
    leader = offline_partition_leader_election(
        assignment, current.isr, live, unclean_leader_election_enabled
    )
    if leader is None:
        return ElectionResult(tp, None, live)
    new_isr = [r for r in current.isr if r in live] if leader in current.isr else [leader]
    return ElectionResult(tp, current.new_leader_and_isr(leader, new_isr), live)


def elect_for_reassignment(
    tp: TopicPartition,
    current: LeaderAndIsr,
    target_replicas: Sequence[int],
    assignment: Sequence[int],
    live_brokers: Collection[int],
) -> ElectionResult:
    """ReassignPartition: the first live in-ISR replica of the target assignment."""
    live = tuple(r for r in assignment if r in live_brokers)
    leader = reassign_partition_leader_election(target_replicas, current.isr, live)
    if leader is None:
        return ElectionResult(tp, None, live)
    return ElectionResult(tp, current.new_leader_and_isr(leader, current.isr), live)


def elect_for_preferred(
    tp: TopicPartition,
    current: LeaderAndIsr,
    assignment: Sequence[int],
    live_brokers: Collection[int],
) -> ElectionResult:
    """PreferredReplica: the first replica of AR takes over if live and in the ISR."""
    live = tuple(r for r in assignment if r in live_brokers)
    leader = preferred_replica_partition_leader_election(assignment, current.isr, live)
    if leader is None:
        return ElectionResult(tp, None, live)
    return ElectionResult(tp, current.new_leader_and_isr(leader, current.isr), live)


def elect_for_controlled_shutdown(
    tp: TopicPartition,
    current: LeaderAndIsr,
    assignment: Sequence[int],
    live_or_shutting_down_brokers: Collection[int],
    shutting_down_brokers: Collection[int],
) -> ElectionResult:
    """ControlledShutdown: a leader off the shutting-down brokers, which leave the ISR."""
    live = tuple(r for r in assignment if r in live_or_shutting_down_brokers)
    leader = controlled_shutdown_partition_leader_election(
        assignment, current.isr, live, shutting_down_brokers
    )
    if leader is None:
        return ElectionResult(tp, None, live)
    new_isr = [r for r in current.isr if r not in shutting_down_brokers]
    return ElectionResult(tp, current.new_leader_and_isr(leader, new_isr), live)


@dataclass(frozen=True, slots=True)
class OfflinePartitionLeaderElectionStrategy:
    """Elect for new or offline partitions; ``allow_unclean`` overrides the topic config."""

    allow_unclean: bool = False


@dataclass(frozen=True, slots=True)
class ReassignPartitionLeaderElectionStrategy:
    """Elect a leader from the target replicas of a reassignment."""


@dataclass(frozen=True, slots=True)
class PreferredReplicaPartitionLeaderElectionStrategy:
    """Move leadership to the preferred replica."""


@dataclass(frozen=True, slots=True)
class ControlledShutdownPartitionLeaderElectionStrategy:
    """Move leadership off brokers that are shutting down."""


PartitionLeaderElectionStrategy = (
    OfflinePartitionLeaderElectionStrategy
    | ReassignPartitionLeaderElectionStrategy
    | PreferredReplicaPartitionLeaderElectionStrategy
    | ControlledShutdownPartitionLeaderElectionStrategy
)
