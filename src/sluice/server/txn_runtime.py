"""The transaction coordinator's I/O shell: ``__transaction_state`` through the replica
manager, the transaction markers written to the partition leaders, loading, and the
periodic sweep for transactions past their timeout."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
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

if TYPE_CHECKING:
    from sluice.coordinator.group import GroupCoordinator
    from sluice.replication.replica_manager import ReplicaManager
    from sluice.server.broker import Broker

__all__ = [
    "ReplicaManagerMarkerWriter",
    "build_transaction_coordinator",
    "ensure_transaction_state",
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

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def _topic_exists(self, topic: str) -> bool:
        broker = self.broker
        return broker.registry.get(topic) is not None or broker.metadata_cache.contains_topic(topic)

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
            partition = self.broker.replica_manager.get_partition(tp)
            if partition is None and not self._topic_exists(tp.topic):
                finished(tp)
                return

            def written(error: ErrorCode) -> None:
                if error in (ErrorCode.none, ErrorCode.transaction_coordinator_fenced):
                    finished(tp)
                    return
                log.info("marker for producer %d in %s failed: %s", producer_id, tp, error.name)
                loop.call_later(MARKER_RETRY_BACKOFF_S, attempt, tp)

            if partition is not None and partition.is_leader:
                broker = self.broker
                write_marker(
                    broker.replica_manager, broker.group_coordinator,
                    broker.config["request.timeout.ms"], tp, producer_id, producer_epoch,
                    commit, coordinator_epoch, written,
                )  # fmt: skip
                return
            leader = self.broker.metadata_cache.leader(tp)
            if leader is None or leader.id == self.broker.broker_id or not leader.endpoints:
                loop.call_later(MARKER_RETRY_BACKOFF_S, attempt, tp)  # no leader known yet
                return
            task = asyncio.ensure_future(
                send_write_txn_markers(
                    leader.endpoints[0].host, leader.endpoints[0].port, self.broker.broker_id,
                    tp, producer_id, producer_epoch, commit, coordinator_epoch,
                )
            )  # fmt: skip
            task.add_done_callback(lambda t: written(_task_error(t)))

        for tp in sorted(partitions):
            attempt(tp)


async def send_write_txn_markers(
    host: str, port: int, broker_id: int, tp: TopicPartition, producer_id: int,
    producer_epoch: int, commit: bool, coordinator_epoch: int,
) -> ErrorCode:  # fmt: skip
    """WriteTxnMarkers (v1) for one partition to the broker that leads it."""
    from sluice.protocol.apis import ApiKey, request_type
    from sluice.server.inter_broker import BrokerConnection
    from sluice.server.messages import build

    body = build(
        request_type(ApiKey.WRITE_TXN_MARKERS, 1),
        markers=[{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}],
        }],
    )  # fmt: skip
    conn = BrokerConnection(host, port, f"txn-markers-{broker_id}")
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


def build_transaction_coordinator(broker: Broker) -> TransactionCoordinator:
    """A coordinator for the ``__transaction_state`` partitions this broker leads, not yet
    loaded. The topic itself is created on first use (:func:`ensure_transaction_state`),
    as in Kafka, so brokers that never see a transaction do not pay for its partitions."""
    num_partitions = broker.config["transaction.state.log.num.partitions"]
    config = TransactionConfig(
        broker.config["transaction.max.timeout.ms"], num_partitions,
        broker.config["transactional.id.expiration.ms"],
    )  # fmt: skip
    info = broker.registry.get(TRANSACTION_STATE_TOPIC_NAME)
    if info is None and broker.cluster is not None:
        from sluice.server.topics import TopicInfo

        info = broker.cluster.existing_topic(TRANSACTION_STATE_TOPIC_NAME) or TopicInfo(
            TRANSACTION_STATE_TOPIC_NAME, uuid.UUID(int=0), {p: [] for p in range(num_partitions)},
            {},
        )  # fmt: skip
    if info is not None:
        config.num_partitions = info.num_partitions
    coordinator = TransactionCoordinator(
        config,
        ReplicaManagerGroupLog(broker.replica_manager, 30000, TRANSACTION_STATE_TOPIC_NAME),
        ReplicaManagerMarkerWriter(broker),
        broker.producer_id_manager.generate_producer_id,
        broker.clock,
        broker._make_purgatory("TxnExpiration", 1000),
    )
    owned = {}
    for p in info.assignment if info is not None else ():
        tp = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, p)
        partition = broker.replica_manager.get_partition(tp)
        if partition is not None and partition.is_leader:
            owned[p] = partition.leader_epoch
    coordinator.startup(owned, load=False)
    return coordinator


def ensure_transaction_state(broker: Broker) -> None:
    """Single node: create ``__transaction_state`` (compacted, one replica) at the first
    transactional request and coordinate all its partitions, which are empty. In a
    cluster the first FindCoordinator creates it and LeaderAndIsr elects coordinators."""
    if broker.cluster is not None or broker.registry.get(TRANSACTION_STATE_TOPIC_NAME):
        return
    coordinator = broker.txn_coordinator
    info = broker.create_topic(
        TRANSACTION_STATE_TOPIC_NAME, coordinator.config.num_partitions, 1,
        dict(TRANSACTION_TOPIC_CONFIGS),
    )  # fmt: skip
    coordinator.config.num_partitions = info.num_partitions
    owned = {}
    for p in info.assignment:
        partition = broker.replica_manager.get_partition(TopicPartition(info.name, p))
        if partition is not None:
            owned[p] = partition.leader_epoch
    coordinator.startup(owned, load=True)


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
