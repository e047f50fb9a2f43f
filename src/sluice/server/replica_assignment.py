"""Kafka's checks of a manual replica assignment (KIP-195), sans I/O.

A CreateTopics request may give each partition's replicas instead of counts, and a
CreatePartitions request the replicas of each new partition. Both are checked as
Kafka 3.9's controller checks them (``ReplicationControlManager``), with its messages;
a refusal is :class:`~sluice.server.topics.InvalidReplicaAssignment`
(INVALID_REPLICA_ASSIGNMENT). A broker counts as registered while it is live: in a
cluster, registered in ZooKeeper (``/brokers/ids``); on a single node, itself.

The request's counts next to an assignment are checked by the topic admin
(INVALID_REQUEST: both must be -1), and the partition count of CreatePartitions against
the topic's current one before these checks (INVALID_PARTITIONS).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TypeAlias

from sluice.server.topics import InvalidReplicaAssignment

__all__ = [
    "Assignments",
    "check_manual_partition_assignment",
    "new_partitions_assignment",
    "new_topic_assignment",
]

Assignments: TypeAlias = Sequence[tuple[int, Sequence[int]]]
"""A CreateTopics topic's manual assignment as the request lists it: (partition, replicas)."""


def check_manual_partition_assignment(
    replicas: Sequence[int], registered: Collection[int], replication_factor: int | None
) -> None:
    """One partition's replicas: not empty, each a registered broker named once, and as
    many as ``replication_factor`` (the other partitions' count) when there is one."""
    if not replicas:
        raise InvalidReplicaAssignment(
            "The manual partition assignment includes an empty replica list."
        )
    previous = None
    for broker in sorted(replicas):
        if broker not in registered:
            raise InvalidReplicaAssignment(
                f"The manual partition assignment includes broker {broker}, but no such "
                "broker is registered."
            )
        if broker == previous:
            raise InvalidReplicaAssignment(
                f"The manual partition assignment includes the broker {broker} more than once."
            )
        previous = broker
    if replication_factor is not None and len(replicas) != replication_factor:
        raise InvalidReplicaAssignment(
            f"The manual partition assignment includes a partition with {len(replicas)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{replication_factor} replica(s)."
        )


def new_topic_assignment(
    assignments: Assignments, registered: Collection[int]
) -> dict[int, list[int]]:
    """A CreateTopics topic's assignments (partition index, replicas), in request order,
    checked: each partition once, each replica list valid and as long as the first, the
    partitions numbered 0 to n-1. Returns partition -> replicas."""
    parts: dict[int, list[int]] = {}
    replication_factor: int | None = None
    for partition, replicas in assignments:
        if partition in parts:
            raise InvalidReplicaAssignment(
                f"Found multiple manual partition assignments for partition {partition}"
            )
        check_manual_partition_assignment(replicas, registered, replication_factor)
        replication_factor = len(replicas)
        parts[partition] = list(replicas)
    if any(p not in parts for p in range(len(parts))):
        raise InvalidReplicaAssignment(
            "partitions should be a consecutive 0-based integer sequence"
        )
    return parts


def new_partitions_assignment(
    assignments: Sequence[Sequence[int]],
    current: int,
    total: int,
    replication_factor: int,
    registered: Collection[int],
) -> dict[int, list[int]]:
    """A CreatePartitions topic's assignments, one replica list per new partition in
    order, for a topic growing from ``current`` to ``total`` partitions whose partitions
    have ``replication_factor`` replicas. Returns partition -> replicas."""
    additional = total - current
    if len(assignments) != additional:
        raise InvalidReplicaAssignment(
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(assignments)} assignment(s) were specified."
        )
    new: dict[int, list[int]] = {}
    for i, replicas in enumerate(assignments):
        check_manual_partition_assignment(replicas, registered, replication_factor)
        new[current + i] = list(replicas)
    return new
