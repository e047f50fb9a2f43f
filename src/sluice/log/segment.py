"""``LogSegment``: one ``<base>.log`` data file with its ``.index`` and ``.timeindex``.

A segment's files are opened when first needed, through the broker's file cache
(sluice.log.file_cache), which closes idle ones; a new segment creates its data file at
its first append and each index at its first entry.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
from collections.abc import Callable, Container, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from sluice.base.clock import SYSTEM_CLOCK, Clock
from sluice.log.file_cache import UNBOUNDED, CachedFile, FileCache
from sluice.log.file_records import (
    LOG_FILE_SUFFIX,
    Corruption,
    FetchDataInfo,
    FileRecords,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from sluice.log.index import (
    INDEX_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    OffsetIndex,
    TimeIndex,
)
from sluice.log.patched_records import PatchedRecords
from sluice.log.transaction_index import TXN_INDEX_FILE_SUFFIX, TransactionIndex
from sluice.protocol.records.batch import LOG_OVERHEAD, NO_TIMESTAMP, BatchHeader, iter_batches

if TYPE_CHECKING:
    from sluice.log.next_segment import PreparedFiles

__all__ = ["LogSegment", "SegmentRecovery", "TimestampAndOffset", "filename_prefix_from_offset"]

_INT32_MAX = 2**31 - 1
RECENT_APPENDS = 32
"""Appends whose start a segment remembers for reads near its end (half are dropped when
full); a fetch from further back searches from the offset index alone."""


def filename_prefix_from_offset(offset: int) -> str:
    """Kafka's file name stem: the base offset zero-padded to 20 digits."""
    return f"{offset:020d}"


def _txn_index_name(log_name: str) -> str:
    """``<base>.log[suffix]`` -> ``<base>.txnindex[suffix]``."""
    stem, _, rest = log_name.partition(LOG_FILE_SUFFIX)
    return f"{stem}{TXN_INDEX_FILE_SUFFIX}{rest}"


class SegmentRecovery(NamedTuple):
    """What :meth:`LogSegment.recover` found: the bytes it cut from the end of the data
    file, where and why its scan stopped before the end (None: every batch was good),
    and whether the bytes from there on were kept (a bad header in flushed data)."""

    truncated: int
    stop: Corruption | None
    kept: bool = False


