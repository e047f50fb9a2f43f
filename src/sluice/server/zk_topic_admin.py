"""``ZkTopicAdmin``: topic administration of a broker in a ZooKeeper cluster (Kafka's
``ZkAdminManager``).

A topic is created by writing its config and replica assignment under ``/config/topics``
and ``/brokers/topics``, deleted by queueing it under ``/admin/delete_topics``, grown by
rewriting its assignment, and its overrides change in ``/config/topics`` with a
notification under ``/config/changes``; the controller then creates, moves or deletes the
replicas (LeaderAndIsr, StopReplica) and every broker applies the new overrides
(``ClusterManager``). A topic with no replica here is read from ZooKeeper. The checks and
config resolution both modes share are in :class:`~sluice.server.topic_admin.TopicAdminBase`.

Imported in cluster mode only, with the controller's ZooKeeper clients.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import uuid
from typing import TYPE_CHECKING

from sluice.base.log_summary import summarize
from sluice.config import BrokerConfig, validate_topic_configs
from sluice.controller import AdminZkClient, KafkaZkClient, assign_replicas_to_brokers
from sluice.metastore import NodeExistsError
from sluice.server.topic_admin import TopicAdminBase
from sluice.server.topics import TopicInfo, TopicRegistry, validate_topic_name

if TYPE_CHECKING:
    from sluice.log import LogManager
    from sluice.replication.metadata_cache import MetadataCache
    from sluice.server.request_context import Coordinators

__all__ = ["ZkTopicAdmin", "topic_uuid"]

log = logging.getLogger(__name__)


def topic_uuid(topic_id: str | None) -> uuid.UUID:
    """A topic id as ZooKeeper holds it (base64 as Kafka writes it, or a UUID string)."""
    if not topic_id:
        return uuid.UUID(int=0)
    with contextlib.suppress(ValueError):
        return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))
    with contextlib.suppress(ValueError):
        return uuid.UUID(topic_id)
    return uuid.UUID(int=0)


class ZkTopicAdmin(TopicAdminBase):
    """See the module."""

    def __init__(
        self,
        config: BrokerConfig,
        registry: TopicRegistry,
        log_manager: LogManager,
        metadata_cache: MetadataCache,
        coordinators: Coordinators,
        zk: KafkaZkClient,
        admin: AdminZkClient,
    ) -> None:
        super().__init__(config, registry, log_manager, metadata_cache, coordinators)
        self.zk = zk
        self.admin = admin

    def topic_info(self, name: str) -> TopicInfo | None:
        """The topic as this broker knows it; one with no replica here is read from
        ZooKeeper."""
        info = self.registry.get(name)
        if info is None:
            info = self.existing_topic(name)
        return info

    def existing_topic(self, name: str) -> TopicInfo | None:
        """The topic as ZooKeeper holds it."""
        found = self.zk.get_topic_assignment(name)
        if found is None:
            return None
        topic_id, assignment = found
        return TopicInfo(
            name, topic_uuid(topic_id),
            {p: list(a.replicas) for p, a in assignment.items()},
            self.zk.get_topic_config(name),
        )  # fmt: skip

    def _whole_topic(self, name: str) -> TopicInfo | None:
        return self.existing_topic(name)

    def live_broker_ids(self) -> list[int]:
        return sorted(b.id for b in self.zk.get_all_broker_and_epochs_in_cluster())

    def _register(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        validate_only: bool,
        assignment: dict[int, list[int]] | None,
    ) -> TopicInfo:
        """The assignment (given, or spread over the live brokers as Kafka does) and the
        configs into ZooKeeper; the controller creates the partitions."""
        validate_topic_name(name)
        validate_topic_configs(configs)
        if self.zk.get_topic_assignment(name) is not None:
            raise FileExistsError(f"Topic '{name}' already exists.")
        if assignment is None:
            assignment = assign_replicas_to_brokers(
                self.live_broker_ids(), num_partitions, replication_factor
            )
        topic_id = None
        if not validate_only:
            try:
                topic_id = self.admin.create_topic_with_assignment(name, assignment, configs)
            except NodeExistsError:  # created meanwhile
                raise FileExistsError(f"Topic '{name}' already exists.") from None
            log.info(
                "created topic %s with %d partitions: %s", name, len(assignment),
                summarize(sorted(assignment.items()), _describe_assignment),
                extra={"event": "topic_created", "topic": name,
                       "partition_count": len(assignment)},
            )  # fmt: skip
        return TopicInfo(name, topic_uuid(topic_id), assignment, dict(configs))

    async def create_partition_logs(
        self, name: str, num_partitions: int, configs: dict[str, str]
    ) -> None:
        """Nothing: a replica's log is created when the controller makes this broker one
        (LeaderAndIsr)."""

    def coordinator_topic(
        self, name: str, num_partitions: int, configs: dict[str, str]
    ) -> TopicInfo:
        """The topic from the registry or ZooKeeper; until the first FindCoordinator
        creates it (replication capped by the live brokers), a stand-in with
        ``num_partitions`` partitions and no replicas. The coordinator owns the
        partitions this broker is elected to lead (LeaderAndIsr)."""
        return self.topic_info(name) or TopicInfo(
            name, uuid.UUID(int=0), {p: [] for p in range(num_partitions)}, {}
        )

    def ensure_transaction_state(self) -> None:
        """Nothing: the first FindCoordinator creates ``__transaction_state`` and
        LeaderAndIsr elects its coordinators."""

    def _delete_topic(self, name: str) -> None:
        """Queue the topic for deletion; the controller stops and deletes its replicas."""
        if self.zk.get_topic_assignment(name) is None:
            raise KeyError(name)
        self.admin.delete_topic(name)

    def _add_partitions(
        self, name: str, total: int, validate_only: bool, assignment: dict[int, list[int]] | None
    ) -> None:
        found = self.zk.get_topic_assignment(name)
        if found is None:
            raise KeyError(name)
        _, existing = found
        current = len(existing)
        if total <= current:
            raise ValueError(
                f"Topic currently has {current} partitions, which is higher than "
                f"or equal to the requested {total}."
            )
        new = assignment
        if new is None:
            rf = len(next(iter(existing.values())).replicas)
            new = assign_replicas_to_brokers(
                self.live_broker_ids(), total - current, rf, start_partition_id=current
            )
            new = {p if p >= current else p + current: r for p, r in new.items()}
        if not validate_only:
            self.admin.add_partitions(name, new)
            log.info(
                "added %d partitions to topic %s: %s", len(new), name,
                summarize(sorted(new.items()), _describe_assignment),
            )  # fmt: skip

    def _update_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Write the overrides to ZooKeeper and announce them: every broker applies them
        when notified, this one at once."""
        self.admin.change_topic_config(name, configs)
        self.apply_topic_configs(name, configs)


def _describe_assignment(item: tuple[int, list[int]]) -> str:
    partition, replicas = item
    return f"{partition}: {replicas}"
