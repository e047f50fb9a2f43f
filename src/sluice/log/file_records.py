"""The segment data file (``<base>.log``), slices of it for zero-copy fetches, and header scans.

All reads use ``os.pread`` on the file's descriptor, which is opened on first use and may
be closed while the file is idle (a :class:`~sluice.log.file_cache.CachedFile` of the
broker's file cache); a :class:`FileSlice` asks for it when it is sent, so it can be
handed to ``os.sendfile``. A file that holds no records is not created until its first
append. Scans read batch headers only, in small windows, and never decode records.

A file may be longer than its records: a retained-out segment file reused for a new
segment (:meth:`FileRecords.recycle_as`) keeps its old bytes past the new end until they
are overwritten or trimmed, and a preallocated one (:meth:`FileRecords.preallocate`, Kafka's
``preallocate``) holds zeros past its records.
Nothing reads past :attr:`FileRecords.size`; the tail is cut when the segment stops being
active, when it is closed, and by recovery after a crash (old batches hold offsets below
the new segment's base, and zeros are no batch, so recovery stops at either).
"""

from __future__ import annotations

import contextlib
import functools
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from sluice.log.direct import DirectWriter
from sluice.log.errors import CorruptRecordException, KafkaStorageException
from sluice.log.file_cache import UNBOUNDED, CachedFile, FileCache
from sluice.log.patched_records import PatchedRecords, pwrite_all
from sluice.log.record_scan import record_offsets_and_timestamps
from sluice.protocol.records.batch import (
    BATCH_HEADER_SIZE,
    CURRENT_MAGIC,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    NO_PARTITION_LEADER_EPOCH,
    BatchHeader,
    compute_crc,
    read_header,
)

__all__ = [
    "LOG_FILE_SUFFIX",
    "Corruption",
    "FetchDataInfo",
    "FileRecords",
    "FileSlice",
    "LogOffsetMetadata",
    "TimestampAndOffset",
    "batch_problem",
    "head_problem",
]

LOG_FILE_SUFFIX = ".log"
HEADER_WINDOW = 8192  # bytes read per pread when hopping over small batches
RECOVERY_WINDOW = 1024 * 1024  # bytes read per pread when validating whole batches
_INT32_MAX = 2**31 - 1
_LENGTH = struct.Struct(">i")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA = 23
_new_header = BatchHeader.__new__

# SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER
_WRITE_AND_WAIT = 1 | 2 | 4


@functools.cache
def _libc(name: str, signature: str) -> Callable[..., int] | None:
    """A libc call (Linux) bound on first use, so ctypes stays off the start-up path;
    ``signature`` has a letter per argument (``i`` int, ``q`` int64, ``I`` unsigned int).
    None where libc lacks it. Used for ``sync_file_range`` (the file thread) and
    ``fallocate`` (not ``os.posix_fallocate``: where the filesystem cannot allocate,
    glibc's version writes a byte into every block)."""
    import ctypes

    function = getattr(ctypes.CDLL(None, use_errno=True), name, None)
    if function is not None:
        kinds = {"i": ctypes.c_int, "q": ctypes.c_int64, "I": ctypes.c_uint}
        function.argtypes = [kinds[letter] for letter in signature]
    return function


def allocate(fd: int, offset: int, length: int) -> bool:
    """Allocate the file's blocks in ``[offset, offset + length)``, growing the file to its
    end (zeros where nothing was written); False where it cannot be done (no such call,
    a filesystem without it, no space): the caller then writes without."""
    function = _libc("fallocate", "iiqq")
    return function is not None and function(fd, 0, offset, length) == 0


def _write_back(fd: int) -> None:
    """Write the file's dirty pages to the disk and wait (``sync_file_range``: data only,
    no journal commit nor disk cache flush; ``fdatasync`` where that call is missing).
    Durability is not the point: the kernel drops clean pages only."""
    sync_file_range = _libc("sync_file_range", "iqqI")
    if sync_file_range is None:
        os.fdatasync(fd)
    elif sync_file_range(fd, 0, 0, _WRITE_AND_WAIT) != 0:
        import ctypes

        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


