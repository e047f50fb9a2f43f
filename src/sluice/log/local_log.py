"""``LocalLog``: the segment list of one partition directory (Kafka's LocalLog)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
from bisect import bisect_right
from collections.abc import Callable, Sequence
from pathlib import Path

from sluice.base.clock import Clock
from sluice.log.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile, fsync_directory
from sluice.log.config import LogConfig
from sluice.log.errors import KafkaStorageException
from sluice.log.file_cache import UNBOUNDED, CachedFile, FileCache
from sluice.log.file_records import (
    FetchDataInfo,
    FileRecords,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from sluice.log.file_work import FileWork
from sluice.log.loader import DELETED_FILE_SUFFIX, SWAP_FILE_SUFFIX, open_segment
from sluice.log.log_dir_failure_channel import LogDirFailureChannel, describe_os_error
from sluice.log.next_segment import NextSegment
from sluice.log.patched_records import PatchedRecords
from sluice.log.segment import LogSegment
from sluice.protocol.records.batch import BatchHeader

__all__ = ["FlushWork", "GuardedFileWork", "LocalLog"]

logger = logging.getLogger(__name__)

_NEVER = 2**63  # a segment size no append reaches


class FlushWork:
    """The fsyncs that bring a log's recovery point to ``target``: taken on the log's
    thread (:meth:`LocalLog.flush_work`), synced anywhere, applied on the log's thread
    (:meth:`LocalLog.flushed`). ``fds``: with ``owned``, duplicated descriptors this work
    closes, so that it can run on another thread, after the segments are closed or
    removed; without, the segment files themselves, each descriptor asked for just
    before its fsync (on the log's thread, at once). ``directory``: also fsynced, after
    the files (a rolled segment's names, a new data file's)."""

    __slots__ = ("directory", "done", "error", "fds", "owned", "target", "truncations")

    def __init__(
        self,
        target: int,
        fds: Sequence[int | CachedFile],
        truncations: int,
        owned: bool,
        directory: Path | None = None,
    ) -> None:
        self.target = target
        self.fds = fds
        self.truncations = truncations
        self.owned = owned
        self.directory = directory
        self.error: OSError | None = None
        self.done = False  # set once sync() has run, whatever its outcome

    def sync(self) -> None:
        """fsync every file; the first failure is kept in ``error`` (and raised)."""
        try:
            for fd in self.fds:
                os.fsync(fd if isinstance(fd, int) else fd.fileno())
            if self.directory is not None:
                fsync_directory(self.directory)
        except OSError as exc:
            self.error = exc
            raise
        finally:
            if self.owned:
                for fd in self.fds:
                    if isinstance(fd, int):
                        os.close(fd)
                self.fds = []
            self.done = True


class GuardedFileWork:
    """A piece of a log's background file work (``work``, doing ``what``) whose I/O
    error takes the log offline (:meth:`LocalLog.io_failed`), raised as
    ``KafkaStorageException``, which the file work logs at debug only."""

    __slots__ = ("local", "what", "work")

    def __init__(self, local: LocalLog, work: Callable[[], None], what: str) -> None:
        self.local = local
        self.work = work
        self.what = what

    def __call__(self) -> None:
        try:
            self.work()
        except OSError as exc:
            raise self.local.io_failed(exc, self.what) from exc


def _duplicated(files: list[CachedFile]) -> list[int]:
    """Duplicates of the files' descriptors, each made as soon as it is asked for; none
    left open if one cannot be made (EMFILE)."""
    copies: list[int] = []
    try:
        for file in files:
            copies.append(os.dup(file.fileno()))
    except OSError:
        for copy in copies:
            os.close(copy)
        raise
    return copies


class LocalLog:
    """The ordered segments of one partition directory with the log end offset and recovery
    point: appends to the active segment, rolls, reads, truncates, flushes and deletes
    segments, knowing nothing of the log start offset or retention.

    A roll has the segments it leaves flushed as background file work, as Kafka's
    ``flush-log`` job does; the recovery point moves once that is done
    (:meth:`apply_finished_flushes`). The recovery point is written to
    ``recovery-point-offset-checkpoint`` when its owner says
    (:meth:`write_recovery_point_checkpoint`; a broker every
    ``log.flush.offset.checkpoint.interval.ms``), at once when it moves back
    (truncation), and at open and close.

    An I/O error (``OSError``) in any of this, on whatever thread, takes the log offline
    (:meth:`io_failed`): from then on every use raises ``KafkaStorageException``, and
    its log directory is reported to the :class:`LogDirFailureChannel`."""

    __slots__ = (
        "_background_flushes",
        "_bases",
        "_cache",
        "_checkpointed",
        "_clock",
        "_closed",
        "_config",
        "_failure_channel",
        "_file_work",
        "_flush_wanted",
        "_last_flush_ms",
        "_log_end_offset",
        "_next",
        "_next_at",
        "_paged",
        "_pending_deletes",
        "_recovery_point",
        "_rp_checkpoint",
        "_rp_lock",
        "_segments",
        "_spare",
        "_truncations",
        "_write_error",
        "dir",
        "partition",
        "topic",
    )

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        segments: list[LogSegment],
        log_end_offset: int,
        recovery_point: int,
        file_work: FileWork,
        failure_channel: LogDirFailureChannel,
        cache: FileCache = UNBOUNDED,
        checkpointed: int | None = None,
    ) -> None:
        """``file_work``: where removing files, dropping pages and creating the next
        segment's files run (file_work.py); ``failure_channel``: where an I/O error
        reports the log directory (``directory``'s parent); ``cache``: the file cache of
        its segments' descriptors (file_cache.py); ``checkpointed``: the recovery point
        that recovery-point-offset-checkpoint holds (None: unknown), written at once
        unless it is ``recovery_point``."""
        self.dir = directory
        self._cache = cache
        self.topic = topic
        self.partition = partition
        self._config = config
        self._clock = clock
        self._file_work = file_work
        self._failure_channel = failure_channel
        self._segments = segments
        self._bases = [segment.base_offset for segment in segments]
        self._log_end_offset = log_end_offset
        self._write_error: OSError | None = None
        self._recovery_point = recovery_point
        self._last_flush_ms = clock.milliseconds()
        # The end of the latest flush flush.messages asked for and an append deferred
        # (append(defer_flush=True)); every truncation counts, so that a flush taken
        # before one is not applied after it.
        self._flush_wanted = 0
        self._truncations = 0
        self._closed = False
        # (deadline, segment, bound): removed segments whose files are deleted (or one kept
        # as the spare) at the deadline; every offset the segment held is below ``bound``.
        self._pending_deletes: list[tuple[int, LogSegment, int]] = []
        self._spare: tuple[FileRecords, int] | None = None  # a data file to reuse, its bound
        self._paged: LogSegment | None = None  # the removed segment whose pages are kept
        # Flushes handed to the file work, in order, until applied on this thread.
        self._background_flushes: list[FlushWork] = []
        self._rp_checkpoint = OffsetCheckpointFile(directory / RECOVERY_POINT_CHECKPOINT)
        self._rp_lock = threading.RLock()  # one checkpoint write at a time, from any thread
        self._checkpointed = checkpointed  # the recovery point the file holds
        self._write_recovery_point_checkpoint()  # an OSError: the log is not opened
        # The next segment's files, made by the file work (next_segment.py) once the
        # active segment holds _next_at bytes.
        self._next = NextSegment(directory, file_work)
        self._next_at = self._next_threshold()

    # -- state ---------------------------------------------------------------------------
    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        self._next_at = self._next_threshold()

    @property
    def segments(self) -> Sequence[LogSegment]:
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        active = self._segments[-1]
        return LogOffsetMetadata(self._log_end_offset, active.base_offset, active.size)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def last_flush_time(self) -> int:
        return self._last_flush_ms

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def write_error(self) -> OSError | None:
        """The I/O error that took the log offline (None while it is online)."""
        return self._write_error

    def check_open(self) -> None:
        if self._closed:
            raise KafkaStorageException(f"Log {self.dir.name} is closed")
        if self._write_error is not None:
            raise KafkaStorageException(
                f"Log {self.dir.name} is offline: log dir {self.dir.parent} failed "
                f"({describe_os_error(self._write_error)})"
            )

    def io_failed(self, error: OSError, what: str) -> KafkaStorageException:
        """``what`` (an operation on this log) failed with ``error``: the log is offline
        from now on and its directory is reported to the failure channel (which logs
        it, once per directory). Returns the exception to raise; on any thread."""
        if self._write_error is None:
            self._write_error = error
        self._failure_channel.maybe_add_offline_log_dir(
            self.dir.parent, f"{what} of {self.dir.name}", error
        )
        return KafkaStorageException(
            f"Log {self.dir.name} is offline: {what} failed ({describe_os_error(error)})"
        )

    def take_offline(self, error: OSError) -> None:
        """The log directory went offline (another log's I/O error): refuse every use
        from now on, as :meth:`io_failed` without reporting it again."""
        if self._write_error is None:
            self._write_error = error

    def _submit(self, work: Callable[[], None], what: str) -> None:
        """Hand ``work`` to the file work; an I/O error in it takes the log offline."""
        self._file_work.submit(GuardedFileWork(self, work, what))

    def segment_index_for(self, offset: int) -> int:
        """Index of the segment whose range holds ``offset`` (the floor by base offset)."""
        return max(bisect_right(self._bases, offset) - 1, 0)

    def upper_bound(self, index: int) -> int:
        """One past the last offset that segment ``index`` may hold."""
        bases = self._bases
        return bases[index + 1] if index + 1 < len(bases) else self._log_end_offset

    # -- append and roll -----------------------------------------------------------------
    def append(
        self,
        buf: bytes | bytearray | memoryview | PatchedRecords,
        headers: list[BatchHeader],
        first: int,
        last: int,
        max_timestamp: int,
        direct: bool = False,
        defer_flush: bool = False,
    ) -> bool:
        """Append batches holding offsets ``first..last``, rolling first if needed;
        ``direct``: whole blocks past the page cache (:meth:`FileRecords.append`).

        When ``flush.messages`` messages have been appended since the recovery point
        (or since the end of the last deferred flush) the log is flushed here, or, with
        ``defer_flush``, True is returned and the caller has the flush done
        (:meth:`flush_work`, sluice.log.group_flush); False otherwise."""
        segment = self._maybe_roll(len(buf), first, last, max_timestamp)
        segment.append(last, max_timestamp, buf, headers, direct)
        self._log_end_offset = last + 1
        flushed_to = max(self._recovery_point, self._flush_wanted)
        if self._log_end_offset - flushed_to < self._config.flush_messages:
            return False
        if defer_flush:
            self._flush_wanted = self._log_end_offset
            return True
        self.flush()
        return False

    @property
    def flush_wanted(self) -> int:
        """The end of the latest deferred flush (0 if none): appends below it wait for
        the recovery point to reach it."""
        return self._flush_wanted

    def _maybe_roll(self, size: int, first: int, last: int, max_timestamp: int) -> LogSegment:
        config = self._config
        segment = self._segments[-1]
        jitter = 0
        if config.segment_jitter_ms > 0:  # deterministic per segment instead of random
            jitter = (segment.base_offset * 2654435761) % min(
                config.segment_jitter_ms, config.segment_ms
            )
        if segment.should_roll(
            max_segment_bytes=config.segment_bytes,
            max_segment_ms=config.segment_ms,
            roll_jitter_ms=jitter,
            max_timestamp_in_messages=max_timestamp,
            max_offset_in_messages=last,
            messages_size=size,
            now_ms=self._clock.milliseconds(),
        ):
            return self.roll(first)
        if segment.size + size >= self._next_at:  # half full with this append
            self._ask_next(segment)
        return segment

    def _next_threshold(self) -> int:
        """The active segment's size at which the next one's files are asked for: half
        of ``segment.bytes`` with ``segment.prepare.next``, else never."""
        config = self._config
        return config.segment_bytes // 2 if config.segment_prepare_next else _NEVER

    def _ask_next(self, active: LogSegment) -> None:
        """Have the file work create the next segment's files where it runs in the
        background; with inline file work the roll creates them."""
        self._next_at = _NEVER
        if self._file_work.in_background:
            config = self._config
            self._next.ask(active.base_offset, config.segment_bytes if config.preallocate else 0)

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or ``expected_next_offset``)."""
        self.check_open()
        new_offset = max(expected_next_offset or 0, self._log_end_offset)
        active = self._segments[-1]
        if active.base_offset == new_offset and active.size == 0:
            return active  # nothing to roll away from
        started_ns = self._clock.nanoseconds()
        active.on_become_inactive_segment()
        active.log.trim()
        segment, files = self._new_segment(new_offset)
        self._segments.append(segment)
        logger.info(
            "%s: rolled new log segment at offset %d in %.1f ms%s",
            self.dir.name,
            new_offset,
            (self._clock.nanoseconds() - started_ns) / 1e6,
            files,
            extra={"event": "segment_roll", "log": self.dir.name, "base_offset": new_offset,
                   "log_dir": str(self.dir.parent)},
        )  # fmt: skip
        self._bases.append(new_offset)
        self._next_at = self._next_threshold()
        self.flush_in_background(new_offset)
        return segment

    def _new_segment(self, base_offset: int) -> tuple[LogSegment, str]:
        """Open the segment at ``base_offset``, writing into the spare data file when there
        is one that held only lower offsets and the page cache still holds it, else on the
        files created ahead (next_segment.py) when they are ready, else on new files.

        Why: a new file's pages are new page-cache pages, and taking them is most of an
        append's cost where fresh memory is slow (a VM whose host takes back freed
        memory); writing into pages the cache still holds skips that. The old bytes past
        the new records are trimmed when the segment rolls or closes; after a crash, recovery stops
        at them because their offsets are below ``base_offset`` (file_records.py). Also
        says, for the log, which files it took."""
        recycled = None
        if self._spare is not None:
            records, bound = self._spare
            if not self._config.segment_recycle or not records.cached():
                self._spare = None
                self._submit(records.close_for_removal(), "deleting a removed segment")
            elif bound <= base_offset:
                self._spare = None
                recycled = records
        prepared = self._next.take() if recycled is None else None
        segment = open_segment(
            self.dir, base_offset, self._config, self._clock, recycled, prepared, self._cache
        )
        if prepared is not None:
            self._submit(segment.take_final_names, "naming a new segment")  # where made
            return segment, " (on files created ahead)"
        if recycled is not None and segment.log.stale_bytes > 0:
            return segment, " (reusing a removed segment's file)"
        # Create the data file now, as Kafka does at a roll: its name is what records the
        # new base offset once every older segment has been deleted (a first segment at
        # offset 0 may stay absent until its first append: absence means the same).
        if base_offset > 0:
            segment.log.fileno()
        return segment, ""

    # -- read ----------------------------------------------------------------------------
    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int, min_one_message: bool
    ) -> FetchDataInfo:
        """Whole batches below ``max_offset`` from the first segment that has any."""
        leo = self._log_end_offset
        limit = min(max_offset, leo)
        if fetch_offset < limit:
            segments = self._segments
            for i in range(self.segment_index_for(fetch_offset), len(segments)):
                bound = limit if limit < self.upper_bound(i) else None
                info = segments[i].read(fetch_offset, max_bytes, None, bound, min_one_message)
                if info is not None:
                    return info
                if bound is not None:
                    break
        return self.empty_fetch(fetch_offset)

    def empty_fetch(self, fetch_offset: int) -> FetchDataInfo:
        active = self._segments[-1]
        metadata = LogOffsetMetadata(fetch_offset, active.base_offset, active.size)
        return FetchDataInfo(metadata, active.log.slice(active.size, 0))

    def find_offset_by_timestamp(
        self, timestamp: int, start_offset: int
    ) -> TimestampAndOffset | None:
        """The first record at or after ``start_offset`` with timestamp >= ``timestamp``,
        searching the first segments whose max timestamp reaches it."""
        for i, segment in enumerate(self._segments):
            if self.upper_bound(i) <= start_offset or segment.max_timestamp_so_far < timestamp:
                continue
            found = segment.find_offset_by_timestamp(
                timestamp, max(start_offset, segment.base_offset)
            )
            if found is not None:
                return found
        return None

    def leader_epoch_of(self, offset: int) -> int | None:
        """The partitionLeaderEpoch of the batch holding ``offset`` (None if absent/unset)."""
        segment = self._segments[self.segment_index_for(offset)]
        header = segment.translate_offset(offset)
        if header is None or header.partition_leader_epoch < 0:
            return None
        return header.partition_leader_epoch

    # -- deletion ------------------------------------------------------------------------
    def remove_and_delete_segments(self, segments: Sequence[LogSegment]) -> None:
        """Drop ``segments`` from the log; their files are renamed ``*.deleted`` and removed
        after ``file.delete.delay.ms`` so in-flight ``sendfile`` slices stay valid."""
        doomed = {id(segment) for segment in segments}
        bounds = {
            id(segment): self.upper_bound(i)
            for i, segment in enumerate(self._segments)
            if id(segment) in doomed
        }
        self._segments = [s for s in self._segments if id(s) not in doomed]
        self._bases = [segment.base_offset for segment in self._segments]
        delay = self._config.file_delete_delay_ms
        for segment in segments:
            if delay == 0:
                segment.delete()
            else:
                segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
                due_ms = self._clock.milliseconds() + delay
                self._pending_deletes.append((due_ms, segment, bounds[id(segment)]))
                self._drop_pages_of_removed(segment)

    def _drop_pages_of_removed(self, newest: LogSegment) -> None:
        """Free the page-cache pages of removed segments now rather than at deletion: no
        fetch reaches them any more, and the delay (Kafka's default is 60 s) would keep
        up to a minute of appends in memory, evicting data that readers still want.
        With ``segment.recycle`` the newest removed segment keeps its pages, since it may
        become the spare, whose appends overwrite them (:meth:`delete_pending_files`).
        The dropping runs as file work; in the background it first writes back pages
        still dirty, which the kernel would not drop, and waits for the disk; inline it
        does not wait for the disk and drops clean pages only."""
        paged = self._paged
        file_work = self._file_work
        write_back = file_work.in_background
        if paged is not None:
            file_work.submit(paged.log.cache_dropper(write_back))
        if self._config.segment_recycle:
            self._paged = newest
        else:
            self._paged = None
            file_work.submit(newest.log.cache_dropper(write_back))

    def delete_segments_while(
        self, predicate: Callable[[LogSegment, int], bool], high_watermark: int | None
    ) -> int:
        """Delete the oldest segments while ``predicate(segment, upper_bound)`` holds; never
        the active segment nor one holding offsets >= ``high_watermark``."""
        segments = self._segments
        doomed: list[LogSegment] = []
        for i in range(len(segments) - 1):
            upper = self.upper_bound(i)
            if high_watermark is not None and upper > high_watermark:
                break
            if not predicate(segments[i], upper):
                break
            doomed.append(segments[i])
        if doomed:
            self.remove_and_delete_segments(doomed)
        return len(doomed)

    def delete_pending_files(self, force: bool = False) -> int:
        """Remove the ``*.deleted`` files whose delay expired (all, and the spare, with
        ``force``). With ``segment.recycle`` the data file of the newest expired segment is
        kept instead as the spare, which the next roll writes into (:meth:`_new_segment`)."""
        now = self._clock.milliseconds()
        due = [entry for entry in self._pending_deletes if force or entry[0] <= now]
        self._pending_deletes = [e for e in self._pending_deletes if not (force or e[0] <= now)]
        if any(segment is self._paged for _, segment, _ in due):
            self._paged = None
        count = len(due)
        if force:  # shutdown, topic deletion: now, on this thread
            for _, segment, _ in due:
                segment.delete()
            if self._spare is not None:
                self._spare[0].delete()
                self._spare = None
            return count
        # The descriptors are closed here, where the file cache lives; the file work
        # removes the files.
        if due and self._config.segment_recycle:
            if self._spare is not None:
                self._submit(self._spare[0].close_for_removal(), "deleting a removed segment")
            _, segment, bound = due.pop()
            self._spare = (segment.log, bound)
            self._submit(segment.close_for_removal(with_data=False), "deleting a removed segment")
        for _, segment, _ in due:
            self._submit(segment.close_for_removal(), "deleting a removed segment")
        return count

    def replace_segments(self, new_segment: LogSegment, old_segments: Sequence[LogSegment]) -> None:
        """The log cleaner's swap (Kafka's ``replaceSegments``): ``new_segment``, open on its
        committed ``.swap`` files and based at the first old segment's base offset, takes the
        place of the contiguous, non-active ``old_segments``. The old files are renamed
        ``*.deleted`` (removed after ``file.delete.delay.ms``) before the ``.swap`` files get
        their final names, so a crash in between is completed by the loader."""
        positions = {id(segment): i for i, segment in enumerate(self._segments)}
        first = positions.get(id(old_segments[0]), -1) if old_segments else -1
        expected = list(range(first, first + len(old_segments)))
        if (
            first < 0
            or [positions.get(id(s), -1) for s in old_segments] != expected
            or expected[-1] >= len(self._segments) - 1
            or new_segment.base_offset != old_segments[0].base_offset
        ):
            raise ValueError(f"{self.dir.name}: cannot replace segments {list(old_segments)}")
        self.remove_and_delete_segments(old_segments)
        new_segment.use_cache(self._cache)
        new_segment.change_file_suffixes(SWAP_FILE_SUFFIX, "")
        self._segments.insert(first, new_segment)
        self._bases.insert(first, new_segment.base_offset)
        fsync_directory(self.dir)

    def truncate_to(self, target: int) -> int:
        """Remove every batch holding offsets >= ``target``; returns the new log end offset
        (``target``, or the base offset of a batch that straddled it)."""
        index = self.segment_index_for(target)
        later = self._segments[index + 1 :]
        if later:
            self.remove_and_delete_segments(later)
        segment = self._segments[-1]
        straddling = segment.translate_offset(target)
        segment.truncate_to(target)
        new_end = target if straddling is None else min(target, straddling.base_offset)
        self._log_end_offset = max(new_end, segment.base_offset)
        self._truncations += 1
        self._background_flushes.clear()  # their work no longer counts (flushed())
        self._flush_wanted = min(self._flush_wanted, self._log_end_offset)
        self._set_recovery_point(min(self._recovery_point, self._log_end_offset))
        return self._log_end_offset

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start empty at ``new_offset``."""
        self.remove_and_delete_segments(list(self._segments))
        self._segments = [self._new_segment(new_offset)[0]]
        self._bases = [new_offset]
        self._log_end_offset = new_offset
        self._truncations += 1
        self._background_flushes.clear()
        self._flush_wanted = 0
        self._set_recovery_point(new_offset)

    # -- flush, checkpoint, close --------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets in ``[recovery_point, offset)`` (default: the
        log end offset) and advance the recovery point."""
        work = self.flush_work(offset)
        if work is not None:
            work.sync()
            self.flushed(work)

    def flush_work(self, offset: int | None = None, detached: bool = False) -> FlushWork | None:
        """What :meth:`flush` would fsync (None: nothing below ``offset`` is unflushed).
        ``detached``: with duplicated descriptors, for fsyncs run on another thread while
        this one goes on (then :meth:`flushed` on this thread)."""
        return self._work_from(self._recovery_point, offset, detached)

    def _work_from(self, start: int, offset: int | None, detached: bool) -> FlushWork | None:
        """The fsyncs of the segments holding offsets in ``[start, offset)``."""
        self.check_open()
        target = self._log_end_offset if offset is None else min(offset, self._log_end_offset)
        if target <= start:
            return None
        files: list[CachedFile] = []
        created = False  # a data file created since the last sync: its name is synced too
        for i in range(self.segment_index_for(start), len(self._segments)):
            if self._bases[i] >= target:
                break
            segment = self._segments[i]
            files.extend(segment.files_to_sync())
            created |= segment.log.take_created()
        directory = self.dir if created else None
        if detached:
            return FlushWork(target, _duplicated(files), self._truncations, True, directory)
        return FlushWork(target, files, self._truncations, False, directory)

    def flush_in_background(self, offset: int) -> None:
        """Have the file work fsync the segments below ``offset`` and the directory
        (Kafka's ``flush-log`` job at a roll: ``offset`` is the new segment's base); the
        recovery point moves to ``offset`` once it is done (:meth:`apply_finished_flushes`;
        with inline file work, before this returns). Segments that an earlier one still
        in the background covers are not synced again."""
        pending = self._background_flushes
        start = max(self._recovery_point, pending[-1].target if pending else 0)
        work = self._work_from(start, offset, self._file_work.in_background)
        if work is None:
            return
        work.directory = self.dir
        pending.append(work)
        self._submit(work.sync, "flush")  # the log goes offline there, applied here too
        self.apply_finished_flushes()

    def apply_finished_flushes(self) -> None:
        """Apply the background flushes that are done, in order (:meth:`flushed`); on
        the log's thread."""
        pending = self._background_flushes
        while pending and pending[0].done:
            self.flushed(pending.pop(0))

    def flushed(self, work: FlushWork) -> None:
        """``work`` was synced: the recovery point moves to its target, unless the log was
        closed or truncated meanwhile; a failed sync takes the log offline."""
        if self._closed or work.truncations != self._truncations:
            return
        if work.error is not None:
            self.io_failed(work.error, "flush")
            return
        self._last_flush_ms = self._clock.milliseconds()
        if work.target > self._recovery_point:
            self._recovery_point = work.target

    def _set_recovery_point(self, offset: int) -> None:
        """Move the recovery point; back (a truncation), the checkpoint is written now, so
        that it never claims data the log no longer has as flushed."""
        moved_back = offset < self._recovery_point
        self._recovery_point = offset
        if moved_back:
            self.write_recovery_point_checkpoint()

    @property
    def recovery_point_checkpointed(self) -> bool:
        """Whether recovery-point-offset-checkpoint holds the recovery point."""
        return self._checkpointed == self._recovery_point

    def write_recovery_point_checkpoint(self) -> None:
        """Write the recovery point to recovery-point-offset-checkpoint unless it holds it
        already; on any thread (the file work), nothing once the log is closed or
        offline. A failed write takes the log offline (``KafkaStorageException``); the
        file keeps its previous value (written atomically, checkpoint.py)."""
        try:
            self._write_recovery_point_checkpoint()
        except OSError as exc:
            raise self.io_failed(exc, "writing the recovery point checkpoint") from exc

    def _write_recovery_point_checkpoint(self) -> None:
        with self._rp_lock:
            offset = self._recovery_point
            if self._closed or offset == self._checkpointed or self._write_error is not None:
                return
            self._rp_checkpoint.write({(self.topic, self.partition): offset})
            self._checkpointed = offset

    def close(self) -> None:
        """Close every segment (writing final time index entries) and the checkpoint.
        An offline log, or one that fails to close, writes nothing more: its files are
        closed as they are (Kafka's ``closeHandlers``) and the next start recovers it."""
        if self._closed:
            return
        if self._write_error is None:
            try:
                self.delete_pending_files(force=True)
                with self._rp_lock:  # a checkpoint write on the file thread ends first
                    self.write_recovery_point_checkpoint()
                    self._closed = True
                for segment in self._segments:
                    segment.close()
                self._next.close()
                return
            except OSError as exc:
                self.io_failed(exc, "close")
            except KafkaStorageException:
                pass  # io_failed said so
        self._close_handlers()

    def _close_handlers(self) -> None:
        """Close every file of an offline log without writing, renaming or removing any."""
        with self._rp_lock:
            self._closed = True
        for _, segment, _ in self._pending_deletes:
            segment.close_handlers()
        self._pending_deletes.clear()
        if self._spare is not None:
            self._spare[0].close_handler()
            self._spare = None
        for segment in self._segments:
            segment.close_handlers()
        with contextlib.suppress(OSError):
            self._next.close()

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def size(self) -> int:
        return sum(segment.size for segment in self._segments)
