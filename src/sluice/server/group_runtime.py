"""The group coordinator's I/O shell: ``__consumer_offsets`` through the replica manager,
creation of the topic, asynchronous loading and the offset-expiration schedule.

It takes what it uses by name — the broker config, the replica manager, the topic admin
(as :class:`~sluice.server.topic_admin.CoordinatorTopics`) and a
:class:`~sluice.purgatory.PurgatoryFactory` — and is the same code in both modes: the
topic admin the broker chose decides whether the topic is created here (a single node)
or by the first FindCoordinator (a cluster)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from sluice.base import TopicPartition
from sluice.coordinator.group import GROUP_METADATA_TOPIC_NAME, GroupConfig, GroupCoordinator
from sluice.coordinator.group.manager import AppendCallback
from sluice.log.append import AppendOrigin
from sluice.replication.delayed import ProducePartitionStatus

if TYPE_CHECKING:
    from sluice.base.clock import Clock
    from sluice.config import BrokerConfig
    from sluice.purgatory import PurgatoryFactory
    from sluice.replication.replica_manager import ReplicaManager
    from sluice.server.topic_admin import CoordinatorTopics

__all__ = [
    "ReplicaManagerGroupLog",
    "answer_from_thread",
    "build_group_coordinator",
    "create_offsets_topic",
    "deferred",
    "load_elected_partition",
    "load_offsets_partition",
    "run_group_coordinator",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Kafka's offsetsTopicConfigs: compacted, 100 MiB segments (offsets.topic.segment.bytes).
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}


class ReplicaManagerGroupLog:
    """A ``GroupLog`` over the broker's ``__consumer_offsets`` partitions: acks=all
    appends through the replica manager, reads from the partition logs up to the HW."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        timeout_ms: int = 5000,
        topic: str = GROUP_METADATA_TOPIC_NAME,
    ) -> None:
        self.replica_manager = replica_manager
        self.timeout_ms = timeout_ms
        self.topic = topic

    def _tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.topic, partition)

    def append(self, partition: int, records: bytes, callback: AppendCallback) -> None:
        tp = self._tp(partition)

        def done(statuses: dict[TopicPartition, ProducePartitionStatus]) -> None:
            status = statuses[tp]
            callback(status.error, status.base_offset)

        # Coordinator origin: transactional offset commits carry a producer id but no
        # sequence numbers.
        self.replica_manager.append_records(
            self.timeout_ms, -1, {tp: records}, done, AppendOrigin.COORDINATOR
        )

    def offsets(self, partition: int) -> tuple[int, int]:
        """Loading reads to the log end, as Kafka does: a newly elected leader's high
        watermark may still trail records that every in-sync replica already has."""
        p = self.replica_manager.get_partition(self._tp(partition))
        if p is None:
            return 0, 0
        return p.log.log_start_offset, p.log.log_end_offset

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        p = self.replica_manager.get_partition(self._tp(partition))
        if p is None:
            return b""
        return p.log.read(offset, max_bytes, p.log.log_end_offset, True).records.read()


def build_group_coordinator(
    broker_config: BrokerConfig,
    topics: CoordinatorTopics,
    replica_manager: ReplicaManager,
    purgatories: PurgatoryFactory,
    clock: Clock,
) -> GroupCoordinator:
    """A coordinator active for the ``__consumer_offsets`` partitions this broker leads,
    not yet loaded. On a single node the topic is created now if needed (compacted, one
    replica); in a cluster the first FindCoordinator creates it and LeaderAndIsr elects
    this broker for its partitions (``on_election`` / ``on_resignation``)."""
    config = GroupConfig.from_broker_config(broker_config)
    info = topics.coordinator_topic(
        GROUP_METADATA_TOPIC_NAME, config.offsets_topic_num_partitions, dict(OFFSETS_TOPIC_CONFIGS)
    )
    coordinator = GroupCoordinator(
        config,
        ReplicaManagerGroupLog(replica_manager, config.offset_commit_timeout_ms),
        info.num_partitions,
        purgatories("Rebalance", 1000),
        purgatories("Heartbeat", 1000),
        clock=clock,
    )
    owned = []
    for p in info.assignment:
        partition = replica_manager.get_partition(TopicPartition(info.name, p))
        if partition is not None and partition.is_leader:
            owned.append(p)
    coordinator.startup(owned, load=False)
    return coordinator