class LogSegment:
    """A contiguous range of a partition's batches stored in one ``.log`` file, indexed
    sparsely by offset and by timestamp; only the last segment of a log receives appends."""

    __slots__ = (
        "_bytes_since_last_index_entry",
        "_clock",
        "_index_interval_bytes",
        "_last_modified_ms",
        "_log",
        "_max_timestamp",
        "_naming",
        "_offset_index",
        "_offset_of_max_timestamp",
        "_recent_offsets",
        "_recent_positions",
        "_rolling_based_timestamp",
        "_time_index",
        "base_offset",
        "created_ms",
        "txn_index",
    )

    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        base_offset: int,
        index_interval_bytes: int,
        clock: Clock,
        txn_index: TransactionIndex | None = None,
    ) -> None:
        self._log = log
        self.txn_index = (
            txn_index
            if txn_index is not None
            else TransactionIndex(log.path.with_name(_txn_index_name(log.path.name)))
        )
        self._offset_index = offset_index
        self._time_index = time_index
        self.base_offset = base_offset
        self._index_interval_bytes = index_interval_bytes
        self._clock = clock
        self.created_ms = clock.milliseconds()
        self._last_modified_ms = self.created_ms
        if log.size:
            mtime = log.opened_mtime_ms
            self._last_modified_ms = (
                mtime if mtime >= 0 else os.stat(log.path).st_mtime_ns // 1_000_000
            )
        self._rolling_based_timestamp: int | None = None
        self._max_timestamp: int | None = None  # loaded lazily from the time index
        self._offset_of_max_timestamp = base_offset
        last_entry = offset_index.last_entry().position if offset_index.entries else 0
        self._bytes_since_last_index_entry = max(0, log.size - last_entry)
        # Where the latest appends began (base offset, file position), in offset order:
        # a fetch at or near the log end starts its search there, not at the index entry
        # up to index.interval.bytes before it.
        self._recent_offsets: list[int] = []
        self._recent_positions: list[int] = []
        # Held while files opened under a prepared set's names get their final ones
        # (open(prepared=...)); None once they have them, or for files opened by name.
        self._naming: threading.Lock | None = None

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        clock: Clock = SYSTEM_CLOCK,
        file_suffix: str = "",
        recycled: FileRecords | None = None,
        prepared: PreparedFiles | None = None,
        segment_bytes: int = 0,
        preallocate: bool = False,
        cache: FileCache = UNBOUNDED,
        present: Container[str] | None = None,
    ) -> LogSegment:
        """The segment of ``base_offset`` in ``directory``: its files are opened through
        ``cache`` when first used, and those missing are created by their first write;
        ``present``: the names in the directory, when the caller listed it (a file not
        among them is not looked for).
        ``recycled``: a removed segment's data file to write into (see
        :meth:`FileRecords.recycle_as`); ``prepared``: files created ahead under temporary
        names (next_segment.py, allocated there with ``preallocate``), which keep them
        until :meth:`take_final_names`. ``preallocate`` (Kafka's topic setting) allocates
        all ``segment_bytes`` of an empty data file now."""
        stem = filename_prefix_from_offset(base_offset)
        names = [
            f"{stem}{suffix}{file_suffix}"
            for suffix in (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX)
        ]
        absent = [present is not None and name not in present for name in names]
        path, index_path, time_index_path = (directory / name for name in names)
        index_fd = time_index_fd = None
        if prepared is not None:
            log = prepared.log
            log.move_to(cache)
            index_path, index_fd = prepared.index_path, prepared.index_fd
            time_index_path, time_index_fd = prepared.time_index_path, prepared.time_index_fd
        else:
            reused = recycled.recycle_as(path) if recycled is not None else None
            log = reused if reused is not None else FileRecords.open(path, cache, absent[0])
        if preallocate and prepared is None and log.size == 0:
            log.preallocate(segment_bytes)
        offset_index = OffsetIndex(
            index_path, base_offset, max_index_size, index_fd, cache, absent[1]
        )
        time_index = TimeIndex(
            time_index_path, base_offset, max_index_size, time_index_fd, cache, absent[2]
        )
        # A prepared segment's base offset is new: no transaction index to look for.
        txn_name = f"{stem}{TXN_INDEX_FILE_SUFFIX}{file_suffix}"
        txn_absent = prepared is not None or (present is not None and txn_name not in present)
        txn_index = TransactionIndex(directory / txn_name, txn_absent, cache)
        segment = cls(
            log, offset_index, time_index, base_offset, index_interval_bytes, clock, txn_index
        )
        if prepared is not None:
            segment._naming = threading.Lock()
            for file in (log, offset_index, time_index):
                file.pinned = True  # renamed on the file thread: the cache leaves them open
        return segment

    @property
    def named(self) -> bool:
        """Whether the files have their final names (always, but for files opened
        ``prepared`` until :meth:`take_final_names`)."""
        return self._naming is None

    def take_final_names(self) -> None:
        """Give files opened under a prepared set's names (:meth:`open`) the names
        of this segment's base offset: the indexes first, the data file last, so that a
        crash in between leaves the data file for the loader to name (next_segment.py).
        On any thread; nothing once done, or once the segment was removed or renamed."""
        lock = self._naming
        if lock is None:
            return
        with lock:
            if self._naming is None:
                return
            try:
                stem = filename_prefix_from_offset(self.base_offset)
                directory = self._log.path.parent
                self._offset_index.rename_to(directory / f"{stem}{INDEX_FILE_SUFFIX}")
                self._time_index.rename_to(directory / f"{stem}{TIME_INDEX_FILE_SUFFIX}")
                self._log.rename_to(directory / f"{stem}{LOG_FILE_SUFFIX}")
            except FileNotFoundError:
                pass  # the partition directory was renamed for deletion meanwhile
            finally:
                self._unpin()
                self._naming = None

    def _forgo_final_names(self) -> None:
        """The files are renamed or removed as they are: no final names will be taken."""
        lock = self._naming
        if lock is not None:
            with lock:
                self._unpin()
                self._naming = None

    def _unpin(self) -> None:
        for file in self._files():
            file.pinned = False

    def _files(self) -> tuple[CachedFile, ...]:
        return (self._log, self._offset_index, self._time_index, self.txn_index)

    def use_cache(self, cache: FileCache) -> None:
        """Have ``cache`` hold the files' descriptors from now on (a segment opened on
        its own, such as the cleaner's, joining a log)."""
        for file in self._files():
            file.move_to(cache)

    def release_files(self) -> None:
        """Close the open descriptors (they open again when next needed): after the
        loader read the segment, or on another thread than the cache's before the files
        are handed over."""
        for file in self._files():
            file.release()

    # -- properties --------------------------------------------------------------------
    @property
    def log(self) -> FileRecords:
        return self._log

    @property
    def offset_index(self) -> OffsetIndex:
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        return self._time_index

    @property
    def size(self) -> int:
        return self._log.size

    @property
    def max_timestamp_so_far(self) -> int:
        if self._max_timestamp is None:
            self._load_largest_timestamp()
        assert self._max_timestamp is not None
        return self._max_timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        if self._max_timestamp is None:
            self._load_largest_timestamp()
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """Max batch timestamp, or the last-modified time when no batch has a timestamp;
        the age that time-based retention compares with ``retention.ms``."""
        largest = self.max_timestamp_so_far
        return largest if largest >= 0 else self._last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return self._last_modified_ms

    def _load_largest_timestamp(self) -> None:
        # Every batch before the last offset index entry is covered by the time index (both
        # get an entry at the same appends); only the tail after it needs a header scan.
        last = self._time_index.last_entry()
        self._max_timestamp, self._offset_of_max_timestamp = last.timestamp, last.offset
        start = max(
            self._offset_index.lookup(last.offset).position,
            self._offset_index.last_entry().position,
        )
        for header in self._log.batch_headers(start):
            if header.max_timestamp > self._max_timestamp:
                self._max_timestamp = header.max_timestamp
                self._offset_of_max_timestamp = header.last_offset

    # -- roll decisions ----------------------------------------------------------------
    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka's rule: the new batch's timestamp minus the first batch's timestamp, or the
        clock time since the segment was created when batches carry no timestamps."""
        if self._rolling_based_timestamp is None and self._log.size:
            first = next(self._log.batch_headers(0), None)
            if first is not None:
                self._rolling_based_timestamp = first.max_timestamp
        rolling = self._rolling_based_timestamp
        if rolling is not None and rolling >= 0 and message_timestamp >= 0:
            return message_timestamp - rolling
        return now_ms - self.created_ms

    def should_roll(
        self,
        *,
        max_segment_bytes: int,
        max_segment_ms: int,
        roll_jitter_ms: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        messages_size: int,
        now_ms: int,
    ) -> bool:
        """Whether an append of ``messages_size`` bytes must go to a new segment."""
        size = self._log.size
        if size > max_segment_bytes - messages_size:
            return True
        if (
            size > 0
            and self.time_waited_for_roll(now_ms, max_timestamp_in_messages)
            > max_segment_ms - roll_jitter_ms
        ):
            return True
        return (
            self._offset_index.is_full()
            or self._time_index.is_full()
            or not self.can_convert_to_relative_offset(max_offset_in_messages)
        )

    # -- append ------------------------------------------------------------------------
    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        records: bytes | bytearray | memoryview | PatchedRecords,
        batches: Iterable[BatchHeader] | None = None,
        direct: bool = False,
    ) -> None:
        """Append whole batches whose offsets are already assigned.

        ``batches`` are the headers of ``records`` (positions relative to ``records``), as
        returned by validation; they are re-read from ``records`` when omitted.
        ``direct``: write whole blocks past the page cache (:meth:`FileRecords.append`).
        """
        if not len(records):
            return
        if not self.can_convert_to_relative_offset(largest_offset):
            raise ValueError(
                f"Offset {largest_offset} is out of range for segment {self.base_offset}"
            )
        physical_position = self._log.size
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        max_timestamp = self.max_timestamp_so_far
        self._log.append(records, direct)
        self._last_modified_ms = self._clock.milliseconds()
        since = self._bytes_since_last_index_entry
        interval = self._index_interval_bytes
        if batches is None:
            batches = iter_batches(
                bytes(records) if isinstance(records, PatchedRecords) else records
            )
        first = True
        for header in batches:
            if first:
                self._remember_append(header.base_offset, physical_position + header.position)
                first = False
            last_offset = header.base_offset + header.last_offset_delta
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
                self._max_timestamp = max_timestamp
                self._offset_of_max_timestamp = last_offset
            if since > interval:
                self._offset_index.append(last_offset, physical_position + header.position)
                self._time_index.maybe_append(max_timestamp, self._offset_of_max_timestamp)
                since = 0
            since += header.batch_length + LOG_OVERHEAD
        self._bytes_since_last_index_entry = since

    def _remember_append(self, base_offset: int, position: int) -> None:
        offsets, positions = self._recent_offsets, self._recent_positions
        if len(offsets) >= RECENT_APPENDS:
            del offsets[: RECENT_APPENDS // 2]
            del positions[: RECENT_APPENDS // 2]
        offsets.append(base_offset)
        positions.append(position)

    def _forget_appends(self) -> None:
        self._recent_offsets.clear()
        self._recent_positions.clear()

    # -- reads -------------------------------------------------------------------------
    def translate_offset(
        self, offset: int, starting_position: int = 0, strict: bool = False
    ) -> BatchHeader | None:
        """The first batch (at or after ``starting_position``) whose last offset >= ``offset``.

        The search starts at the offset index's entry or, when later, at the start of the
        latest append whose first batch begins at or below ``offset``: every batch before
        that one ends below ``offset``, so it cannot be the answer. A bad batch head on
        the way (:meth:`FileRecords.search_for_offset`) raises CorruptRecordException
        with ``strict``, and ends the search (None) without."""
        position = self._offset_index.lookup(offset).position
        recent = self._recent_offsets
        if recent and offset >= recent[0]:
            latest = self._recent_positions[bisect.bisect_right(recent, offset) - 1]
            if latest > position:
                position = latest
        return self._log.search_for_offset(
            offset, max(position, starting_position), self.base_offset, strict
        )

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        max_offset: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_size`` bytes.

        Batches end before ``max_position`` and hold only offsets < ``max_offset``; with
        ``min_one_message`` the first batch is returned even if larger than ``max_size``.
        Returns None when ``start_offset`` is beyond this segment. Raises
        CorruptRecordException when a batch head on the way to it is bad (the batches
        are sent as they are: their records and CRCs are not read).
        """
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self}")
        first = self.translate_offset(start_offset, strict=True)
        if first is None:
            return None
        start = first.position
        metadata = LogOffsetMetadata(start_offset, self.base_offset, start)
        size = self._log.size
        limit = size if max_position is None else min(max_position, size)
        at_boundary = limit == size  # a caller's max_position may fall inside a batch
        if max_offset is not None:
            if first.base_offset + first.last_offset_delta >= max_offset:
                limit, at_boundary = start, True
            else:
                bound = self.translate_offset(max_offset, start, strict=True)
                if bound is not None and bound.position <= limit:
                    limit, at_boundary = bound.position, True
        first_size = first.batch_length + LOG_OVERHEAD
        adjusted = max(max_size, first_size) if min_one_message else max_size
        available = limit - start
        budget = min(available, adjusted)
        if budget < first_size:
            return FetchDataInfo(metadata, self._log.slice(start, 0))
        if budget == available and at_boundary:
            length = available
        else:
            # Index positions are batch boundaries: hop from the last one before the limit.
            hop_from = max(
                start + first_size, self._offset_index.lookup_by_position(start + budget).position
            )
            length = self._log.last_whole_batch_end(hop_from, start + budget) - start
        return FetchDataInfo(metadata, self._log.slice(start, length))

    def read_next_offset(self) -> int:
        """One past the last offset stored in this segment (``base_offset`` when empty)."""
        next_offset = self.base_offset
        for header in self._log.batch_headers(self._offset_index.last_entry().position):
            next_offset = header.base_offset + header.last_offset_delta + 1
        return next_offset

    def batches(self, start_position: int = 0) -> Iterator[BatchHeader]:
        return self._log.batch_headers(start_position)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int | None = None
    ) -> TimestampAndOffset | None:
        """The first record at or after ``starting_offset`` with timestamp >= ``timestamp``."""
        start_offset = self.base_offset if starting_offset is None else starting_offset
        # Strictly-smaller entry: every record up to it is older than the target.
        entry = self._time_index.lookup(timestamp - 1)
        position = self._offset_index.lookup(max(entry.offset, start_offset)).position
        return self._log.search_for_timestamp(timestamp, position, start_offset)

    def find_max_timestamp(self) -> TimestampAndOffset | None:
        """The earliest record carrying this segment's max timestamp (ListOffsets -3)."""
        max_timestamp = self.max_timestamp_so_far
        if max_timestamp == NO_TIMESTAMP:
            return None
        header = self.translate_offset(self._offset_of_max_timestamp)
        if header is None:
            return None
        return self._log.search_for_timestamp(max_timestamp, header.position, header.base_offset)

    def recover(
        self, max_message_size: int, verify_from: int | None = None, keep_unverified: bool = False
    ) -> SegmentRecovery:
        """Scan the batches (:meth:`FileRecords.valid_batches`: those holding offsets from
        ``verify_from`` on are checked whole, CRC included, those before it only by their
        headers), cut the file at the first bad one and rebuild both indexes.

        ``keep_unverified``: a bad header before ``verify_from`` (in data flushed before
        a crash) does not cut the file: the bytes from there on stay, unindexed, and a
        read that reaches them answers CORRUPT_MESSAGE. Not for the last segment, whose
        end gives the log end offset."""
        self._offset_index.reset()
        self._time_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        max_timestamp = NO_TIMESTAMP
        offset_of_max = self.base_offset
        next_offset = self.base_offset
        stop: Corruption | None = None
        for header in self._log.valid_batches(self.base_offset, max_message_size, verify_from):
            if isinstance(header, Corruption):
                stop = header
                break
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
            if valid_bytes - last_index_entry > self._index_interval_bytes:
                self._offset_index.append(header.last_offset, valid_bytes)
                self._time_index.maybe_append(max_timestamp, offset_of_max)
                last_index_entry = valid_bytes
            valid_bytes += header.size_in_bytes
            next_offset = header.last_offset + 1
        self._forget_appends()
        kept = (
            stop is not None
            and keep_unverified
            and verify_from is not None
            and next_offset < verify_from
        )
        truncated = 0
        if not kept:
            truncated = self._log.truncate_to(valid_bytes)
            self.txn_index.truncate_to(self.read_next_offset())
        self._time_index.maybe_append(max_timestamp, offset_of_max, skip_full_check=True)
        self._max_timestamp, self._offset_of_max_timestamp = max_timestamp, offset_of_max
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        self._rolling_based_timestamp = None
        return SegmentRecovery(truncated, stop, kept)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset >= ``offset``; returns bytes removed."""
        header = self.translate_offset(offset)
        self._offset_index.truncate_to(offset)
        self._time_index.truncate_to(offset)
        removed = 0 if header is None else self._log.truncate_to(header.position)
        self._forget_appends()
        self.txn_index.truncate_to(offset)
        if self._log.size == 0:
            self.created_ms = self._clock.milliseconds()
            self._rolling_based_timestamp = None
        last_entry = self._offset_index.last_entry().position if self._offset_index.entries else 0
        self._bytes_since_last_index_entry = self._log.size - last_entry
        self._load_largest_timestamp()
        return removed

    def sanity_check(self) -> None:
        """Raise :class:`CorruptIndexException` if an index file is inconsistent."""
        self._offset_index.sanity_check(self._log.size)
        self._time_index.sanity_check()

    def on_become_inactive_segment(self) -> None:
        """Called on roll: record the final max timestamp in the time index."""
        self._time_index.maybe_append(
            self.max_timestamp_so_far, self._offset_of_max_timestamp, skip_full_check=True
        )

    # -- file lifecycle ----------------------------------------------------------------
    def flush(self) -> None:
        """fsync the data file and the indexes written since their last sync."""
        for file in self.files_to_sync():
            os.fsync(file.fileno())

    def files_to_sync(self) -> list[CachedFile]:
        """The files :meth:`flush` syncs: the data file (once it exists), the indexes
        with entries not yet synced (which then count as synced) and the transaction
        index likewise. Each one's descriptor is to be asked for just before its sync
        (or duplicated at once), the cache may close it in between."""
        files: list[CachedFile] = []
        if self._log.on_disk:
            files.append(self._log)
        for index in (self._offset_index, self._time_index, self.txn_index):
            unsynced = index.take_unsynced()
            if unsynced is not None:
                files.append(unsynced)
        return files

    def close(self) -> None:
        """Record the final time index entry, sync the indexes and close every file (with
        their final names)."""
        self.take_final_names()
        if self._log.size and self.max_timestamp_so_far != NO_TIMESTAMP:
            self.on_become_inactive_segment()
        self._offset_index.flush()
        self._time_index.flush()
        self._offset_index.close()
        self._time_index.close()
        self.txn_index.close()
        self._log.close()

    def close_handlers(self) -> None:
        """Close every file as it is, writing nothing (Kafka's ``closeHandlers``): a
        segment of a log whose directory went offline. Files not yet given their final
        names keep their ``.next`` names, which the loader settles."""
        self._forgo_final_names()
        for close in (
            self._offset_index.close, self._time_index.close, self.txn_index.close_handler,
            self._log.close_handler,
        ):  # fmt: skip
            with contextlib.suppress(OSError):
                close()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the three files, e.g. ``("", ".deleted")`` before asynchronous deletion."""
        self._forgo_final_names()
        for file in (self._log, self._offset_index, self._time_index):
            name = file.path.name
            stem = name[: len(name) - len(old_suffix)] if old_suffix else name
            file.rename_to(file.path.with_name(stem + new_suffix))
        name = self.txn_index.path.name
        stem = name[: len(name) - len(old_suffix)] if old_suffix else name
        self.txn_index.rename_to(self.txn_index.path.with_name(stem + new_suffix))

    def delete(self) -> None:
        """Close and remove the segment's files."""
        self._forgo_final_names()
        self._log.delete()
        self.delete_indexes()

    def delete_indexes(self) -> None:
        """Close and remove the index files only: the data file of a removed segment that
        a later segment of the same log reuses (:meth:`open` ``(recycled=...)``)."""
        self._offset_index.delete()
        self._time_index.delete()
        self.txn_index.delete()

    def close_for_removal(self, with_data: bool = True) -> Callable[[], None]:
        """Close the files now (on the cache's thread) and return what removes them, to
        run on any thread (the file thread); ``with_data=False``: the index files only
        (the data file stays open, to be reused)."""
        self._forgo_final_names()
        files: tuple[CachedFile, ...] = (self._offset_index, self._time_index, self.txn_index)
        if with_data:
            files = (self._log, *files)
        paths = []
        for file in files:
            file.close_descriptor()
            paths.append(file.path)

        def remove() -> None:
            for path in paths:
                path.unlink(missing_ok=True)

        return remove

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._log.size})"
