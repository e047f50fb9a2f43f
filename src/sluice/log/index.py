"""Sparse offset and time indexes of a log segment, in Kafka's on-disk format.

``<base>.index`` holds 8-byte entries (relative offset int32, file position int32) and
``<base>.timeindex`` 12-byte entries (timestamp int64, relative offset int32), big-endian.
Files are written with plain positional I/O and always have their exact size (no
preallocation, so nothing to trim on close); entries are loaded lazily into arrays and
searched with :mod:`bisect`.

As Kafka's ``LazyIndex``, an index touches its file only when first needed: its entry
count comes from the file's size, its descriptor is opened (through the broker's file
cache, sluice.log.file_cache) to load, append or truncate entries, and the file is
created by the first entry. An index without entries may have no file: it reads as
empty. Once loaded, look-ups use the arrays alone, so the cache may close the
descriptor of an index that is only read.
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import ClassVar, NamedTuple

from sluice.log.errors import CorruptIndexException, InvalidOffsetException
from sluice.log.file_cache import UNBOUNDED, CachedFile, FileCache

__all__ = [
    "INDEX_FILE_SUFFIX",
    "TIME_INDEX_FILE_SUFFIX",
    "OffsetIndex",
    "OffsetPosition",
    "TimeIndex",
    "TimestampOffset",
]

INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
_INT32_MAX = 2**31 - 1
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_LITTLE_ENDIAN = sys.byteorder == "little"


class OffsetPosition(NamedTuple):
    """An offset index entry: an absolute ``offset`` and the file ``position`` of its batch."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A time index entry: the max ``timestamp`` seen up to (and at) absolute ``offset``."""

    timestamp: int
    offset: int


