"""``Cluster``: an immutable snapshot of brokers and partition leaders (Kafka's ``Cluster``).

Clients read the current snapshot without locks (the attribute holding it is
replaced as a whole on each metadata update). Indexes the producer needs on its
hot path (partitions per topic, per node, with a leader) are built once per
snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from sluice.base import TopicPartition

__all__ = ["Cluster", "Node", "PartitionInfo"]


class Node(NamedTuple):
    """A broker: id, host, port and rack. Bootstrap addresses get ids -1, -2, ..."""

    id: int
    host: str
    port: int
    rack: str | None = None

    def __str__(self) -> str:
        return f"{self.host}:{self.port} (id: {self.id} rack: {self.rack})"


class PartitionInfo(NamedTuple):
    """A partition's leader (None when unknown), leader epoch, replicas and ISR."""

    topic: str
    partition: int
    leader: Node | None
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    in_sync_replicas: tuple[int, ...] = ()


class Cluster:
    """Brokers, topics and partitions as of one metadata response."""

    __slots__ = (
        "_available_by_topic",
        "_by_node",
        "_by_topic",
        "_partitions",
        "cluster_id",
        "controller",
        "internal_topics",
        "invalid_topics",
        "is_bootstrap_configured",
        "nodes",
        "partition_counts",
        "topic_ids",
        "unauthorized_topics",
    )

    def __init__(
        self,
        cluster_id: str | None,
        nodes: Iterable[Node],
        partitions: Iterable[PartitionInfo],
        unauthorized_topics: Iterable[str] = (),
        invalid_topics: Iterable[str] = (),
        controller: Node | None = None,
        topic_ids: dict[str, object] | None = None,
        is_bootstrap_configured: bool = False,
        internal_topics: Iterable[str] = (),
    ) -> None:
        self.cluster_id = cluster_id
        self.nodes: dict[int, Node] = {node.id: node for node in nodes}
        self.controller = controller
        self.unauthorized_topics = frozenset(unauthorized_topics)
        self.invalid_topics = frozenset(invalid_topics)
        self.internal_topics = frozenset(internal_topics)
        self.topic_ids = dict(topic_ids or {})
        self.is_bootstrap_configured = is_bootstrap_configured
        self._partitions: dict[TopicPartition, PartitionInfo] = {}
        by_topic: dict[str, list[PartitionInfo]] = {}
        by_node: dict[int, list[PartitionInfo]] = {}
        for info in sorted(partitions, key=lambda p: (p.topic, p.partition)):
            self._partitions[TopicPartition(info.topic, info.partition)] = info
            by_topic.setdefault(info.topic, []).append(info)
            if info.leader is not None:
                by_node.setdefault(info.leader.id, []).append(info)
        self._by_topic = by_topic
        self._by_node = by_node
        self.partition_counts = {topic: len(parts) for topic, parts in by_topic.items()}
        """Topic -> partition count (the producer's hot path reads it directly)."""
        self._available_by_topic = {
            topic: [p for p in parts if p.leader is not None] for topic, parts in by_topic.items()
        }

    @classmethod
    def bootstrap(cls, addresses: Iterable[tuple[str, int]]) -> Cluster:
        """A cluster of bootstrap addresses only (ids -1, -2, ...), no topics."""
        nodes = [Node(-(i + 1), host, port) for i, (host, port) in enumerate(addresses)]
        return cls(None, nodes, (), is_bootstrap_configured=True)

    @classmethod
    def empty(cls) -> Cluster:
        return cls(None, (), ())

    def node_by_id(self, node_id: int) -> Node | None:
        return self.nodes.get(node_id)

    def leader_for(self, tp: TopicPartition) -> Node | None:
        """The partition's leader, or None if it (or the partition) is unknown."""
        info = self._partitions.get(tp)
        return None if info is None else info.leader

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        return self._partitions.get(tp)

    def partitions_for_topic(self, topic: str) -> list[PartitionInfo]:
        """All partitions of ``topic`` in partition order ([] if unknown)."""
        return self._by_topic.get(topic, [])

    def available_partitions_for_topic(self, topic: str) -> list[PartitionInfo]:
        """The partitions of ``topic`` that have a leader."""
        return self._available_by_topic.get(topic, [])

    def partitions_for_node(self, node_id: int) -> list[PartitionInfo]:
        """The partitions led by ``node_id``, in a stable order (for drain fairness)."""
        return self._by_node.get(node_id, [])

    def partition_count_for_topic(self, topic: str) -> int | None:
        """How many partitions ``topic`` has, or None if the topic is unknown."""
        parts = self._by_topic.get(topic)
        return None if parts is None else len(parts)

    def topics(self) -> frozenset[str]:
        return frozenset(self._by_topic)

    def __repr__(self) -> str:
        return (
            f"Cluster(id={self.cluster_id}, nodes={list(self.nodes.values())}, "
            f"partitions={list(self._partitions.values())})"
        )
