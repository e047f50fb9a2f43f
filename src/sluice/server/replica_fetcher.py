"""``ReplicaFetcher``: a follower's fetch loop against one leader (Kafka's
ReplicaFetcherThread, as a task on the broker's event loop).

The loop is the acks=all critical path: the leader answers our parked Fetch as soon as
a produce appends, we append what came (offsets and epochs kept) and send the next Fetch
at once, whose fetch offset tells the leader our new log end offset. No timer sits in
that loop; it only sleeps after an error (``replica.fetch.backoff.ms``-style 100 ms) or
while truncation waits for the leader.

Requests and responses go through the hand-written Fetch v11 envelope
(:mod:`sluice.server.replica_fetch_wire`) and a receive buffer reused from fetch to
fetch (the answer is released before the next one arrives), so a replicated batch is
copied once from the socket and once to the file.
Each Fetch asks for up to ``replica.fetch.max.bytes`` per partition (8 MiB by default,
several producer batches per round trip) and ``replica.fetch.response.max.bytes`` in all,
and lists last the partitions the previous answer served (:func:`move_to_back`). A
large answer is applied in steps of about 1 MiB of whole batches, the event loop running
between them (:meth:`ReplicaFetcher._apply`).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from sluice.base import TopicPartition
from sluice.log import KafkaStorageException
from sluice.protocol import ErrorCode
from sluice.protocol.records.batch import LENGTH_OFFSET, LOG_OVERHEAD
from sluice.replication.partition import Partition
from sluice.server.replica_fetch_wire import (
    FetchedPartition,
    FetchPartitionRequest,
    decode_fetch_response,
    encode_fetch_request,
)

if TYPE_CHECKING:
    from sluice.controller.model import EndPoint
    from sluice.replication.replica_manager import ReplicaManager
    from sluice.server.cluster import ClusterManager

__all__ = [
    "APPLY_STEP_BYTES",
    "ReplicaFetcher",
    "apply_fetched_partition",
    "batch_steps",
    "move_to_back",
]

log = logging.getLogger(__name__)

FETCH_BACKOFF_S = 0.1
# A follower applies a large answer's batches in steps of about this many bytes, letting
# the event loop run between them (each step's O_DIRECT write waits for the disk).
APPLY_STEP_BYTES = 1 << 20
_LENGTH = struct.Struct(">i")

K = TypeVar("K")
V = TypeVar("V")


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader (replica_id = us)."""

    def __init__(self, cluster: ClusterManager, leader_id: int, endpoint: EndPoint) -> None:
        """``endpoint``: the leader's, on the inter-broker listener."""
        self.cluster = cluster
        self.leader_id = leader_id
        self.host, self.port = endpoint.host, endpoint.port
        self.partitions: dict[TopicPartition, Partition] = {}
        # The leader's high watermark minus our log end after each answer (Kafka's
        # fetch-state lag): a replica is in sync for the follower throttle at 0.
        self._lag: dict[TopicPartition, int] = {}
        self._direct_io = bool(cluster.config["replica.direct.io"])
        self.wakeup = asyncio.Event()
        self.conn = cluster.inter_broker.connection(
            endpoint,
            f"replica-fetcher-{cluster.broker_id}",
            loopback_congestion=cluster.config["socket.loopback.congestion.control"],
        )
        self.task = asyncio.ensure_future(self._run())

    def add(self, partition: Partition) -> None:
        """Follow ``partition`` from this leader (its lag unknown until an answer)."""
        self.partitions[partition.tp] = partition
        self._lag.pop(partition.tp, None)
        self.wakeup.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self._lag.pop(tp, None)

    def stop(self) -> None:
        self.task.cancel()
        self.conn.close()

    def _request(self) -> bytes | None:
        """The next Fetch, framed: every partition from its log end offset, in the
        fetcher's order (a topic is repeated rather than its partitions regrouped, as
        Kafka's followers do, so that the order holds across topics). Replicas the
        follower throttle holds back are left out; None when that leaves none."""
        config = self.cluster.config
        max_bytes = int(config["replica.fetch.max.bytes"])
        quota = self.cluster.replica_manager.follower_quota
        throttling = quota.is_bounded
        topics: list[tuple[str, list[FetchPartitionRequest]]] = []
        for tp, p in self.partitions.items():
            partition_max = max_bytes
            if throttling and self._lag.get(tp, 1) > 0 and quota.is_throttled(tp):
                if quota.is_quota_exceeded():
                    continue  # held back (Kafka's shouldFollowerThrottle)
                partition_max = min(max_bytes, quota.window_bytes)
            log_ = p.log
            if not topics or topics[-1][0] != tp.topic:
                topics.append((tp.topic, []))
            topics[-1][1].append(
                FetchPartitionRequest(
                    tp.partition,
                    p.leader_epoch,
                    log_.log_end_offset,
                    log_.log_start_offset,
                    partition_max,
                )
            )
        if not topics:
            return None
        return encode_fetch_request(
            self.conn.next_correlation_id(),
            self.conn.client_id,
            replica_id=self.cluster.broker_id,
            max_wait_ms=int(config["replica.fetch.wait.max.ms"]),
            min_bytes=int(config["replica.fetch.min.bytes"]),
            max_bytes=int(config["replica.fetch.response.max.bytes"]),
            topics=topics,
        )

    async def _truncate(self) -> None:
        """KIP-101: ask the leader where our latest epoch ends, truncate there (or to the
        high watermark when our log has no epoch)."""
        from kio.schema.offset_for_leader_epoch.v3 import request as er_module

        er: Any = er_module

        from sluice.log import LATEST_TIMESTAMP

        pending = {tp: p for tp, p in self.partitions.items() if p.needs_truncation}
        asks: dict[TopicPartition, int] = {}
        for tp, p in pending.items():
            last = p.log.fetch_offset_by_timestamp(LATEST_TIMESTAMP)
            epoch = last.leader_epoch if last is not None and last.leader_epoch is not None else -1
            if epoch < 0 or p.log.log_end_offset == 0:
                if p.log.log_end_offset > p.high_watermark:
                    p.log.truncate_to(p.high_watermark)
                p.needs_truncation = False
            else:
                asks[tp] = epoch
        if not asks:
            return
        by_topic: dict[str, list[Any]] = {}
        for tp, epoch in asks.items():
            by_topic.setdefault(tp.topic, []).append(
                er.OffsetForLeaderPartition(
                    partition=tp.partition,
                    current_leader_epoch=pending[tp].leader_epoch,
                    leader_epoch=epoch,
                )
            )
        request = er.OffsetForLeaderEpochRequest(
            replica_id=self.cluster.broker_id,
            topics=tuple(er.OffsetForLeaderTopic(topic=t, partitions=tuple(ps))
                         for t, ps in by_topic.items()),
        )  # fmt: skip
        response = await self.conn.send(request)
        for topic in response.topics:
            for r in topic.partitions:
                tp = TopicPartition(topic.topic, r.partition)
                found = self.partitions.get(tp)
                if found is None or tp not in asks or not found.needs_truncation:
                    continue
                p = found
                if r.error_code != ErrorCode.none:
                    continue  # retried before the next fetch
                leo = p.log.log_end_offset
                target = p.high_watermark if r.end_offset < 0 else min(r.end_offset, leo)
                if target < leo:
                    log.info("%s: truncating from %d to %d (leader epoch %d ends at %d)",
                             tp, leo, target, asks[tp], r.end_offset)  # fmt: skip
                    p.log.truncate_to(target)
                p.needs_truncation = False

    async def _run(self) -> None:
        rm = self.cluster.replica_manager
        failures = 0
        while True:
            if not self.partitions:
                self.wakeup.clear()
                await self.wakeup.wait()
                continue
            try:
                if any(p.needs_truncation for p in self.partitions.values()):
                    await self._truncate()
                    if any(p.needs_truncation for p in self.partitions.values()):
                        await asyncio.sleep(FETCH_BACKOFF_S)
                        continue
                # The answer's records are views into the connection's receive buffer
                # for large answers, which takes the next answer once they are released.
                request = self._request()
                if request is None:  # every replica held back by the follower throttle
                    await asyncio.sleep(FETCH_BACKOFF_S)
                    continue
                frame = await self.conn.roundtrip(request)
                _correlation_id, _error, fetched = decode_fetch_response(frame)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                if failures == 1 or failures % 50 == 0:
                    log.info("fetch from leader %d failed (%d): %r", self.leader_id, failures, exc)
                self.conn.close()
                await asyncio.sleep(0.2)
                continue
            backoff = not await self._apply_all(rm, fetched)
            del frame, fetched  # released before the next answer arrives: its buffer is free
            if backoff:
                await asyncio.sleep(FETCH_BACKOFF_S)

    async def _apply_all(self, rm: ReplicaManager, fetched: list[FetchedPartition]) -> bool:
        """Apply every partition of an answer this follower still follows; False if one
        could not be applied (back off before the next fetch)."""
        applied = True
        served: list[TopicPartition] = []
        quota = rm.follower_quota
        for pd in fetched:
            tp = TopicPartition(pd.topic, pd.partition_index)
            partition = self.partitions.get(tp)
            if partition is None or partition.is_leader:
                continue
            size = len(pd.records) if pd.records is not None else 0
            if not await self._apply(tp, partition, pd):
                applied = False
                continue
            if size:
                served.append(tp)
                rm.replication_bytes_in += size
                if quota.is_bounded and quota.is_throttled(tp):
                    quota.record(size)
            if pd.high_watermark >= 0:
                self._lag[tp] = pd.high_watermark - partition.log.log_end_offset
            rm.wake(tp, True)
        move_to_back(self.partitions, served)
        return applied

    async def _apply(self, tp: TopicPartition, partition: Partition, pd: FetchedPartition) -> bool:
        """Apply one partition of an answer (:func:`apply_fetched_partition`), in steps of
        whole batches of about ``APPLY_STEP_BYTES``, letting the event loop run between
        them: a follower's append waits for its ``O_DIRECT`` write, and a broker that
        follows this partition may lead others, whose requests should not wait for all
        of a large answer. Between steps the partition may have moved on (another
        fetcher, leadership, a new leader epoch, truncation pending): the rest of the
        answer is then dropped, to be fetched again. True when applied (or dropped)."""
        records = pd.records
        if records is None or len(records) <= APPLY_STEP_BYTES:
            return apply_fetched_partition(partition, pd, self._direct_io)
        epoch = partition.leader_epoch
        for index, step in enumerate(batch_steps(records, APPLY_STEP_BYTES)):
            if index:  # the step before is in the log: wake its waiters, then yield
                self.cluster.replica_manager.wake(tp, True)
                await asyncio.sleep(0)
                if (
                    self.partitions.get(tp) is not partition
                    or partition.is_leader
                    or partition.leader_epoch != epoch
                    or partition.needs_truncation
                ):
                    return True
            if not apply_fetched_partition(partition, pd._replace(records=step), self._direct_io):
                return False
        return True


