"""The transaction coordinator's I/O shell: ``__transaction_state`` through the replica
manager, the transaction markers written to the partition leaders, loading, and the
periodic sweep for transactions past their timeout.

It takes what it uses by name — the broker config, the replica manager, the metadata
cache, the topic admin (as :class:`~sluice.server.topic_admin.CoordinatorTopics`), the
producer ids, the group coordinator and a :class:`~sluice.purgatory.PurgatoryFactory` —
and is the same code in both modes."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from sluice.base import TopicPartition
from sluice.coordinator.group import GROUP_METADATA_TOPIC_NAME
from sluice.coordinator.transaction import (
    TRANSACTION_STATE_TOPIC_NAME,
    TransactionConfig,
    TransactionCoordinator,
    build_marker_batch,
)
from sluice.log.append import AppendOrigin
from sluice.protocol import ErrorCode
from sluice.replication.delayed import ProducePartitionStatus
from sluice.server.group_runtime import (
    ReplicaManagerGroupLog,
    load_elected_partition,
    load_owned_partitions,
)
from sluice.server.listener_security import InterBrokerListener, inter_broker_listener

if TYPE_CHECKING:
    from sluice.base.clock import Clock
    from sluice.config import BrokerConfig
    from sluice.coordinator.group import GroupCoordinator
    from sluice.purgatory import PurgatoryFactory
    from sluice.replication.metadata_cache import MetadataCache
    from sluice.replication.producer_ids import ProducerIdManager
    from sluice.replication.replica_manager import ReplicaManager
    from sluice.server.inter_broker import BrokerConnection
    from sluice.server.topic_admin import CoordinatorTopics

__all__ = [
    "ReplicaManagerMarkerWriter",
    "build_transaction_coordinator",
    "create_transaction_state",
    "run_transaction_coordinator",
    "write_marker",
]

log = logging.getLogger(__name__)

# Kafka's transaction log topic configs: compacted, 100 MiB segments.
TRANSACTION_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
MARKER_RETRY_BACKOFF_S = 0.1
# Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms, a safety net: each
# open transaction also has a delayed operation on the timer.
ABORT_TIMED_OUT_INTERVAL_S = 10.0
# Kafka's transaction.remove.expired.transaction.cleanup.interval.ms (1 h).
EXPIRE_TRANSACTIONAL_IDS_INTERVAL_S = 3600.0


def write_marker(
    replica_manager: ReplicaManager,
    group_coordinator: GroupCoordinator,
    timeout_ms: int,
    tp: TopicPartition,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    callback: Callable[[ErrorCode], None],
) -> None:
    """Append one marker to a partition this broker leads (WriteTxnMarkers, or the
    coordinator in process); a marker in ``__consumer_offsets`` also settles the
    producer's transactional offset commits."""
    batch = build_marker_batch(
        producer_id, producer_epoch, commit, coordinator_epoch, replica_manager.clock.milliseconds()
    )

    def done(statuses: dict[TopicPartition, ProducePartitionStatus]) -> None:
        error = statuses[tp].error
        if error == ErrorCode.none and tp.topic == GROUP_METADATA_TOPIC_NAME:
            group_coordinator.handle_txn_completion(tp.partition, producer_id, commit)
        callback(error)

    replica_manager.append_records(timeout_ms, -1, {tp: batch}, done, AppendOrigin.COORDINATOR)


class ReplicaManagerMarkerWriter:
    """Writes the markers of a transaction to its partitions, retrying until each is
    written; a partition whose topic is gone counts as written."""

    def __init__(
        self,
        broker_id: int,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        topics: CoordinatorTopics,
        group_coordinator: GroupCoordinator,
        timeout_ms: int,
        inter_broker: InterBrokerListener,
    ) -> None:
        """``timeout_ms``: how long a marker written here waits for its replicas;
        ``inter_broker``: how the markers reach the partitions' leaders elsewhere."""
        self.inter_broker = inter_broker
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.topics = topics
        self.group_coordinator = group_coordinator
        self.timeout_ms = timeout_ms

    def write_markers(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
        partitions: set[TopicPartition], done: Callable[[], None],
    ) -> None:  # fmt: skip
        remaining = set(partitions)
        if not remaining:
            done()
            return
        loop = asyncio.get_running_loop()

        def finished(tp: TopicPartition) -> None:
            if tp in remaining:
                remaining.discard(tp)
                if not remaining:
                    done()

        def attempt(tp: TopicPartition) -> None:
            partition = self.replica_manager.get_partition(tp)
            if partition is None and not self.topics.is_known(tp.topic):
                finished(tp)
                return

            def written(error: ErrorCode) -> None:
                if error in (ErrorCode.none, ErrorCode.transaction_coordinator_fenced):
                    finished(tp)
                    return
                log.info("marker for producer %d in %s failed: %s", producer_id, tp, error.name)
                loop.call_later(MARKER_RETRY_BACKOFF_S, attempt, tp)

            if partition is not None and partition.is_leader:
                write_marker(
                    self.replica_manager, self.group_coordinator, self.timeout_ms, tp,
                    producer_id, producer_epoch, commit, coordinator_epoch, written,
                )  # fmt: skip
                return
            leader = self.metadata_cache.leader(tp)
            ep = self.inter_broker.endpoint(leader) if leader is not None else None
            if leader is None or leader.id == self.broker_id or ep is None:
                loop.call_later(MARKER_RETRY_BACKOFF_S, attempt, tp)  # no leader known yet
                return
            conn = self.inter_broker.connection(ep, f"txn-markers-{self.broker_id}")
            task = asyncio.ensure_future(
                send_write_txn_markers(
                    conn, tp, producer_id, producer_epoch, commit, coordinator_epoch,
                )
            )  # fmt: skip
            task.add_done_callback(lambda t: written(_task_error(t)))

        for tp in sorted(partitions):
            attempt(tp)


