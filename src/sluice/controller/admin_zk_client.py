"""Admin writes to ZooKeeper (Kafka's ``AdminZkClient``): create topics, add partitions,
change topic configs, request deletions and preferred replica elections. The controller
picks them up through its watches (brokers, config changes); none of these writes is
fenced by the controller epoch.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterable, Mapping, Sequence

from sluice.base import TopicPartition
from sluice.metastore import CreateMode, NodeExistsError, NoNodeError, ensure_path

from .kafka_zk_client import KafkaZkClient
from .model import ReplicaAssignment
from .zk_data import (
    ConfigEntityChangeNotificationZNode,
    DeleteTopicsTopicZNode,
    DeleteTopicsZNode,
    EntityConfigZNode,
    PreferredReplicaElectionZNode,
    TopicConfigZNode,
    TopicsZNode,
    TopicZNode,
    new_topic_id,
)

__all__ = ["AdminZkClient", "assign_replicas_to_brokers"]


def assign_replicas_to_brokers(
    broker_ids: Sequence[int],
    n_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's rack-unaware assignment: spread leaders round-robin from a random broker
    and shift followers so that replicas of consecutive partitions land apart."""
    if n_partitions <= 0:
        raise ValueError("number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise ValueError("replication factor must be larger than 0")
    if replication_factor > len(broker_ids):
        raise ValueError(
            f"replication factor {replication_factor} larger than available brokers "
            f"{len(broker_ids)}"
        )
    brokers = sorted(broker_ids)
    rng = rng or random.Random()
    n = len(brokers)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition_id = max(0, start_partition_id)
    assignment: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if partition_id > 0 and partition_id % n == 0:
            shift += 1
        first = (partition_id + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        assignment[partition_id] = replicas
        partition_id += 1
    return assignment


class AdminZkClient:
    """Topic administration through ZooKeeper, as Kafka's tools did before KRaft."""

    def __init__(self, zk_client: KafkaZkClient) -> None:
        self.zk_client = zk_client
        self.store = zk_client.store

    def create_topic_with_assignment(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        config: Mapping[str, str] | None = None,
        topic_id: str | None = None,
    ) -> str:
        """Write the topic's config, then its assignment; returns the topic id."""
        topic_id = topic_id or new_topic_id()
        ensure_path(self.store, TopicsZNode.path)
        ensure_path(self.store, "/config/topics")
        config_path = TopicConfigZNode.path(topic)
        config_data = TopicConfigZNode.encode(config or {})
        if self.store.exists(config_path) is None:
            self.store.create(config_path, config_data)
        else:
            self.store.set(config_path, config_data)
        full = {p: ReplicaAssignment(tuple(r)) for p, r in assignment.items()}
        self.store.create(TopicZNode.path(topic), TopicZNode.encode(topic_id, full))
        return topic_id

    def create_topic(
        self,
        topic: str,
        partitions: int,
        replication_factor: int,
        config: Mapping[str, str] | None = None,
    ) -> dict[int, list[int]]:
        """Assign replicas over the live brokers and create the topic; returns the assignment."""
        brokers = [b.id for b in self.zk_client.get_all_broker_and_epochs_in_cluster()]
        assignment = assign_replicas_to_brokers(brokers, partitions, replication_factor)
        self.create_topic_with_assignment(topic, assignment, config)
        return assignment

    def add_partitions(self, topic: str, new_assignment: Mapping[int, Sequence[int]]) -> None:
        """Add partitions (their ids must follow the existing ones) to a topic."""
        found = self.zk_client.get_topic_assignment(topic)
        if found is None:
            raise ValueError(f"topic {topic} does not exist")
        topic_id, assignment = found
        for partition, replicas in new_assignment.items():
            if partition in assignment:
                raise ValueError(f"partition {partition} of {topic} already exists")
            assignment[partition] = ReplicaAssignment(tuple(replicas))
        self.zk_client.set_topic_assignment(topic, topic_id, assignment)

    def change_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Write the topic's overrides and announce the change to every broker
        (``/config/changes``)."""
        ensure_path(self.store, "/config/topics")
        path, data = TopicConfigZNode.path(topic), TopicConfigZNode.encode(config)
        if self.store.exists(path) is None:
            with contextlib.suppress(NodeExistsError):
                self.store.create(path, data)
        self.store.set(path, data)
        change = ConfigEntityChangeNotificationZNode
        ensure_path(self.store, change.path)
        self.store.create(
            f"{change.path}/{change.prefix}", change.encode(f"topics/{topic}"),
            CreateMode.PERSISTENT_SEQUENTIAL,
        )  # fmt: skip

    def delete_topic(self, topic: str) -> None:
        """Queue ``topic`` for deletion (/admin/delete_topics/<topic>)."""
        ensure_path(self.store, DeleteTopicsZNode.path)
        with contextlib.suppress(NodeExistsError):
            self.store.create(DeleteTopicsTopicZNode.path(topic))

    def elect_preferred_leaders(self, partitions: Iterable[TopicPartition]) -> None:
        """Ask for a preferred replica election (/admin/preferred_replica_election)."""
        ensure_path(self.store, "/admin")
        data = PreferredReplicaElectionZNode.encode(partitions)
        self.store.create(PreferredReplicaElectionZNode.path, data)

    # -- user and client configs (/config/users, /config/clients) -----------------------
    def fetch_entity_config(self, entity_path: str) -> dict[str, str]:
        """The config of ``users/u``, ``clients/c`` or ``users/u/clients/c`` ({} if none)."""
        try:
            return EntityConfigZNode.decode(self.store.get(EntityConfigZNode.path(entity_path))[0])
        except NoNodeError:
            return {}

    def fetch_all_entity_configs(self) -> dict[str, dict[str, str]]:
        """Every user, client id and (user, client id) config, by entity path."""
        out: dict[str, dict[str, str]] = {}
        for kind in ("users", "clients"):
            try:
                names = self.store.get_children(f"/config/{kind}")
            except NoNodeError:
                continue
            for name in names:
                path = f"{kind}/{name}"
                out[path] = self.fetch_entity_config(path)
                if kind != "users":
                    continue
                try:
                    clients = self.store.get_children(f"/config/{path}/clients")
                except NoNodeError:
                    continue
                for client in clients:
                    out[f"{path}/clients/{client}"] = self.fetch_entity_config(
                        f"{path}/clients/{client}"
                    )
        return out

    def change_entity_config(self, entity_path: str, config: Mapping[str, str]) -> None:
        """Write an entity's config and announce it to every broker (``/config/changes``
        with ``entity_path``), as Kafka's ``changeConfigs`` does for users and clients."""
        path, data = EntityConfigZNode.path(entity_path), EntityConfigZNode.encode(config)
        if self.store.exists(path) is None:
            ensure_path(self.store, path.rpartition("/")[0])
            with contextlib.suppress(NodeExistsError):
                self.store.create(path, data)
        self.store.set(path, data)
        change = ConfigEntityChangeNotificationZNode
        ensure_path(self.store, change.path)
        self.store.create(
            f"{change.path}/{change.prefix}", change.encode(entity_path),
            CreateMode.PERSISTENT_SEQUENTIAL,
        )  # fmt: skip