class AbstractIndex(CachedFile):
    """Shared file handling of the two indexes: lazy open and load, positional append,
    truncation. The file is created by the first entry written (or taken open from a
    prepared segment), so an index without entries may have no file."""

    entry_size: ClassVar[int] = 8
    __slots__ = ("_dirty", "_entries", "_loaded", "_max_entries", "base_offset")

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int,
        fd: int | None = None,
        cache: FileCache = UNBOUNDED,
        absent: bool = False,
    ) -> None:
        """The index file at ``path``, opened when first needed; or ``fd``, a descriptor
        already open on it (a prepared segment's, next_segment.py); ``absent``: the
        caller knows there is no file (not looked for)."""
        super().__init__(path, cache, -1 if fd is None else fd)
        self.base_offset = base_offset
        self._max_entries = max(1, max_index_size // self.entry_size)
        size = 0
        if fd is not None:
            size = os.fstat(fd).st_size
        elif not absent:
            with contextlib.suppress(FileNotFoundError):
                size = os.stat(path).st_size
        self._entries = size // self.entry_size
        self._loaded = False
        self._dirty = False

    # -- overridden by the concrete indexes --------------------------------------------
    def _parse(self, data: bytes) -> None:
        raise NotImplementedError

    def _clear_to(self, entries: int) -> None:
        raise NotImplementedError

    # -- common ------------------------------------------------------------------------
    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    def is_full(self) -> bool:
        """True once the index reached ``segment.index.bytes``: the segment should roll."""
        return self._entries >= self._max_entries

    def size_in_bytes(self) -> int:
        return self._entries * self.entry_size

    def _may_be_absent(self) -> bool:
        return self._entries == 0

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            size = self._entries * self.entry_size
            data = os.pread(self.fileno(), size, 0) if size else b""
            if len(data) != size:
                raise CorruptIndexException(f"Short read of index file {self.path}")
            self._parse(data)
            self._loaded = True

    def _read_raw_entry(self, n: int) -> bytes:
        data = os.pread(self.fileno(), self.entry_size, n * self.entry_size)
        if len(data) != self.entry_size:
            raise CorruptIndexException(f"Short read of index file {self.path}")
        return data

    def _write_entry(self, packed: bytes) -> None:
        os.pwrite(self.fileno(), packed, self._entries * self.entry_size)
        self._entries += 1
        self._dirty = True

    def _truncate_entries(self, entries: int) -> None:
        if entries < self._entries:
            self._ensure_loaded()
            self._clear_to(entries)
            os.ftruncate(self.fileno(), entries * self.entry_size)
            self._entries = entries
            self._dirty = True

    def reset(self) -> None:
        """Remove every entry (before a rebuild)."""
        self._clear_to(0)
        self._loaded = True
        if self._entries or self.is_open:
            os.ftruncate(self.fileno(), 0)
            self._dirty = True
        else:  # a missing file is an empty index; a left-over one of another size is cut
            with contextlib.suppress(FileNotFoundError):
                os.truncate(self.path, 0)
        self._entries = 0

    def check_file_size(self) -> None:
        try:
            size = os.fstat(self._fd).st_size if self.is_open else os.stat(self.path).st_size
        except FileNotFoundError:
            return
        if size % self.entry_size:
            raise CorruptIndexException(
                f"Index file {self.path.name} is corrupt: size {size} is not a multiple "
                f"of the entry size {self.entry_size}"
            )

    def flush(self) -> None:
        """fsync the index file if entries changed since the last flush."""
        file = self.take_unsynced()
        if file is not None:
            os.fsync(file.fileno())

    def take_unsynced(self) -> AbstractIndex | None:
        """This index if its entries changed since the last sync, which they then count
        as (for a flush whose fsyncs run elsewhere); None when clean."""
        if self._dirty and not self.closed:
            self._dirty = False
            return self
        return None

    def close(self) -> None:
        self.close_descriptor()

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise InvalidOffsetException(
                f"Offset {offset} cannot be stored relative to base offset {self.base_offset}"
            )
        return relative


class OffsetIndex(AbstractIndex):
    """Maps offsets to physical positions in the segment's .log file, one entry per
    ``index.interval.bytes`` of appended data; lookups return the largest entry <= target."""

    entry_size = 8
    __slots__ = ("_offsets", "_positions")

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int,
        fd: int | None = None,
        cache: FileCache = UNBOUNDED,
        absent: bool = False,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, fd, cache, absent)
        self._offsets: array[int] = array("i")
        self._positions: array[int] = array("i")

    def _parse(self, data: bytes) -> None:
        raw = array("i")
        raw.frombytes(data)
        if _LITTLE_ENDIAN:
            raw.byteswap()
        self._offsets = raw[0::2]
        self._positions = raw[1::2]

    def _clear_to(self, entries: int) -> None:
        del self._offsets[entries:]
        del self._positions[entries:]

    def entry(self, n: int) -> OffsetPosition:
        self._ensure_loaded()
        return OffsetPosition(self.base_offset + self._offsets[n], self._positions[n])

    def last_entry(self) -> OffsetPosition:
        """The last entry, or ``(base_offset, 0)`` when empty (read without a full load)."""
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        if self._loaded:
            return OffsetPosition(self.base_offset + self._offsets[-1], self._positions[-1])
        relative, position = _OFFSET_ENTRY.unpack(self._read_raw_entry(self._entries - 1))
        return OffsetPosition(self.base_offset + relative, position)

    @property
    def last_offset(self) -> int:
        return self.last_entry().offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``target_offset`` (``(base, 0)`` if none)."""
        relative = target_offset - self.base_offset
        if relative < 0 or self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        self._ensure_loaded()
        slot = bisect_right(self._offsets, min(relative, _INT32_MAX)) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._offsets[slot], self._positions[slot])

    def lookup_by_position(self, target_position: int) -> OffsetPosition:
        """The entry with the largest position <= ``target_position`` (``(base, 0)`` if
        none): a batch boundary from which to hop towards a byte limit."""
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        self._ensure_loaded()
        slot = bisect_right(self._positions, target_position) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._offsets[slot], self._positions[slot])

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets must be strictly increasing."""
        self._ensure_loaded()
        relative = self._relative(offset)
        if self._entries and relative <= self._offsets[-1]:
            raise InvalidOffsetException(
                f"Attempt to append offset {offset} to {self.path.name} whose last offset "
                f"is {self.base_offset + self._offsets[-1]}"
            )
        self._write_entry(_OFFSET_ENTRY.pack(relative, position))
        self._offsets.append(relative)
        self._positions.append(position)

    def truncate_to(self, offset: int) -> None:
        """Remove all entries with offset >= ``offset``."""
        self._ensure_loaded()
        relative = offset - self.base_offset
        keep = 0 if relative <= 0 else bisect_left(self._offsets, min(relative, _INT32_MAX + 1))
        self._truncate_entries(keep)

    def sanity_check(self, log_size: int) -> None:
        """Kafka's checks: whole entries, last offset >= base, last position within the log."""
        self.check_file_size()
        if self._entries:
            last = self.last_entry()
            if last.offset < self.base_offset or not 0 <= last.position <= log_size:
                raise CorruptIndexException(
                    f"Corrupt index {self.path.name}: last entry {last} for base offset "
                    f"{self.base_offset} and log size {log_size}"
                )


