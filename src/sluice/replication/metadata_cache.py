"""``MetadataCache``: this broker's view of the cluster's topics, partitions and brokers.

As Kafka's ``MetadataCache``, it answers every metadata question a request handler asks
(Metadata, DescribeCluster, FindCoordinator, topic existence for the group and
transaction APIs) the same way whatever the mode. What differs is only what feeds it:

* on a single node, the broker publishes each topic of its local registry with the
  partitions its replica manager hosts (:meth:`put_topic`, :meth:`remove_topic`); it is
  the one live broker (:meth:`register_local_broker` with ``alive=True``) and the
  controller;
* in a cluster, the controller's UpdateMetadata requests replace the live brokers and
  the partition states (:meth:`update_metadata`); this broker's own registration is
  only what Metadata names while no live broker is known yet, and the controller id is
  read from the broker's view of ``/controller``.

Sans-I/O: no event loop, no sockets, no ZooKeeper; event-loop thread only.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from sluice.base import TopicPartition
from sluice.controller.model import LEADER_DURING_DELETE, NO_LEADER, Broker, EndPoint
from sluice.controller.requests import UpdateMetadataPartitionState

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Kafka's internal topics: the group and transaction coordinators' state."""

__all__ = ["MetadataCache", "PartitionMetadata"]


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition as the Metadata API describes it: ``leader`` is -1 unless the leader
    is alive, ``offline_replicas`` are the replicas on brokers that are not."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