def batch_steps(records: memoryview, step_bytes: int) -> Iterator[memoryview]:
    """``records`` cut at batch boundaries into runs of whole batches of at most
    ``step_bytes`` each (a larger batch is a run of its own); a partial batch at the end,
    as answers may carry, stays with the last run. Concatenated, the runs are
    ``records``."""
    size = len(records)
    start = position = 0
    while position + LOG_OVERHEAD <= size:
        (length,) = _LENGTH.unpack_from(records, position + LENGTH_OFFSET)
        end = position + LOG_OVERHEAD + max(length, 0)
        if end > size:
            break  # a partial batch: it goes with the run before it
        if position > start and end - start > step_bytes:
            yield records[start:position]
            start = position
        position = end
    if start < size:
        yield records[start:]


def move_to_back(order: dict[K, V], served: Iterable[K]) -> None:
    """Move the ``served`` keys (those an answer carried records for, in its order) to the
    back of ``order``, the order the next Fetch lists its partitions in.

    The leader fills an answer partition by partition in the request's order, up to
    ``replica.fetch.response.max.bytes``; with a fixed order the partitions listed first
    could take every answer while they have a backlog and those after them wait. Kafka's
    fetch sessions move served partitions back for the same reason (KIP-227); this
    fetcher sends full fetches, so it keeps the order itself. Unknown keys are skipped."""
    for key in served:
        if key in order:
            order[key] = order.pop(key)