class TimeIndex(AbstractIndex):
    """Maps timestamps to offsets: each entry records the max timestamp seen so far and the
    offset holding it; entries are appended only when the timestamp grows."""

    entry_size = 12
    __slots__ = ("_offsets", "_timestamps")

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int,
        fd: int | None = None,
        cache: FileCache = UNBOUNDED,
        absent: bool = False,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, fd, cache, absent)
        self._timestamps: array[int] = array("q")
        self._offsets: array[int] = array("i")

    def _parse(self, data: bytes) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")
        for timestamp, relative in _TIME_ENTRY.iter_unpack(data):
            self._timestamps.append(timestamp)
            self._offsets.append(relative)

    def _clear_to(self, entries: int) -> None:
        del self._timestamps[entries:]
        del self._offsets[entries:]

    def entry(self, n: int) -> TimestampOffset:
        self._ensure_loaded()
        return TimestampOffset(self._timestamps[n], self.base_offset + self._offsets[n])

    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when empty (read without a full load)."""
        if self._entries == 0:
            return TimestampOffset(-1, self.base_offset)
        if self._loaded:
            return TimestampOffset(self._timestamps[-1], self.base_offset + self._offsets[-1])
        timestamp, relative = _TIME_ENTRY.unpack(self._read_raw_entry(self._entries - 1))
        return TimestampOffset(timestamp, self.base_offset + relative)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target (``(-1, base_offset)`` if none)."""
        if self._entries == 0:
            return TimestampOffset(-1, self.base_offset)
        self._ensure_loaded()
        slot = bisect_right(self._timestamps, target_timestamp) - 1
        if slot < 0:
            return TimestampOffset(-1, self.base_offset)
        return TimestampOffset(self._timestamps[slot], self.base_offset + self._offsets[slot])

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Append ``(timestamp, offset)`` if the timestamp is larger than the last entry's.

        The size limit is advisory here (it only makes the segment roll), so
        ``skip_full_check`` is accepted for Kafka parity but never needed.
        """
        del skip_full_check
        self._ensure_loaded()
        relative = self._relative(offset)
        if self._entries == 0:
            if timestamp <= -1:  # Kafka's empty-index last entry is (NO_TIMESTAMP, base)
                return False
        else:
            if timestamp <= self._timestamps[-1]:
                return False
            if relative < self._offsets[-1]:
                raise InvalidOffsetException(
                    f"Attempt to append offset {offset} to {self.path.name} whose last "
                    f"offset is {self.base_offset + self._offsets[-1]}"
                )
        self._write_entry(_TIME_ENTRY.pack(timestamp, relative))
        self._timestamps.append(timestamp)
        self._offsets.append(relative)
        return True

    def truncate_to(self, offset: int) -> None:
        """Remove all entries with offset >= ``offset``."""
        self._ensure_loaded()
        relative = offset - self.base_offset
        keep = 0 if relative <= 0 else bisect_left(self._offsets, min(relative, _INT32_MAX + 1))
        self._truncate_entries(keep)

    def sanity_check(self) -> None:
        """Kafka's checks: whole entries, last offset >= base, last timestamp >= first."""
        self.check_file_size()
        if self._entries:
            last = self.last_entry()
            first_timestamp = _TIME_ENTRY.unpack(self._read_raw_entry(0))[0]
            if last.offset < self.base_offset or last.timestamp < first_timestamp:
                raise CorruptIndexException(
                    f"Corrupt time index {self.path.name}: last entry {last}, first "
                    f"timestamp {first_timestamp}, base offset {self.base_offset}"
                )