class MetadataCache:
    """Topics, partition states, live brokers and the controller id (see the module)."""

    __slots__ = ("_controller_id", "_live", "_local", "_names_by_id", "_topic_ids", "_topics",
                 "broker_id", "cluster_id")  # fmt: skip

    def __init__(self, broker_id: int, cluster_id: str = "") -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self._local: Broker | None = None
        self._live: dict[int, Broker] = {}
        self._controller_id: Callable[[], int] = lambda: broker_id
        self._topics: dict[str, dict[int, UpdateMetadataPartitionState]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        # topic_name's index (Fetch v13+ asks it for every topic): made when first needed
        # after a change.
        self._names_by_id: dict[uuid.UUID, str] | None = None

    # -- feeds -----------------------------------------------------------------------
    def register_local_broker(self, broker: Broker, *, alive: bool) -> None:
        """This broker's own registration (its advertised endpoint). ``alive``: it is the
        one live broker (a single node); otherwise the live brokers come with
        UpdateMetadata and this one is named only while none is known."""
        self._local = broker
        if alive:
            self._live = {broker.id: broker}

    def set_controller_id_source(self, controller_id: Callable[[], int]) -> None:
        """Where the controller id is read (a cluster: this broker's view of ``/controller``;
        by default this broker, which a single node is)."""
        self._controller_id = controller_id

    def put_topic(
        self, name: str, topic_id: uuid.UUID, partitions: Iterable[UpdateMetadataPartitionState]
    ) -> None:
        """Single node: (re)publish a topic with all its partitions."""
        self._topics[name] = {s.topic_partition.partition: s for s in partitions}
        self._topic_ids[name] = topic_id
        self._names_by_id = None

    def remove_topic(self, name: str) -> None:
        """Single node: a deleted topic."""
        self._topics.pop(name, None)
        self._topic_ids.pop(name, None)
        self._names_by_id = None

    def update_metadata(
        self,
        live_brokers: Iterable[Broker],
        partition_states: Iterable[UpdateMetadataPartitionState],
        topic_ids: Mapping[str, uuid.UUID] | None = None,
    ) -> None:
        """Cluster: apply an UpdateMetadata request. A non-empty ``live_brokers`` replaces
        the live brokers; each partition state replaces the partition's, and leader -2
        (the topic is being deleted) removes it. ``topic_ids`` gives the ids of topics
        the cache does not know yet (see :meth:`topics_without_id`)."""
        live = {b.id: b for b in live_brokers}
        if live:
            self._live = live
        self._names_by_id = None
        for s in partition_states:
            tp = s.topic_partition
            if s.leader == LEADER_DURING_DELETE:
                partitions = self._topics.get(tp.topic)
                if partitions is not None:
                    partitions.pop(tp.partition, None)
                    if not partitions:
                        del self._topics[tp.topic]
                        self._topic_ids.pop(tp.topic, None)
                continue
            self._topics.setdefault(tp.topic, {})[tp.partition] = s
            topic_id = None if topic_ids is None else topic_ids.get(tp.topic)
            if topic_id is not None and tp.topic not in self._topic_ids:
                self._topic_ids[tp.topic] = topic_id

    def set_topic_id(self, name: str, topic_id: uuid.UUID) -> None:
        """Cluster: a topic's id, learnt before its partition states arrive."""
        self._topic_ids[name] = topic_id
        self._names_by_id = None

    def topics_without_id(
        self, partition_states: Iterable[UpdateMetadataPartitionState]
    ) -> set[str]:
        """The topics of ``partition_states`` (not being deleted) whose id is unknown."""
        return {
            s.topic_partition.topic for s in partition_states
            if s.leader != LEADER_DURING_DELETE and s.topic_partition.topic not in self._topic_ids
        }  # fmt: skip

    # -- brokers ---------------------------------------------------------------------
    @property
    def controller_id(self) -> int:
        return self._controller_id()

    def alive_brokers(self) -> list[Broker]:
        """The live brokers with an endpoint, by id; this broker alone while none is known."""
        brokers = [b for _, b in sorted(self._live.items()) if b.endpoints]
        if not brokers and self._local is not None:
            return [self._local]
        return brokers

    def alive_broker(self, broker_id: int) -> Broker | None:
        return self._live.get(broker_id)

    def alive_endpoints(self, listener_name: str) -> list[tuple[Broker, EndPoint]]:
        """The live brokers with an endpoint on ``listener_name`` (the listener a request
        came in on, as Kafka answers each listener with its own addresses), by id."""
        out = []
        for broker in self.alive_brokers():
            endpoint = broker.endpoint(listener_name)
            if endpoint is not None:
                out.append((broker, endpoint))
        return out

    # -- topics and partitions ---------------------------------------------------------
    def topic_names(self) -> list[str]:
        return sorted(self._topics)

    def contains_topic(self, name: str) -> bool:
        return name in self._topics

    def contains_partition(self, tp: TopicPartition) -> bool:
        partitions = self._topics.get(tp.topic)
        return partitions is not None and tp.partition in partitions

    def num_partitions(self, name: str) -> int | None:
        partitions = self._topics.get(name)
        return None if partitions is None else len(partitions)

    def topic_id(self, name: str) -> uuid.UUID | None:
        return self._topic_ids.get(name) if name in self._topics else None

    def topic_name(self, topic_id: uuid.UUID | None) -> str | None:
        """The known topic with this id, if any."""
        if topic_id is None:
            return None
        names = self._names_by_id
        if names is None:
            topics = self._topics
            names = self._names_by_id = {i: n for n, i in self._topic_ids.items() if n in topics}
        return names.get(topic_id)

    @staticmethod
    def is_internal(name: str) -> bool:
        return name in INTERNAL_TOPICS

    def partitions(self, name: str) -> list[PartitionMetadata]:
        """The topic's partitions by index (none if unknown), leaders and replicas judged
        against the live brokers."""
        states = self._topics.get(name)
        if not states:
            return []
        live = self._live
        return [
            PartitionMetadata(
                p,
                s.leader if s.leader in live else NO_LEADER,
                s.leader_epoch,
                tuple(s.replicas),
                tuple(s.isr),
                tuple(r for r in s.replicas if r not in live),
            )
            for p, s in sorted(states.items())
        ]

    def all_partitions(self) -> set[TopicPartition]:
        return {s.topic_partition for states in self._topics.values() for s in states.values()}

    def replica_assignment(self, name: str) -> dict[int, list[int]]:
        """Partition -> replicas of a known topic (empty if unknown)."""
        return {p: list(s.replicas) for p, s in sorted(self._topics.get(name, {}).items())}

    def leader(self, tp: TopicPartition) -> Broker | None:
        """The partition's leader, if the partition is known and its leader is alive."""
        partitions = self._topics.get(tp.topic)
        state = None if partitions is None else partitions.get(tp.partition)
        return None if state is None else self._live.get(state.leader)