class LogOffsetMetadata(NamedTuple):
    """An offset with the base offset and byte position of the segment batch holding it."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


class TimestampAndOffset(NamedTuple):
    """A ListOffsets answer: a record's timestamp, its offset and its batch's leader epoch."""

    timestamp: int
    offset: int
    leader_epoch: int | None = None


class Corruption(NamedTuple):
    """Where a data file stops holding whole, valid batches, and what is wrong there."""

    path: Path
    position: int
    problem: str

    def __str__(self) -> str:
        return f"{self.path} position {self.position}: {self.problem}"


def head_problem(
    buf: bytes | bytearray | memoryview, at: int, position: int, limit: int, min_offset: int
) -> str | None:
    """What is wrong with the batch head at ``buf[at:]``, which is at ``position`` of a
    file whose records end at ``limit``; None if it passes the checks every scan makes
    as it hops: a whole header, a ``batchLength`` that ends within the records, magic 2,
    a ``baseOffset`` not below ``min_offset`` (the previous batch's next offset, or the
    segment's base offset) and a ``lastOffsetDelta`` that is not negative. The CRC is
    not among them: it needs the whole batch (:func:`batch_problem`)."""
    remaining = limit - position
    if len(buf) - at < BATCH_HEADER_SIZE:
        if remaining < BATCH_HEADER_SIZE:
            return f"{remaining} bytes remain, fewer than a batch header ({BATCH_HEADER_SIZE})"
        return f"the file ends before the batch header ({len(buf) - at} bytes read)"
    base_offset, length = _OFFSET_AND_LENGTH.unpack_from(buf, at)
    if length < MIN_BATCH_LENGTH:
        return f"batchLength {length} is below the minimum {MIN_BATCH_LENGTH}"
    if position + LOG_OVERHEAD + length > limit:
        return (
            f"batchLength {length} runs past the end of the records "
            f"({remaining - LOG_OVERHEAD} bytes follow)"
        )
    magic = buf[at + MAGIC_OFFSET]
    if magic != CURRENT_MAGIC:
        return f"magic {magic}, not {CURRENT_MAGIC}"
    if base_offset < min_offset:
        return f"baseOffset {base_offset} is below {min_offset}, where the batch may start"
    delta = _LENGTH.unpack_from(buf, at + _LAST_OFFSET_DELTA)[0]
    if delta < 0:
        return f"lastOffsetDelta {delta} is negative"
    return None


def batch_problem(
    buf: bytes | bytearray | memoryview, at: int, header: BatchHeader, max_batch_size: int
) -> str | None:
    """What is wrong with the whole batch at ``buf[at:]`` whose head passed
    :func:`head_problem` (``header``); None if it is valid: at most ``max_batch_size``
    bytes, a recordsCount that is not negative, and its CRC32C."""
    size = header.size_in_bytes
    if size > max_batch_size:
        return f"the batch's {size} bytes exceed {max_batch_size}"
    if header.records_count < 0:
        return f"recordsCount {header.records_count} is negative"
    if len(buf) - at < size:
        return f"the file ends inside the batch ({len(buf) - at} of {size} bytes read)"
    crc = compute_crc(buf, at, size)
    if crc != header.crc:
        return f"CRC {header.crc} stored, {crc} computed"
    return None


class FileRecords(CachedFile):
    """A segment data file: appends at the end, positional reads, header scans."""

    __slots__ = ("_created", "_direct", "_length", "_on_disk", "_size", "opened_mtime_ms")

    def __init__(
        self,
        path: Path,
        fd: int,
        size: int,
        length: int | None = None,
        cache: FileCache = UNBOUNDED,
    ) -> None:
        """``fd``: a descriptor open on ``path`` to take over, or -1 to open one when
        first needed."""
        super().__init__(path, cache, fd)
        self._size = size  # bytes of records
        self._length = size if length is None else length  # bytes in the file, >= size
        self._direct: DirectWriter | None = None
        self._created = False  # the file was created: its directory is to be synced
        self._on_disk = fd >= 0  # the file exists (or may: found, or opened since)
        self.opened_mtime_ms = -1  # the file's modification time when opened (-1: unknown)

    @classmethod
    def open(cls, path: Path, cache: FileCache = UNBOUNDED, absent: bool = False) -> FileRecords:
        """The data file at ``path``, opened when first needed and created, if missing,
        by its first write; ``absent``: the caller knows there is none (not looked for)."""
        st = None
        if not absent:
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(path)
        records = cls(path, -1, 0 if st is None else st.st_size, cache=cache)
        if st is not None:
            records.opened_mtime_ms = st.st_mtime_ns // 1_000_000
            records._on_disk = True
        return records

    def _open_descriptor(self) -> int:
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self._created = True
        self._on_disk = True
        return fd

    @property
    def on_disk(self) -> bool:
        """Whether the file exists: it was found, or a descriptor was opened on it since
        (a new segment's is created by its first append)."""
        return self._on_disk

    def _descriptor_closed(self) -> None:
        if self._direct is not None:
            self._direct.close()

    def take_created(self) -> bool:
        """Whether the file was created since the last call: its directory entry is
        made durable by syncing the directory (a log's flush does)."""
        created, self._created = self._created, False
        return created

    @property
    def size(self) -> int:
        return self._size

    @property
    def stale_bytes(self) -> int:
        """Bytes past the records: what a reused file still holds of its old data, or
        the preallocated blocks not written yet."""
        return self._length - self._size

    def preallocate(self, size: int) -> None:
        """Allocate the file's first ``size`` bytes now (``preallocate``, for a new
        segment); nothing if the file is already that long or allocating fails."""
        if size > self._length:
            self._allocate_to(size)

    def _allocate_to(self, length: int) -> bool:
        """Allocate the blocks from the file's end to ``length``; False if that failed."""
        if not allocate(self.fileno(), self._length, length - self._length):
            return False
        self._length = length
        return True

    def append(
        self, data: bytes | bytearray | memoryview | PatchedRecords, direct: bool = False
    ) -> int:
        """Write ``data`` at the end of the file; returns the number of bytes written.
        ``direct``: its whole 4 KiB blocks bypass the page cache (a follower's append;
        sluice.log.direct), where the filesystem allows it."""
        if isinstance(data, PatchedRecords):  # heads and views, gathered by the kernel
            written = pwrite_all(self.fileno(), data.parts, self._size)
            self._grow(written)
            return written
        view = memoryview(data)
        total = len(view)
        if direct:
            if self._direct is None:
                self._direct = DirectWriter()
            if self._direct.append(self.path, self.fileno(), view, self._size):
                self._grow(total)
                return total
        written = 0
        fd = self.fileno()
        while written < total:
            written += os.pwrite(fd, view[written:], self._size + written)
        self._grow(total)
        return total

    def _grow(self, written: int) -> None:
        self._size += written
        if self._size > self._length:
            self._length = self._size

    def read(self, position: int, size: int) -> bytes:
        """Read up to ``size`` bytes at ``position`` (short only at end of file)."""
        fd = self.fileno()
        data = os.pread(fd, size, position)
        if len(data) == size or not data:
            return data
        parts = [data]
        got = len(data)
        while got < size:
            chunk = os.pread(fd, size - got, position + got)
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def truncate_to(self, size: int) -> int:
        """Cut the file to ``size`` bytes; returns the number of bytes removed."""
        if size > self._size or size < 0:
            raise KafkaStorageException(f"Cannot truncate {self.path} of {self._size} to {size}")
        removed = self._size - size
        if removed or self._length > size:
            os.ftruncate(self.fileno(), size)
            self._size = self._length = size
        return removed

    def trim(self) -> None:
        """Cut the old bytes a reused file holds past its records."""
        if self._length > self._size:
            os.ftruncate(self.fileno(), self._size)
            self._length = self._size

    def flush(self) -> None:
        os.fsync(self.fileno())

    def close(self) -> None:
        """Trim and close the file."""
        if not self.closed and self._length > self._size:
            self.trim()
        self.close_descriptor()

    def close_handler(self) -> None:
        """Close the file as it is, without trimming it (its log directory is offline)."""
        self.close_descriptor()

    def cache_dropper(self, write_back_first: bool = True) -> Callable[[], None]:
        """A call that drops the page-cache pages of this file's bytes, safe to run on
        another thread after this object closes: it holds its own descriptor.

        ``POSIX_FADV_DONTNEED`` drops clean pages only; of dirty ones it just starts the
        writeback. So with ``write_back_first`` the call first writes them and waits for
        the disk: a segment that retention removes sooner than the kernel writes data
        back (30 s by default) would otherwise keep its dirty pages until its file is
        deleted. With Kafka's 60 s ``file.delete.delay.ms`` that is no extra I/O (the
        kernel would write those pages before the file goes); with a delay under the
        kernel's writeback age it writes bytes that deletion would have discarded."""
        fd = os.dup(self.fileno())

        def drop() -> None:
            try:
                if write_back_first:
                    _write_back(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)

        return drop

    def delete(self) -> None:
        self.close_descriptor()
        self.path.unlink(missing_ok=True)

    def close_for_removal(self) -> Callable[[], None]:
        """Close the file now (on its owner's thread) and return what removes it, to run
        on any thread (the file thread: unlinking a large file frees its pages)."""
        self.close_descriptor()
        return functools.partial(self.path.unlink, missing_ok=True)

    def recycle_as(self, path: Path) -> FileRecords | None:
        """Rename this (retired) file to ``path`` and return it as an empty data file whose
        appends overwrite the old bytes, and so the pages the page cache still holds of
        them. This object is closed; slices of it fail instead of reading the new data.

        None (and closed) when this file is no longer at its path: a later segment removed
        with the same base offset took the ``*.deleted`` name, and that file may still be
        read by in-flight slices."""
        length = self._length
        try:
            ours = os.stat(self.path)
            mine = os.fstat(self.fileno())
            same = (ours.st_dev, ours.st_ino) == (mine.st_dev, mine.st_ino)
        except (FileNotFoundError, KafkaStorageException):
            same = False
        if not same:
            self.close_descriptor()
            return None
        os.replace(self.path, path)
        return FileRecords(path, self.take_descriptor(), 0, length, self._cache)

    def cached(self, samples: int = 64) -> bool:
        """Whether the page cache still holds the file, judged by reading one byte at
        ``samples`` spread positions without waiting for the disk (``RWF_NOWAIT``).
        True where the kernel or filesystem cannot answer."""
        if self._length == 0:
            return False
        fd = self.fileno()
        probe = bytearray(1)
        step = max(1, self._length // samples)
        try:
            for position in range(0, self._length, step):
                os.preadv(fd, [probe], position, os.RWF_NOWAIT)
        except BlockingIOError:
            return False
        except OSError:  # RWF_NOWAIT unsupported here: cannot tell
            return True
        return True

    def _may_be_absent(self) -> bool:
        return not self._on_disk

    def slice(self, position: int, size: int) -> FileSlice:
        return FileSlice(self, position, size)

    # -- header scans ------------------------------------------------------------------
    def batch_headers(self, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
        """Yield the headers of the complete batches between ``start`` and ``end``.

        Stops at the first incomplete or implausible batch. Small batches are read in
        windows of ``HEADER_WINDOW`` bytes; after a large batch only its 61-byte header is read.
        """
        limit = self._size if end is None else min(end, self._size)
        unpack = HEADER_STRUCT.unpack_from
        position = start
        window = b""
        window_start = 0
        read_size = HEADER_WINDOW
        while limit - position >= BATCH_HEADER_SIZE:
            at = position - window_start
            if at < 0 or at + BATCH_HEADER_SIZE > len(window):
                # The descriptor is asked for at each read: the caller may open other
                # files between two headers, and the cache may close this one meanwhile.
                window = os.pread(self.fileno(), min(read_size, limit - position), position)
                window_start = position
                at = 0
                if len(window) < BATCH_HEADER_SIZE:
                    return
            fields = unpack(window, at)
            length = fields[1]
            if length < MIN_BATCH_LENGTH or position + LOG_OVERHEAD + length > limit:
                return
            yield _new_header(BatchHeader, position, *fields)
            read_size = BATCH_HEADER_SIZE if length > HEADER_WINDOW else HEADER_WINDOW
            position += LOG_OVERHEAD + length

    def search_for_offset(
        self, target_offset: int, start_position: int, min_offset: int = 0, strict: bool = False
    ) -> BatchHeader | None:
        """The first batch at or after ``start_position`` whose last offset >= target.

        Hot path of every fetch: only baseOffset, batchLength, magic and lastOffsetDelta
        are read per hop; the full header only for the match. Each head hopped over is
        checked (:func:`head_problem`; ``min_offset``: the lowest base offset allowed
        first, the segment's), since a wrong length would hop into the middle of other
        batches: with ``strict`` a bad one raises :class:`CorruptRecordException` naming
        the file and position, without it the search ends (None)."""
        limit = self._size
        if start_position >= limit:
            return None
        fd = self.fileno()
        unpack_offset_length = _OFFSET_AND_LENGTH.unpack_from
        unpack_int = _LENGTH.unpack_from
        position = start_position
        expected = min_offset
        window = b""
        window_start = 0
        while position < limit:
            at = position - window_start
            if at + BATCH_HEADER_SIZE > len(window):
                window = os.pread(fd, min(HEADER_WINDOW, limit - position), position)
                window_start, at = position, 0
                if len(window) < BATCH_HEADER_SIZE:
                    self._bad_head(window, 0, position, expected, strict)
                    return None
            base_offset, length = unpack_offset_length(window, at)
            delta = unpack_int(window, at + _LAST_OFFSET_DELTA)[0]
            if (
                length < MIN_BATCH_LENGTH
                or position + LOG_OVERHEAD + length > limit
                or window[at + MAGIC_OFFSET] != CURRENT_MAGIC
                or base_offset < expected
                or delta < 0
            ):
                self._bad_head(window, at, position, expected, strict)
                return None
            if base_offset + delta >= target_offset:
                return _new_header(BatchHeader, position, *HEADER_STRUCT.unpack_from(window, at))
            expected = base_offset + delta + 1
            position += LOG_OVERHEAD + length
        return None

    def _bad_head(self, window: bytes, at: int, position: int, expected: int, strict: bool) -> None:
        """A search met a bad batch head: with ``strict``, raise what is wrong."""
        if not strict:
            return None
        problem = head_problem(window, at, position, self._size, expected)
        raise CorruptRecordException(f"{self.path} position {position}: {problem}")

    def last_whole_batch_end(self, start: int, limit: int) -> int:
        """The largest batch boundary <= ``limit``, hopping batch lengths from ``start``."""
        unpack = _LENGTH.unpack_from
        position = start
        window = b""
        window_start = 0
        limit = min(limit, self._size)
        if limit - position < LOG_OVERHEAD:
            return position
        fd = self.fileno()
        while limit - position >= LOG_OVERHEAD:
            at = position - window_start
            if at < 0 or at + LOG_OVERHEAD > len(window):
                window = os.pread(fd, min(HEADER_WINDOW, limit - position), position)
                window_start = position
                at = 0
                if len(window) < LOG_OVERHEAD:
                    break
            length = unpack(window, at + 8)[0]
            if length < MIN_BATCH_LENGTH or position + LOG_OVERHEAD + length > limit:
                break
            position += LOG_OVERHEAD + length
        return position

    def search_for_timestamp(
        self, target: int, start_position: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """The first record with timestamp >= ``target`` and offset >= ``starting_offset``,
        scanning batch headers from ``start_position`` and decoding only the matching batch."""
        for header in self.batch_headers(start_position):
            if header.max_timestamp < target or header.last_offset < starting_offset:
                continue
            epoch = header.partition_leader_epoch
            leader_epoch = None if epoch == NO_PARTITION_LEADER_EPOCH else epoch
            batch = self.read(header.position, header.batch_length + LOG_OVERHEAD)
            records = record_offsets_and_timestamps(batch)
            if records is None:  # undecodable payload: answer at batch granularity
                offset = max(header.base_offset, starting_offset)
                return TimestampAndOffset(header.max_timestamp, offset, leader_epoch)
            for offset, timestamp in records:
                if timestamp >= target and offset >= starting_offset:
                    return TimestampAndOffset(timestamp, offset, leader_epoch)
        return None

    def valid_batches(
        self, base_offset: int, max_batch_size: int, verify_from: int | None = None
    ) -> Iterator[BatchHeader | Corruption]:
        """Yield the batches from position 0 that recovery keeps, then, if it stopped
        before the end, a :class:`Corruption` saying where and why.

        Every batch must be whole, in offset order and within ``[base_offset,
        base_offset + 2**31)`` (:func:`head_problem`); from the first batch holding
        ``verify_from`` on (from the start when None) its size is checked against
        ``max_batch_size`` and its CRC too. Batches before it (flushed before a crash:
        below the recovery point) are only hopped over, reading their headers."""
        size = self._size
        position = 0
        window = b""
        window_start = 0
        min_offset = base_offset
        verify_at = -1 if verify_from is None else verify_from
        while position < size:
            at = position - window_start
            if at < 0 or at + BATCH_HEADER_SIZE > len(window):
                window = self.read(position, min(RECOVERY_WINDOW, size - position))
                window_start, at = position, 0
            problem = head_problem(window, at, position, size, min_offset)
            if problem is not None:
                yield Corruption(self.path, position, problem)
                return
            header = read_header(window, at)._replace(position=position)
            if header.last_offset - base_offset > _INT32_MAX:
                problem = f"lastOffset {header.last_offset} does not fit the segment"
                yield Corruption(self.path, position, problem)
                return
            batch_size = header.size_in_bytes
            if header.last_offset >= verify_at:
                if at + batch_size > len(window):
                    length = max(batch_size, min(RECOVERY_WINDOW, size - position))
                    window = self.read(position, length)
                    window_start, at = position, 0
                problem = batch_problem(window, at, header, max_batch_size)
                if problem is not None:
                    yield Corruption(self.path, position, problem)
                    return
            yield header
            min_offset = header.last_offset + 1
            position += batch_size


class FileSlice:
    """A byte range of a segment file holding whole batches; ``fileno``/``position``/``size``
    are what ``os.sendfile`` needs, :meth:`read` copies the bytes instead."""

    __slots__ = ("file", "position", "size")

    def __init__(self, file: FileRecords, position: int, size: int) -> None:
        self.file = file
        self.position = position
        self.size = size

    @property
    def path(self) -> Path:
        return self.file.path

    def fileno(self) -> int:
        return self.file.fileno()

    def read(self) -> bytes:
        """The slice's bytes (one ``pread``)."""
        if self.size == 0:
            return b""
        return self.file.read(self.position, self.size)

    def batches(self) -> Iterator[BatchHeader]:
        """Headers of the batches in the slice; positions are relative to the file."""
        return self.file.batch_headers(self.position, self.position + self.size)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileSlice({self.file.path.name}, position={self.position}, size={self.size})"


class FetchDataInfo:
    """The result of a log read: where the fetch started and the slice of whole batches to
    send (empty when there is nothing to return)."""

    __slots__ = ("fetch_offset_metadata", "first_entry_incomplete", "records")

    def __init__(
        self,
        fetch_offset_metadata: LogOffsetMetadata,
        records: FileSlice,
        first_entry_incomplete: bool = False,
    ) -> None:
        self.fetch_offset_metadata = fetch_offset_metadata
        self.records = records
        self.first_entry_incomplete = first_entry_incomplete

    @property
    def size(self) -> int:
        return self.records.size

    def read(self) -> bytes:
        return self.records.read()

    def __repr__(self) -> str:
        return f"FetchDataInfo({self.fetch_offset_metadata}, {self.records!r})"