async def send_write_txn_markers(
    conn: BrokerConnection, tp: TopicPartition, producer_id: int,
    producer_epoch: int, commit: bool, coordinator_epoch: int,
) -> ErrorCode:  # fmt: skip
    """WriteTxnMarkers (v1) for one partition over ``conn`` (to the broker that leads it),
    which is closed after."""
    from sluice.protocol.apis import ApiKey, request_type
    from sluice.server.messages import build

    body = build(
        request_type(ApiKey.WRITE_TXN_MARKERS, 1),
        markers=[{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}],
        }],
    )  # fmt: skip
    try:
        response = await asyncio.wait_for(conn.send(body), 30)
    finally:
        conn.close()
    for marker in response.markers:
        for topic in marker.topics:
            for p in topic.partitions:
                return ErrorCode(p.error_code)
    return ErrorCode.unknown_server_error


def _task_error(task: asyncio.Future[ErrorCode]) -> ErrorCode:
    if task.cancelled():
        return ErrorCode.request_timed_out
    exc = task.exception()
    if exc is not None:
        log.info("WriteTxnMarkers failed: %r", exc)
        return ErrorCode.network_exception
    return task.result()


def build_transaction_coordinator(
    broker_config: BrokerConfig,
    topics: CoordinatorTopics,
    replica_manager: ReplicaManager,
    metadata_cache: MetadataCache,
    producer_ids: ProducerIdManager,
    group_coordinator: GroupCoordinator,
    purgatories: PurgatoryFactory,
    clock: Clock,
) -> TransactionCoordinator:
    """A coordinator for the ``__transaction_state`` partitions this broker leads, not yet
    loaded. The topic itself is created on first use (on a single node by
    :func:`create_transaction_state`, in a cluster by the first FindCoordinator), as in
    Kafka, so brokers that never see a transaction do not pay for its partitions."""
    config = TransactionConfig(
        broker_config["transaction.max.timeout.ms"],
        broker_config["transaction.state.log.num.partitions"],
        broker_config["transactional.id.expiration.ms"],
    )  # fmt: skip
    info = topics.topic_info(TRANSACTION_STATE_TOPIC_NAME)
    if info is not None:
        config.num_partitions = info.num_partitions
    markers = ReplicaManagerMarkerWriter(
        broker_config.broker_id, replica_manager, metadata_cache, topics, group_coordinator,
        broker_config["request.timeout.ms"], inter_broker_listener(broker_config),
    )  # fmt: skip
    coordinator = TransactionCoordinator(
        config,
        ReplicaManagerGroupLog(replica_manager, 30000, TRANSACTION_STATE_TOPIC_NAME),
        markers,
        producer_ids.generate_producer_id,
        clock,
        purgatories("TxnExpiration", 1000),
    )
    owned = {}
    for p in info.assignment if info is not None else ():
        tp = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, p)
        partition = replica_manager.get_partition(tp)
        if partition is not None and partition.is_leader:
            owned[p] = partition.leader_epoch
    coordinator.startup(owned, load=False)
    return coordinator


def create_transaction_state(
    topics: CoordinatorTopics, coordinator: TransactionCoordinator
) -> None:
    """Single node: create ``__transaction_state`` (compacted, one replica) at the first
    transactional request, or again if it went missing; the topic admin makes the
    coordinator own each partition, empty, as it hosts it. In a cluster the first
    FindCoordinator creates it and LeaderAndIsr elects coordinators."""
    info = topics.create_topic(
        TRANSACTION_STATE_TOPIC_NAME, coordinator.config.num_partitions, 1,
        dict(TRANSACTION_TOPIC_CONFIGS),
    )  # fmt: skip
    coordinator.config.num_partitions = info.num_partitions


async def load_transaction_partition(coordinator: TransactionCoordinator, partition: int) -> None:
    """Load one ``__transaction_state`` partition this broker was just elected to lead."""
    await load_elected_partition(
        coordinator.load_partition, TRANSACTION_STATE_TOPIC_NAME, partition, "transactional ids"
    )


async def run_transaction_coordinator(coordinator: TransactionCoordinator) -> None:
    """Load the owned partitions, then sweep for timed-out transactions."""
    await load_owned_partitions(
        coordinator.load_partition, TRANSACTION_STATE_TOPIC_NAME, coordinator.loading,
        "transactional ids",
    )  # fmt: skip
    next_expiration = time.monotonic() + EXPIRE_TRANSACTIONAL_IDS_INTERVAL_S
    while True:
        await asyncio.sleep(ABORT_TIMED_OUT_INTERVAL_S)
        try:
            coordinator.abort_timed_out_transactions()
            if time.monotonic() >= next_expiration:
                next_expiration = time.monotonic() + EXPIRE_TRANSACTIONAL_IDS_INTERVAL_S
                coordinator.expire_transactional_ids()
        except Exception:
            log.exception("aborting timed-out transactions failed")
