"""``ReplicaManager``: the partitions this broker hosts, appends, fetches, and their purgatories."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from sluice.base import TopicPartition
from sluice.base.clock import SYSTEM_CLOCK, Clock
from sluice.log import (
    CorruptRecordException,
    FileSlice,
    KafkaStorageException,
    Log,
    LogDirFailureChannel,
    LogOffsetMetadata,
    OffsetOutOfRangeException,
)
from sluice.log.append import AppendOrigin
from sluice.log.checkpoint import OffsetCheckpointFile
from sluice.log.transaction_index import AbortedTxn
from sluice.protocol import ErrorCode
from sluice.protocol.errors import KafkaError
from sluice.purgatory import DelayedOperationPurgatory, PurgatoryFactory
from sluice.quota.replication_quota import ReplicationQuotaManager
from sluice.replication.delayed import (
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedProduce,
    ProducePartitionStatus,
)
from sluice.replication.metadata_cache import INTERNAL_TOPICS
from sluice.replication.partition import FetchIsolation, NotEnoughReplicasError, Partition

__all__ = [
    "HIGH_WATERMARK_CHECKPOINT",
    "FetchParams",
    "FetchPartitionData",
    "PartitionFetch",
    "ReplicaManager",
]

log = logging.getLogger(__name__)

HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
"""Each log directory's file of the high watermarks of the partitions in it."""

READ_ERROR_LOG_INTERVAL_MS = 60_000
"""A partition's read errors are logged at most once per this many milliseconds: a
consumer re-fetching a corrupt batch must not grow the log without bound."""


class ReadErrorLog:
    """Logs the errors of partition reads (a corrupt batch, a failed disk read) at most
    once per partition every ``interval_ms`` (of ``clock``'s monotonic time), saying how
    many were not logged since."""

    __slots__ = ("_clock", "_interval_ms", "_last")

    def __init__(self, clock: Clock, interval_ms: int = READ_ERROR_LOG_INTERVAL_MS) -> None:
        self._clock = clock
        self._interval_ms = interval_ms
        self._last: dict[TopicPartition, tuple[int, int]] = {}  # logged at, not logged

    def report(self, tp: TopicPartition, fetch_offset: int, error: Exception) -> bool:
        """Log ``error`` unless ``tp`` logged one within the interval; True if logged."""
        now = self._clock.hi_res_clock_ms()
        last = self._last.get(tp)
        if last is not None and now - last[0] < self._interval_ms:
            self._last[tp] = (last[0], last[1] + 1)
            return False
        skipped = f" ({last[1]} more since the last report)" if last and last[1] else ""
        log.error("reading %s at offset %d failed: %s%s", tp, fetch_offset, error, skipped)
        self._last[tp] = (now, 0)
        return True


@dataclasses.dataclass(frozen=True, slots=True)
class FetchParams:
    """The request-wide part of a fetch."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: FetchIsolation

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One partition of a fetch."""

    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1


@dataclasses.dataclass(slots=True)
class FetchPartitionData:
    """What a fetch returns for one partition."""

    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None
    error_message: str | None = None
    aborted_transactions: list[AbortedTxn] | None = None


