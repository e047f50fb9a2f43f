"""``Log``: one partition's segmented log directory (the local part of Kafka's UnifiedLog)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from sluice.base.clock import SYSTEM_CLOCK, Clock
from sluice.log.append import (
    AppendOrigin,
    LogAppendInfo,
    prepare_follower_append,
    prepare_leader_append,
)
from sluice.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from sluice.log.cleaner.files import truncate_cleaner_checkpoint
from sluice.log.cleaner.records import check_keys_present
from sluice.log.config import LogConfig
from sluice.log.errors import KafkaStorageException, OffsetOutOfRangeException
from sluice.log.file_cache import UNBOUNDED, FileCache
from sluice.log.file_records import FetchDataInfo, LogOffsetMetadata, TimestampAndOffset
from sluice.log.file_work import FileWork, InlineFileWork
from sluice.log.loader import load_log
from sluice.log.local_log import FlushWork, LocalLog
from sluice.log.log_dir_failure_channel import LogDirFailureChannel
from sluice.log.patched_records import PatchedRecords
from sluice.log.producer_state import read_end_txn_marker
from sluice.log.producer_state_manager import (
    ProducerStateAnalysis,
    ProducerStateManager,
    rebuild_producer_state,
)
from sluice.log.segment import LogSegment
from sluice.log.transaction_index import AbortedTxn
from sluice.protocol.records.batch import NO_TIMESTAMP, BatchHeader

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "Log",
    "parse_topic_partition",
]

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4

P = ParamSpec("P")
R = TypeVar("R")


def _storage(
    what: str,
) -> Callable[[Callable[Concatenate[Log, P], R]], Callable[Concatenate[Log, P], R]]:
    """Kafka's ``maybeHandleIOException``: an ``OSError`` in the method takes the log
    offline (LocalLog.io_failed, which reports its directory) and is raised as
    ``KafkaStorageException``."""

    def decorate(method: Callable[Concatenate[Log, P], R]) -> Callable[Concatenate[Log, P], R]:
        @functools.wraps(method)
        def run(self: Log, /, *args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return method(self, *args, **kwargs)
            except OSError as exc:
                raise self._local.io_failed(exc, what) from exc

        return run

    return decorate


def parse_topic_partition(name: str) -> tuple[str, int]:
    """``"orders-3"`` -> ``("orders", 3)``, as is the future log of a move between log
    dirs, ``"orders-3.<32 hex digits>-future"``; names without a partition suffix give -1."""
    if name.endswith("-future") and len(name) > 40 and name[-40] == ".":
        name = name[:-40]
    topic, _, partition = name.rpartition("-")
    if topic and partition.isdigit():
        return topic, int(partition)
    return name, -1


class Log:
    """The append-only log of one topic partition, stored as segments in ``<topic>-<partition>/``:
    validates and assigns offsets, serves reads as zero-copy file slices, rolls segments,
    enforces retention and DeleteRecords, answers ListOffsets, and recovers after a crash.

    An I/O error (``OSError``) in any of this takes the log offline: it raises
    ``KafkaStorageException`` (``KAFKA_STORAGE_ERROR``) from then on, and its log
    directory is reported to the :class:`LogDirFailureChannel` (log_dir_failure_channel.py)."""

    __slots__ = (
        "_clock",
        "_local",
        "_log_start_offset",
        "_lso_checkpoint",
        "_producer_state",
        "dir",
        "flush_group",
        "partition",
        "topic",
    )

    def __init__(
        self,
        directory: Path | str,
        config: LogConfig | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        had_clean_shutdown: bool = False,
        file_work: FileWork | None = None,
        log_dir_failure_channel: LogDirFailureChannel | None = None,
        file_cache: FileCache = UNBOUNDED,
    ) -> None:
        """Open (creating if needed) the log in ``directory``; without ``had_clean_shutdown``
        every segment at or after the recovery point is validated and torn tails are cut.
        ``file_work``: where its background file work runs (sluice.log.file_work; inline
        by default); ``log_dir_failure_channel``: where its I/O errors report the log
        directory (one of its own by default); ``file_cache``: what holds its segments'
        descriptors, opened when first used (sluice.log.file_cache; by default nothing is
        closed while in use). An I/O error while opening is raised as the ``OSError`` it
        is."""
        self.dir = Path(directory)
        try:
            names = os.listdir(self.dir)  # read once, for the loader and the snapshots
        except FileNotFoundError:
            self.dir.mkdir(parents=True, exist_ok=True)
            names = []
        self.topic, self.partition = parse_topic_partition(self.dir.name)
        config = config if config is not None else LogConfig()
        self._clock = clock
        self._lso_checkpoint = OffsetCheckpointFile(self.dir / LOG_START_OFFSET_CHECKPOINT)
        rp_checkpoint = OffsetCheckpointFile(self.dir / RECOVERY_POINT_CHECKPOINT)
        # 0 when absent, as a new log's are
        recovery_point = _read_single(rp_checkpoint, names)
        loaded = load_log(
            self.dir,
            config,
            clock,
            had_clean_shutdown=had_clean_shutdown,
            recovery_point=recovery_point,
            log_start_offset=_read_single(self._lso_checkpoint, names),
            cache=file_cache,
            names=names,
        )
        self._log_start_offset = loaded.log_start_offset
        self._local = LocalLog(
            self.dir,
            self.topic,
            self.partition,
            config,
            clock,
            loaded.segments,
            loaded.log_end_offset,
            loaded.recovery_point,
            file_work if file_work is not None else InlineFileWork(),
            log_dir_failure_channel
            if log_dir_failure_channel is not None
            else LogDirFailureChannel(),
            file_cache,
            checkpointed=recovery_point,
        )
        self._producer_state = ProducerStateManager(self.dir, names=names)
        self._load_producer_state(had_clean_shutdown)
        # Set by a broker that batches flushes (sluice.log.group_flush): called with this
        # log when a leader's append made a flush.messages flush due, which it then does.
        self.flush_group: Callable[[Log], None] | None = None

    # -- state ---------------------------------------------------------------------------
    @property
    def config(self) -> LogConfig:
        return self._local.config

    def update_config(self, config: LogConfig) -> None:
        """Apply a topic config change; it takes effect on the next append/roll/retention."""
        self._local.config = config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._local.log_end_offset_metadata

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self._local.log_end_offset - self._local.recovery_point

    @property
    def last_flush_time(self) -> int:
        return self._local.last_flush_time

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._local.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active_segment

    @property
    def number_of_segments(self) -> int:
        return len(self._local.segments)

    @property
    def size(self) -> int:
        """Total bytes of all segment data files."""
        return self._local.size

    @property
    def is_closed(self) -> bool:
        return self._local.is_closed

    @property
    def write_error(self) -> OSError | None:
        """The I/O error that took this log offline (None while it is online)."""
        return self._local.write_error

    @property
    def is_offline(self) -> bool:
        """Whether an I/O error (here or elsewhere in its log directory) took the log
        offline: every use raises ``KafkaStorageException``."""
        return self._local.write_error is not None

    def take_offline(self, error: OSError) -> None:
        """Its log directory went offline: refuse every use from now on."""
        self._local.take_offline(error)

    def io_failed(self, error: OSError, what: str) -> KafkaStorageException:
        """``what``, work on this log's files done elsewhere (the log cleaner's), failed
        with ``error``: the log goes offline and its directory is reported, as for the
        log's own operations; returns the exception to raise."""
        return self._local.io_failed(error, what)

    @property
    def producer_state_manager(self) -> ProducerStateManager:
        return self._producer_state

    # -- append --------------------------------------------------------------------------
    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Validate the v2 batches, give them consecutive offsets from the log end offset and
        the leader epoch (and the append time for LogAppendTime topics), and append them.

        A writable buffer (bytearray, writable memoryview) is rewritten in place; of a
        read-only one only the batch heads are copied (:class:`PatchedRecords`), except for
        LogAppendTime topics, whose batches are copied whole to rewrite their CRC.
        Raises CorruptRecordException, RecordTooLargeException,
        RecordBatchTooLargeException, InvalidRecordException, ...
        """
        local = self._local
        local.check_open()
        config = local.config
        append_time = self._clock.milliseconds() if config.log_append_time else NO_TIMESTAMP
        now = self._clock.milliseconds() if config.timestamp_bounds is not None else NO_TIMESTAMP
        buf, headers, info = prepare_leader_append(
            records, config, local.log_end_offset, leader_epoch, origin, append_time,
            self._log_start_offset, self.dir.name, now,
        )  # fmt: skip
        # Keys and markers are read from the records as received (only offsets changed).
        if headers and config.compact_enabled:  # Kafka: keyless records are INVALID_RECORD
            check_keys_present(records, headers, self.dir.name)
        if headers:
            analysis = self._producer_state.analyze_and_validate(
                headers, origin, lambda header: read_end_txn_marker(records, header)
            )
            duplicate = analysis.duplicate
            if duplicate is not None:  # answered with the original offsets, not appended
                return LogAppendInfo(
                    duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                    duplicate.last_offset, duplicate.timestamp if config.log_append_time
                    else NO_TIMESTAMP, self._log_start_offset, 0, 0, 0, leader_epoch,
                )  # fmt: skip
            try:  # validation reads no file: only the append meets the disk
                self._append(buf, headers, info, analysis, flush_group=self.flush_group)
            except OSError as exc:
                raise local.io_failed(exc, "append") from exc
        return info

    @_storage("append")
    def append_as_follower(
        self, records: bytes | bytearray | memoryview, direct: bool = False
    ) -> LogAppendInfo:
        """Append batches replicated from the leader, keeping their offsets and epochs.

        The first batch must start at or after the log end offset and offsets must strictly
        increase (gaps left by compaction are allowed); a partial trailing batch, as fetch
        responses may carry, is dropped. ``direct``: whole blocks are written past the
        page cache (sluice.log.direct; the broker's ``replica.direct.io``).
        """
        local = self._local
        local.check_open()
        buf, headers, info = prepare_follower_append(
            records, local.config, local.log_end_offset, self._log_start_offset, self.dir.name
        )
        if headers:
            analysis = self._producer_state.analyze_and_validate(
                headers, AppendOrigin.REPLICATION, lambda header: read_end_txn_marker(buf, header)
            )
            self._append(buf, headers, info, analysis, direct)
        return info

    def _append(
        self,
        buf: bytes | bytearray | memoryview | PatchedRecords,
        headers: list[BatchHeader],
        info: LogAppendInfo,
        analysis: ProducerStateAnalysis,
        direct: bool = False,
        flush_group: Callable[[Log], None] | None = None,
    ) -> None:
        """Append to the segments, then record the producer state: a roll in between
        snapshots the state as of the new segment's base offset. A flush.messages flush
        this append makes due is done here, or asked of ``flush_group``."""
        local = self._local
        active = local.active_segment
        flush_due = local.append(
            buf, headers, info.first_offset, info.last_offset, info.max_timestamp, direct,
            defer_flush=flush_group is not None,
        )  # fmt: skip
        state = self._producer_state
        if local.active_segment is not active:
            state.snapshot_at_roll(local.active_segment.base_offset)
        state.apply(analysis)
        state.update_map_end_offset(info.last_offset + 1)
        for txn in analysis.completed:
            if txn.is_aborted:
                self._local.active_segment.txn_index.append(
                    AbortedTxn(
                        txn.producer_id, txn.first_offset, txn.last_offset,
                        state.last_stable_offset_after(txn),
                    )
                )  # fmt: skip
        if flush_due and flush_group is not None:
            flush_group(self)

    @_storage("roll")
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or ``expected_next_offset``)."""
        segment = self._local.roll(expected_next_offset)
        self._producer_state.snapshot_at_roll(segment.base_offset)
        return segment

    # -- read ----------------------------------------------------------------------------
    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset_exclusive: int | None = None,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``fetch_offset``, from a single segment.

        Only batches entirely below ``max_offset_exclusive`` (the high watermark for
        consumers) are returned. Raises OffsetOutOfRangeException outside
        ``[log_start_offset, log_end_offset]``.
        """
        local = self._local
        local.check_open()
        leo = local.log_end_offset
        if fetch_offset > leo or fetch_offset < self._log_start_offset:
            raise OffsetOutOfRangeException(
                f"Received request for offset {fetch_offset} for partition {self.dir.name}, "
                f"but we only have log segments in the range {self._log_start_offset} to {leo}."
            )
        limit = leo if max_offset_exclusive is None else max_offset_exclusive
        try:
            return local.read(fetch_offset, max_bytes, limit, min_one_message)
        except OSError as exc:
            raise local.io_failed(exc, "read") from exc

    # -- transactions ----------------------------------------------------------------------
    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction (None: none is open); the
        partition's last stable offset is the smaller of this and the high watermark."""
        return self._producer_state.first_unstable_offset()

    @_storage("reading aborted transactions")
    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)``, for a
        read_committed fetch (their markers are at or after ``fetch_offset``, so only the
        transaction indexes of the segment holding it and later ones are searched)."""
        local = self._local
        segments = local.segments
        found: list[AbortedTxn] = []
        for i in range(local.segment_index_for(fetch_offset), len(segments)):
            found.extend(segments[i].txn_index.collect(fetch_offset, upper_bound))
        return found

    # -- retention and DeleteRecords -----------------------------------------------------
    @_storage("retention")
    def delete_old_segments(self, high_watermark: int | None = None) -> int:
        """Delete segments below the log start offset and, if ``cleanup.policy`` has
        ``delete``, those past ``retention.ms`` (by their largest timestamp) or beyond
        ``retention.bytes``, oldest first. The active segment is never deleted, nor any
        segment holding offsets at or above ``high_watermark``. Returns the count deleted."""
        local = self._local
        local.check_open()
        local.delete_pending_files()
        deleted = self._delete_log_start_offset_breached(high_watermark)
        config = local.config
        if config.delete_enabled and config.retention_ms >= 0:
            now = self._clock.milliseconds()
            retention_ms = config.retention_ms
            deleted += self._delete_segments(
                lambda segment, _: now - segment.largest_timestamp > retention_ms, high_watermark
            )
        if config.delete_enabled and config.retention_bytes >= 0:
            excess = local.size - config.retention_bytes

            def beyond_retention_size(segment: LogSegment, _: int) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_segments(beyond_retention_size, high_watermark)
        return deleted

    def _delete_log_start_offset_breached(self, high_watermark: int | None = None) -> int:
        start = self._log_start_offset
        return self._delete_segments(lambda _, upper: upper <= start, high_watermark)

    def _delete_segments(
        self, predicate: Callable[[LogSegment, int], bool], high_watermark: int | None
    ) -> int:
        local = self._local
        deleted = local.delete_segments_while(predicate, high_watermark)
        if deleted:
            self._log_start_offset = max(self._log_start_offset, local.segments[0].base_offset)
            self._producer_state.delete_snapshots_before(local.segments[0].base_offset)
        return deleted

    @_storage("raising the log start offset")
    def maybe_increment_log_start_offset(
        self, new_log_start_offset: int, high_watermark: int | None = None
    ) -> bool:
        """Raise the log start offset (DeleteRecords), persist it, and delete the segments
        wholly below it. Raises OffsetOutOfRangeException beyond the high watermark (or the
        log end offset). Returns whether it moved."""
        local = self._local
        local.check_open()
        limit = local.log_end_offset
        if high_watermark is not None:
            limit = min(limit, high_watermark)
        if new_log_start_offset > limit:
            raise OffsetOutOfRangeException(
                f"Cannot increment the log start offset to {new_log_start_offset} of partition "
                f"{self.dir.name} since it is larger than the high watermark {limit}"
            )
        if new_log_start_offset <= self._log_start_offset:
            return False
        self._log_start_offset = new_log_start_offset
        self._write_log_start_offset_checkpoint()
        self._delete_log_start_offset_breached()
        return True

    def delete_records_before(self, offset: int, high_watermark: int | None = None) -> int:
        """DeleteRecords: make ``offset`` the log start offset; returns the new log start
        offset (the response's low watermark)."""
        self.maybe_increment_log_start_offset(offset, high_watermark)
        return self._log_start_offset

    @_storage("deleting removed segments")
    def delete_pending_files(self, force: bool = False) -> int:
        """Remove ``*.deleted`` segment files whose ``file.delete.delay.ms`` has passed."""
        return self._local.delete_pending_files(force)

    def _write_log_start_offset_checkpoint(self) -> None:
        self._lso_checkpoint.write({(self.topic, self.partition): self._log_start_offset})

    # -- ListOffsets ---------------------------------------------------------------------
    @_storage("an offset lookup")
    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the earliest offset whose record timestamp >= ``timestamp``, or for
        -1 (latest) the log end offset, -2 (earliest) / -4 (earliest local) the log start
        offset, -3 the earliest record with the largest timestamp. None means not found
        (answer timestamp -1, offset -1)."""
        local = self._local
        local.check_open()
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            start = self._log_start_offset
            return TimestampAndOffset(NO_TIMESTAMP, start, self._epoch_of(start))
        if timestamp == LATEST_TIMESTAMP:
            leo = local.log_end_offset
            return TimestampAndOffset(NO_TIMESTAMP, leo, self._epoch_of(leo - 1))
        if timestamp == MAX_TIMESTAMP:
            segments = local.segments
            best = max(segments, key=lambda segment: segment.max_timestamp_so_far)
            return best.find_max_timestamp()
        if timestamp < 0:
            raise ValueError(f"Unsupported ListOffsets timestamp {timestamp}")
        return local.find_offset_by_timestamp(timestamp, self._log_start_offset)

    def leader_epoch_of(self, offset: int) -> int | None:
        """The leader epoch of the batch holding ``offset`` (None outside the log)."""
        return self._epoch_of(offset)

    def _epoch_of(self, offset: int) -> int | None:
        if not self._log_start_offset <= offset < self._local.log_end_offset:
            return None
        return self._local.leader_epoch_of(offset)

    # -- truncation (replication) --------------------------------------------------------
    @_storage("truncation")
    def truncate_to(self, target_offset: int) -> bool:
        """Remove every offset >= ``target_offset`` (whole batches); returns False when the
        log already ends at or before it."""
        local = self._local
        local.check_open()
        if target_offset < 0:
            raise ValueError(f"Cannot truncate to a negative offset ({target_offset})")
        if target_offset >= local.log_end_offset:
            return False
        if target_offset <= local.segments[0].base_offset:
            self.truncate_fully_and_start_at(target_offset)
            return True
        new_end = local.truncate_to(target_offset)
        if self._log_start_offset > new_end:
            self._log_start_offset = new_end
            self._write_log_start_offset_checkpoint()
        rebuild_producer_state(self._producer_state, local.segments, new_end)
        self._truncate_cleaner_checkpoint(new_end)
        return True

    @_storage("truncation")
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete all data and restart the log empty at ``new_offset`` (its new start)."""
        self._local.check_open()
        self._local.truncate_fully_and_start_at(new_offset)
        self._producer_state.truncate_fully_and_start_at(new_offset)
        self._truncate_cleaner_checkpoint(new_offset)
        self._log_start_offset = new_offset
        self._write_log_start_offset_checkpoint()

    # -- flush and lifecycle -------------------------------------------------------------
    @_storage("flush")
    def flush(self, offset: int | None = None) -> None:
        """fsync data up to ``offset`` (default everything) and advance the recovery point."""
        self._local.flush(offset)

    @_storage("flush")
    def flush_work(self) -> FlushWork | None:
        """The fsyncs of a flush up to the log end offset, to run on another thread; then
        :meth:`flushed` (see LocalLog.flush_work)."""
        return self._local.flush_work(detached=True)

    def flushed(self, work: FlushWork) -> None:
        self._local.flushed(work)

    @property
    def flush_wanted(self) -> int:
        """The end of the latest flush asked of ``flush_group`` (0 if none)."""
        return self._local.flush_wanted

    def apply_finished_flushes(self) -> None:
        """Move the recovery point past the rolled segments whose background flush is
        done (LocalLog.flush_in_background)."""
        self._local.apply_finished_flushes()

    @property
    def recovery_point_checkpointed(self) -> bool:
        """Whether recovery-point-offset-checkpoint holds the recovery point."""
        return self._local.recovery_point_checkpointed

    def write_recovery_point_checkpoint(self) -> None:
        """Write the recovery point to recovery-point-offset-checkpoint (an fsync; on any
        thread, nothing once closed)."""
        self._local.write_recovery_point_checkpoint()

    @_storage("flush")
    def flush_if_due(self) -> bool:
        """Flush if ``flush.ms`` has passed since the last flush with data unflushed."""
        local = self._local
        if local.is_closed or local.write_error is not None:
            return False
        local.apply_finished_flushes()
        if self.unflushed_messages == 0:
            return False
        if self._clock.milliseconds() - local.last_flush_time < local.config.flush_ms:
            return False
        local.flush()
        return True

    def close(self) -> None:
        """Snapshot the producer state and close every file; the log object is unusable
        afterwards. An offline log writes nothing (LocalLog.close); a write failing
        here takes the log offline instead of raising."""
        local = self._local
        if not local.is_closed and local.write_error is None:
            try:
                self._producer_state.update_map_end_offset(local.log_end_offset)
                self._producer_state.take_snapshot()
            except OSError as exc:
                local.io_failed(exc, "writing the producer state snapshot")
        local.close()

    def delete(self) -> None:
        """Close the log and remove its directory."""
        self._local.delete()

    # -- log cleaner (compaction) ----------------------------------------------------------
    @_storage("replacing cleaned segments")
    def replace_segments(self, new_segment: LogSegment, old_segments: Sequence[LogSegment]) -> None:
        """Swap a cleaned segment (open on its ``.swap`` files) in for the contiguous
        ``old_segments`` it was written from; offsets, log start and log end are unchanged."""
        self._local.check_open()
        # The cleaner copies transactional and control batches unchanged, so the aborted
        # transactions of the old segments still describe the new one.
        for old in old_segments:
            for txn in old.txn_index.entries:
                if txn.last_offset > new_segment.txn_index.last_offset:
                    new_segment.txn_index.append(txn)
        self._local.replace_segments(new_segment, old_segments)

    def _truncate_cleaner_checkpoint(self, offset: int) -> None:
        truncate_cleaner_checkpoint(self.dir, self.topic, self.partition, offset)

    # -- producer state ------------------------------------------------------------------
    def _load_producer_state(self, had_clean_shutdown: bool) -> None:
        state = self._producer_state
        segments = self._local.segments
        state.remove_stray_snapshots(segment.base_offset for segment in segments)
        rebuild_producer_state(
            state, segments, self._local.log_end_offset,
            reload_from_clean_shutdown=had_clean_shutdown,
        )  # fmt: skip

    def remove_expired_producers(self, producer_id_expiration_ms: int) -> int:
        """Forget idle producer ids (``producer.id.expiration.ms``); returns how many."""
        return self._producer_state.remove_expired_producers(
            self._clock.milliseconds(), producer_id_expiration_ms
        )

    def __repr__(self) -> str:
        return (
            f"Log({self.dir.name}, start={self._log_start_offset}, "
            f"end={self._local.log_end_offset}, segments={len(self._local.segments)})"
        )


def _single_value(offsets: dict[tuple[str, int], int]) -> int:
    """The offset of a one-partition checkpoint file (0 when absent)."""
    return next(iter(offsets.values()), 0)


def _read_single(checkpoint: OffsetCheckpointFile, names: list[str]) -> int:
    """The offset of a one-partition checkpoint file, 0 when it is not among ``names``."""
    return _single_value(checkpoint.read()) if checkpoint.path.name in names else 0