async def create_offsets_topic(broker_config: BrokerConfig, topics: CoordinatorTopics) -> None:
    """Before :func:`build_group_coordinator`, while a single node's listeners already
    serve: ``__consumer_offsets``'s partition logs are made off the event loop, so that
    building the coordinator only registers the topic (nothing to do if it exists, or in
    a cluster)."""
    config = GroupConfig.from_broker_config(broker_config)
    await topics.create_partition_logs(
        GROUP_METADATA_TOPIC_NAME, config.offsets_topic_num_partitions, dict(OFFSETS_TOPIC_CONFIGS)
    )


async def load_offsets_partition(coordinator: GroupCoordinator, partition: int) -> None:
    """Load one offsets partition this broker was just elected to lead."""
    await load_elected_partition(
        coordinator.load_partition, GROUP_METADATA_TOPIC_NAME, partition, "groups"
    )


async def load_elected_partition(
    load: Callable[[int], int], topic: str, partition: int, what: str
) -> None:
    """Run ``load(partition)`` for an internal-topic partition this broker was just
    elected to lead, after the LeaderAndIsr answer; log how much and how long."""
    await asyncio.sleep(0)
    started = time.monotonic()
    try:
        loaded = load(partition)
    except Exception:
        log.exception("failed to load %s-%d", topic, partition)
        return
    log.info(
        "Loaded %d %s from %s-%d in %.0f ms", loaded, what, topic, partition,
        (time.monotonic() - started) * 1000,
    )  # fmt: skip


async def load_owned_partitions(
    load: Callable[[int], int], topic: str, partitions: Iterable[int], what: str
) -> None:
    """Load a coordinator's partitions of ``topic`` one by one at start, yielding to the
    event loop between them (what a partition holds answers COORDINATOR_LOAD_IN_PROGRESS
    until it is loaded)."""
    started = time.monotonic()
    loaded = 0
    for partition in sorted(partitions):
        try:
            loaded += load(partition)
        except Exception:
            log.exception("failed to load %s-%d", topic, partition)
        await asyncio.sleep(0)
    log.info(
        "Loaded %d %s from %s in %.0f ms", loaded, what, topic,
        (time.monotonic() - started) * 1000,
    )  # fmt: skip


async def run_group_coordinator(coordinator: GroupCoordinator) -> None:
    """Load the offsets partitions, then expire old offsets every
    offsets.retention.check.interval.ms."""
    await load_owned_partitions(
        coordinator.load_partition, GROUP_METADATA_TOPIC_NAME,
        coordinator.group_manager.loading_partitions, "groups",
    )  # fmt: skip
    interval_s = coordinator.config.offsets_retention_check_interval_ms / 1000
    while True:
        await asyncio.sleep(interval_s)
        try:
            coordinator.cleanup_expired_offsets()
        except Exception:
            log.exception("offset expiration failed")


def deferred() -> tuple[Callable[[T], None], Awaitable[T]]:
    """A callback for the coordinator and an awaitable of the value it is called with,
    for handlers whose answer may come later (JoinGroup, SyncGroup, OffsetCommit)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def callback(value: T) -> None:
        if not future.done():
            future.set_result(value)

    return callback, future


async def answer_from_thread(submit: Callable[[Callable[[T], None]], object]) -> T:
    """Call ``submit(callback)`` and wait for the value ``callback`` is given on another
    thread (the controller's event thread answering ControlledShutdown, ElectLeaders or
    reassignments)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: T) -> None:
        if not future.done():
            future.set_result(value)

    def callback(value: T) -> None:
        loop.call_soon_threadsafe(settle, value)

    submit(callback)
    return await future