class ReplicaManager:
    """Hosts the partitions of this broker and runs produce, fetch and DeleteRecords
    against them, parking requests that must wait in the purgatories."""

    def __init__(
        self,
        broker_id: int,
        make_purgatory: PurgatoryFactory,
        min_isr: Callable[[TopicPartition], int] = lambda tp: 1,
        clock: Clock = SYSTEM_CLOCK,
        log_dir_failure_channel: LogDirFailureChannel | None = None,
    ) -> None:
        """``clock``: wall time for when a follower last caught up (ISR expiration);
        ``log_dir_failure_channel``: where a failed high watermark checkpoint reports
        its log directory (the log manager's)."""
        self.broker_id = broker_id
        channel = log_dir_failure_channel
        self.failure_channel = channel if channel is not None else LogDirFailureChannel()
        self.clock = clock
        self._min_isr = min_isr
        self.partitions: dict[TopicPartition, Partition] = {}
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = make_purgatory(
            "Produce", 1000
        )
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = make_purgatory(
            "Fetch", 1000
        )
        self.delete_records_purgatory: DelayedOperationPurgatory[DelayedDeleteRecords] = (
            make_purgatory("DeleteRecords", 1)
        )
        # replication-offset-checkpoint in each log dir: the HWs of its partitions,
        # restored at startup; a dir leaves once it is offline.
        self.hw_checkpoints: dict[Path, OffsetCheckpointFile] = {}
        self._checkpointed_hws: dict[Path, dict[tuple[str, int], int]] = {}
        self._restored_hws: dict[tuple[str, int], int] = {}
        self._hw_write_lock = threading.Lock()
        # Cluster mode: called with (partition, replica_id) when a follower caught up,
        # and with a log dir and its partitions when the dir went offline.
        self.on_isr_expand: Callable[[Partition, int], None] | None = None
        self.on_log_dir_failure: Callable[[Path, list[TopicPartition]], None] | None = None
        # False once the broker stops serving: fetches are answered without waiting.
        self._fetches_wait = True
        self.read_errors = ReadErrorLog(clock)
        # Called with (topic, records, bytes) after each client append to a leader log
        # (Kafka's BrokerTopicStats messages and bytes in); None: not counted.
        self.on_client_append: Callable[[str, int, int], None] | None = None
        # Replication throttles (KIP-73; sluice.quota.replication_quota): what this
        # broker sends as leader to out-of-ISR followers, fetches as a follower, copies
        # between its log dirs. Unbounded until the broker configures them.
        self.leader_quota = ReplicationQuotaManager(clock, broker_id)
        self.follower_quota = ReplicationQuotaManager(clock, broker_id)
        self.alter_log_dirs_quota = ReplicationQuotaManager(clock, broker_id, lambda t: "*")
        # Record bytes sent to followers and appended from leaders (Kafka's
        # ReplicationBytesOutPerSec / ReplicationBytesInPerSec), as plain counts.
        self.replication_bytes_out = 0
        self.replication_bytes_in = 0

    # -- partitions ------------------------------------------------------------------
    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def add_partition(
        self, tp: TopicPartition, log: Log, replicas: list[int], leader_epoch: int = 0,
        topic_id: object = None,
    ) -> Partition:  # fmt: skip
        partition = Partition(
            tp, log, self.broker_id, replicas, leader_id=self.broker_id,
            leader_epoch=leader_epoch, min_isr=lambda: self._min_isr(tp), topic_id=topic_id,
        )  # fmt: skip
        saved = self._restored_hws.get((tp.topic, tp.partition))
        if saved is not None:
            partition.restore_high_watermark(saved)
        self.partitions[tp] = partition
        return partition

    def load_high_watermarks(self, log_dirs: Iterable[Path]) -> None:
        """Read each live log dir's replication-offset-checkpoint (before partitions are
        added); those dirs' files are the ones written from now on."""
        for log_dir in log_dirs:
            checkpoint = OffsetCheckpointFile(log_dir / HIGH_WATERMARK_CHECKPOINT)
            self.hw_checkpoints[log_dir] = checkpoint
            try:
                hws = checkpoint.read()
            except (OSError, ValueError) as exc:
                log.warning("ignoring an unreadable %s: %s", checkpoint.path, exc)
                hws = {}
            self._checkpointed_hws[log_dir] = hws
            self._restored_hws.update(hws)

    def checkpoint_high_watermarks(self) -> None:
        """Write every partition's HW now (at shutdown; the periodic write takes
        :meth:`high_watermarks_to_checkpoint` and writes them off the event loop)."""
        hws = self.high_watermarks_to_checkpoint()
        if hws is not None:
            self.write_high_watermarks(hws)

    def high_watermarks_to_checkpoint(self) -> dict[Path, dict[tuple[str, int], int]] | None:
        """The HWs of each live log dir's partitions, for the dirs where one moved since
        the last write, or None when none did (no fsync for nothing). Kafka's
        replica.high.watermark.checkpoint.interval.ms write takes them on the event loop
        and writes the files (an fsync each, 1-15 ms on a busy disk) on a worker thread
        with :meth:`write_high_watermarks`."""
        if not self.hw_checkpoints:
            return None
        by_dir: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.hw_checkpoints}
        for tp, p in self.partitions.items():
            hws = by_dir.get(p.log.dir.parent)
            if hws is not None and not p.log.is_offline:
                hws[(tp.topic, tp.partition)] = p.high_watermark
        changed = {d: hws for d, hws in by_dir.items() if hws != self._checkpointed_hws.get(d)}
        return changed or None

    def write_high_watermarks(self, hws: dict[Path, dict[tuple[str, int], int]]) -> None:
        """Write each dir's file; a write that fails takes its log dir offline (the
        failure channel logs it; the file keeps its previous contents)."""
        with self._hw_write_lock:  # the periodic write may still run when shutdown writes
            for log_dir, offsets in hws.items():
                checkpoint = self.hw_checkpoints.get(log_dir)
                if checkpoint is None:
                    continue  # offline meanwhile
                try:
                    checkpoint.write(offsets)
                except OSError as exc:
                    self.failure_channel.maybe_add_offline_log_dir(
                        log_dir, "writing the high watermark checkpoint", exc
                    )
                    continue
                self._checkpointed_hws[log_dir] = offsets

    # -- log dir failure ---------------------------------------------------------------
    def handle_log_dir_failure(self, log_dir: Path) -> list[TopicPartition]:
        """Kafka's ``ReplicaManager.handleLogDirFailure``, once the log manager took
        ``log_dir`` offline: its partitions answer KAFKA_STORAGE_ERROR from now on (their
        logs refuse every use), their waiting produces and fetches are answered now, the
        dir's high watermarks are no longer checkpointed, and ``on_log_dir_failure`` is
        told (in a cluster: the controller moves their leadership). Returns them."""
        with self._hw_write_lock:
            self.hw_checkpoints.pop(log_dir, None)
        offline = sorted(tp for tp, p in self.partitions.items() if p.log.dir.parent == log_dir)
        for tp in offline:
            self._wake(tp, True)
        if self.on_log_dir_failure is not None:
            self.on_log_dir_failure(log_dir, offline)
        return offline

    def remove_partition(self, tp: TopicPartition) -> Partition | None:
        partition = self.partitions.pop(tp, None)
        # Waiting requests on it are answered now rather than at their timeout.
        for purgatory in (self.fetch_purgatory, self.produce_purgatory):
            purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)
        return partition

    def _wake(self, tp: TopicPartition, hw_moved: bool) -> None:
        self.fetch_purgatory.check_and_complete(tp)
        if hw_moved:
            self.produce_purgatory.check_and_complete(tp)
            self.delete_records_purgatory.check_and_complete(tp)

    # -- produce ---------------------------------------------------------------------
    def append_records(
        self,
        timeout_ms: int,
        required_acks: int,
        entries: dict[TopicPartition, bytes],
        callback: Callable[[dict[TopicPartition, ProducePartitionStatus]], None],
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> None:
        """Append to the leader logs; answer now, or after the HW catches up for acks=all.
        Transaction markers come with origin COORDINATOR."""
        statuses: dict[TopicPartition, ProducePartitionStatus] = {}
        for tp, records in entries.items():
            statuses[tp] = self._append_one(tp, records, required_acks, origin)
        if required_acks == -1:
            needs_wait = any(s.error == ErrorCode.none for s in statuses.values())
        else:  # acks=1 answers once the flushes the appends made due are done
            # (acks=0 does not wait)
            needs_wait = required_acks == 1 and any(
                s.error == ErrorCode.none and s.flush_pending for s in statuses.values()
            )
        if not needs_wait:
            callback(statuses)
            return
        op = DelayedProduce(timeout_ms, statuses, self, callback, required_acks)
        # One try, then watched: only this thread appends, moves HWs and wakes the
        # produce purgatory (the flush thread's news comes through the loop), so
        # nothing can complete it between the try and the watch.
        if not op.safe_try_complete():
            self.produce_purgatory.watch(op, list(statuses))

    def flushed(self, log: Log) -> None:
        """A group flush of ``log`` ended (sluice.log.group_flush): answer the produces
        that waited for it."""
        self.produce_purgatory.check_and_complete(TopicPartition(log.topic, log.partition))

    def _append_one(
        self, tp: TopicPartition, records: bytes, required_acks: int, origin: AppendOrigin
    ) -> ProducePartitionStatus:
        partition = self.partitions.get(tp)
        if partition is None:
            return ProducePartitionStatus(-1, -1, error=ErrorCode.unknown_topic_or_partition)
        if not partition.is_leader:
            return ProducePartitionStatus(-1, -1, error=ErrorCode.not_leader_or_follower)
        try:
            info = partition.append_records_to_leader(records, required_acks, origin)
        except NotEnoughReplicasError as exc:
            return ProducePartitionStatus(-1, -1, error=exc.code, error_message=str(exc))
        except KafkaError as exc:  # the log's and the record format's errors
            log.debug("append to %s rejected: %s", tp, exc)
            return ProducePartitionStatus(-1, -1, error=exc.code, error_message=str(exc))
        counted = self.on_client_append
        if counted is not None and origin is AppendOrigin.CLIENT:
            counted(tp.topic, info.record_count, info.valid_bytes)
        hw_moved = partition.maybe_increment_high_watermark()
        self._wake(tp, hw_moved)
        required = info.last_offset + 1
        log_ = partition.log
        return ProducePartitionStatus(
            required_offset=required,
            base_offset=info.first_offset,
            log_append_time=info.log_append_time,
            log_start_offset=info.log_start_offset,
            flush_pending=log_.flush_group is not None
            and log_.recovery_point < required <= log_.flush_wanted,
        )

    # -- fetch -----------------------------------------------------------------------
    def read_from_local_log(
        self, params: FetchParams, fetches: Iterable[PartitionFetch]
    ) -> list[tuple[PartitionFetch, FetchPartitionData]]:
        """Read each partition once; the first non-empty partition may exceed its limit.
        For a follower, a replica the leader throttle holds back gets no records, and
        what is sent for throttled replicas is recorded against that throttle."""
        out = []
        remaining = params.max_bytes
        min_one = True
        throttling = params.is_from_follower and self.leader_quota.is_bounded
        quota = self.leader_quota if throttling else None
        sent = 0
        for fetch in fetches:
            limit = min(fetch.max_bytes, remaining)
            if quota is not None and self._out_of_sync_throttled(fetch.tp, params.replica_id):
                if quota.is_quota_exceeded():  # Kafka's shouldLeaderThrottle
                    out.append((fetch, self._throttled(fetch.tp)))
                    continue
                limit = min(limit, quota.window_bytes)
            data = self._read_one(params, fetch, limit, min_one)
            size = data.records.size if data.records is not None else 0
            if size:
                sent += size
                min_one = False
                remaining = max(0, remaining - size)
                if quota is not None and quota.is_throttled(fetch.tp):
                    quota.record(size)
            out.append((fetch, data))
        if params.is_from_follower:
            self.replication_bytes_out += sent
        return out

    def should_leader_throttle(self, tp: TopicPartition, replica_id: int) -> bool:
        """Kafka's shouldLeaderThrottle: ``replica_id`` is out of ``tp``'s ISR, ``tp`` is
        throttled here as leader and the leader throttle's rate is over its bound."""
        return self._out_of_sync_throttled(tp, replica_id) and self.leader_quota.is_quota_exceeded()

    def _out_of_sync_throttled(self, tp: TopicPartition, replica_id: int) -> bool:
        """``tp`` is led here and throttled as leader, and ``replica_id`` is out of its ISR."""
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader or replica_id in partition.isr:
            return False
        return self.leader_quota.is_throttled(tp)

    def _throttled(self, tp: TopicPartition) -> FetchPartitionData:
        """A held-back replica's answer: its offsets, no records (as Kafka's empty set)."""
        partition = self.partitions[tp]
        return FetchPartitionData(
            ErrorCode.none,
            high_watermark=partition.high_watermark,
            last_stable_offset=partition.last_stable_offset,
            log_start_offset=partition.log.log_start_offset,
        )

    def _read_one(
        self, params: FetchParams, fetch: PartitionFetch, max_bytes: int, min_one: bool
    ) -> FetchPartitionData:
        partition = self.partitions.get(fetch.tp)
        if partition is None:
            return FetchPartitionData(ErrorCode.unknown_topic_or_partition)
        if not partition.is_leader:
            return FetchPartitionData(ErrorCode.not_leader_or_follower)
        epoch = fetch.current_leader_epoch
        if epoch >= 0 and epoch != partition.leader_epoch:
            code = (
                ErrorCode.fenced_leader_epoch
                if epoch < partition.leader_epoch
                else ErrorCode.unknown_leader_epoch
            )
            return FetchPartitionData(code)
        if max_bytes < 0:  # a negative max_bytes or partition_max_bytes in the request
            return FetchPartitionData(ErrorCode.invalid_request)
        try:
            info = partition.read_records(fetch.fetch_offset, max_bytes, params.isolation, min_one)
        except OffsetOutOfRangeException as exc:
            return FetchPartitionData(
                ErrorCode.offset_out_of_range,
                high_watermark=partition.high_watermark,
                last_stable_offset=partition.last_stable_offset,
                log_start_offset=partition.log.log_start_offset,
                error_message=str(exc),
            )
        except (CorruptRecordException, KafkaStorageException, OSError) as exc:
            # As Kafka's readFromLocalLog: a bad batch head on the way to the fetch offset
            # is CORRUPT_MESSAGE, an offline log or a failed disk read KAFKA_STORAGE_ERROR
            # (an offline log said so when it went offline).
            if isinstance(exc, KafkaStorageException):
                code = ErrorCode.kafka_storage_error
            else:
                self.read_errors.report(fetch.tp, fetch.fetch_offset, exc)
                code = (
                    ErrorCode.corrupt_message
                    if isinstance(exc, CorruptRecordException)
                    else ErrorCode.kafka_storage_error
                )
            return FetchPartitionData(
                code,
                high_watermark=partition.high_watermark,
                last_stable_offset=partition.last_stable_offset,
                log_start_offset=partition.log.log_start_offset,
                error_message=str(exc),
            )
        return FetchPartitionData(
            ErrorCode.none,
            high_watermark=info.high_watermark,
            last_stable_offset=info.last_stable_offset,
            log_start_offset=info.log_start_offset,
            records=info.data.records,
            aborted_transactions=info.aborted_transactions,
        )

    def fetch_messages(
        self,
        params: FetchParams,
        fetches: list[PartitionFetch],
        callback: Callable[[list[tuple[PartitionFetch, FetchPartitionData]]], None],
    ) -> None:
        """Answer at once when there is enough data (or an error, or no wait); else park a
        DelayedFetch woken by HW growth (LEO growth for followers)."""
        wait = self._fetches_wait
        if params.is_from_follower:
            self._record_follower_fetches(params.replica_id, fetches)
            if wait and self._park_caught_up_follower(params, fetches, callback):
                return
        results = self.read_from_local_log(params, fetches)
        total = sum(d.records.size for _, d in results if d.records is not None)
        has_error = any(d.error != ErrorCode.none for _, d in results)
        if (
            not wait or params.max_wait_ms <= 0 or not fetches or total >= params.min_bytes
            or has_error
        ):  # fmt: skip
            callback(results)
            return
        starts = []
        for fetch, _ in results:
            partition = self.partitions[fetch.tp]
            starts.append((fetch, self._offset_metadata(partition, fetch.fetch_offset)))
        self._park(params, fetches, starts, callback)

    def stop_fetch_waits(self) -> int:
        """Answer every waiting Fetch now, with what its partitions hold, and from now on
        answer fetches without waiting: a stopping broker drains its requests in flight
        without holding long polls to their max wait (a consumer's may be many
        seconds). Followers' fetch offsets still count, so acks=all produces waiting on
        them still complete. Returns how many waiting fetches were answered."""
        self._fetches_wait = False
        return self.fetch_purgatory.complete_all()

    def _park_caught_up_follower(
        self,
        params: FetchParams,
        fetches: list[PartitionFetch],
        callback: Callable[[list[tuple[PartitionFetch, FetchPartitionData]]], None],
    ) -> bool:
        """A follower fetching from the log end of every partition it asks for (the
        acks=all steady state) waits in the purgatory without reading the log first:
        that read could only come back empty. False (nothing done) otherwise."""
        if params.max_wait_ms <= 0 or params.min_bytes <= 0 or not fetches:
            return False
        starts = []
        for fetch in fetches:
            partition = self.partitions.get(fetch.tp)
            if partition is None or not partition.is_leader or partition.log.is_offline:
                return False
            epoch = fetch.current_leader_epoch
            if epoch >= 0 and epoch != partition.leader_epoch:
                return False
            leo = partition.log.log_end_offset_metadata
            if fetch.fetch_offset != leo.message_offset:
                return False
            starts.append((fetch, leo))
        # Watched without a first try: at the log end of every partition (and
        # min_bytes > 0) DelayedFetch.try_complete can only say no, and only this
        # thread appends and wakes the fetch purgatory.
        self._park(params, fetches, starts, callback, tried=True)
        return True

    def _park(
        self,
        params: FetchParams,
        fetches: list[PartitionFetch],
        starts: list[tuple[PartitionFetch, LogOffsetMetadata]],
        callback: Callable[[list[tuple[PartitionFetch, FetchPartitionData]]], None],
        tried: bool = False,
    ) -> None:
        """A DelayedFetch from ``starts``; on completion the log is read again. ``tried``:
        the caller has seen that it cannot complete yet, so it is only watched."""

        def complete() -> None:
            callback(self.read_from_local_log(params, fetches))

        op = DelayedFetch(params.max_wait_ms, params, starts, self, complete)
        keys = [f.tp for f in fetches]
        if tried:
            self.fetch_purgatory.watch(op, keys)
        else:
            self.fetch_purgatory.try_complete_else_watch(op, keys)

    def _record_follower_fetches(self, replica_id: int, fetches: list[PartitionFetch]) -> None:
        """A follower's fetch offset is its LEO: move the HW, maybe expand the ISR."""
        now = self.clock.milliseconds()
        for fetch in fetches:
            partition = self.partitions.get(fetch.tp)
            if partition is None or not partition.is_leader:
                continue
            hw_moved = partition.update_follower_fetch(replica_id, fetch.fetch_offset, now)
            if self.on_isr_expand is not None and partition.should_expand_isr(replica_id):
                self.on_isr_expand(partition, replica_id)
                hw_moved = partition.maybe_increment_high_watermark() or hw_moved
            if hw_moved:
                self._wake(fetch.tp, True)

    def wake(self, tp: TopicPartition, hw_moved: bool = True) -> None:
        self._wake(tp, hw_moved)

    @staticmethod
    def _offset_metadata(partition: Partition, offset: int) -> LogOffsetMetadata:
        leo = partition.log.log_end_offset_metadata
        return leo if offset == leo.message_offset else LogOffsetMetadata(offset)

    # -- DeleteRecords ---------------------------------------------------------------
    def delete_records(
        self,
        timeout_ms: int,
        offsets: dict[TopicPartition, int],
        callback: Callable[[dict[TopicPartition, tuple[int, ErrorCode]]], None],
    ) -> None:
        """Raise the leaders' log start offsets (-1: to the high watermark) and call back
        once every replica has, or at the timeout. An internal topic's partitions are
        refused (INVALID_TOPIC_EXCEPTION), as in Kafka: its coordinator's records stay."""
        results: dict[TopicPartition, tuple[int, ErrorCode]] = {}
        for tp, offset in offsets.items():
            if tp.topic in INTERNAL_TOPICS:
                results[tp] = (-1, ErrorCode.invalid_topic_exception)
                continue
            partition = self.partitions.get(tp)
            if partition is None:
                results[tp] = (-1, ErrorCode.unknown_topic_or_partition)
                continue
            if not partition.is_leader:
                results[tp] = (-1, ErrorCode.not_leader_or_follower)
                continue
            target = partition.high_watermark if offset == -1 else offset
            if target < 0 or target > partition.high_watermark:
                results[tp] = (-1, ErrorCode.offset_out_of_range)
                continue
            try:
                partition.log.delete_records_before(target, partition.high_watermark)
            except KafkaError as exc:
                results[tp] = (-1, exc.code)
                continue
            results[tp] = (partition.low_watermark(), ErrorCode.none)
        op = DelayedDeleteRecords(timeout_ms, results, self, callback)
        self.delete_records_purgatory.try_complete_else_watch(op, list(results) or [None])

    def shutdown(self) -> None:
        for purgatory in (
            self.produce_purgatory, self.fetch_purgatory, self.delete_records_purgatory
        ):  # fmt: skip
            purgatory.shutdown()