def apply_fetched_partition(
    partition: Partition, pd: FetchedPartition, direct_io: bool = False
) -> bool:
    """Apply one partition of the leader's answer to the follower: append its batches
    (the leader's offsets and epochs kept; ``direct_io``: whole blocks past the page
    cache) and take the leader's high watermark. False when the fetcher should back off
    (an error from the leader, or a failed append)."""
    if pd.error_code != ErrorCode.none:
        if pd.error_code == ErrorCode.offset_out_of_range:
            handle_out_of_range(partition, pd.high_watermark, pd.log_start_offset)
        return False
    try:
        if pd.records is not None and len(pd.records):
            partition.log.append_as_follower(pd.records, direct_io)
        partition.update_follower_high_watermark(pd.high_watermark)
    except KafkaStorageException as exc:  # its log dir failed (logged there), or had
        log.debug("follower append to %s failed: %s", partition.tp, exc)
        return False
    except Exception:
        log.exception("follower append to %s failed", partition.tp)
        return False
    return True


def handle_out_of_range(partition: Partition, leader_hw: int, leader_log_start: int) -> None:
    leo = partition.log.log_end_offset
    if leader_hw >= 0 and leo > leader_hw:
        partition.log.truncate_to(leader_hw)  # ahead of the leader: cut
    elif leader_log_start > leo:
        partition.log.truncate_fully_and_start_at(leader_log_start)
