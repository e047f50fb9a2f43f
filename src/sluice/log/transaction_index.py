"""``TransactionIndex``: the aborted transactions whose ABORT marker lies in one segment.

Follows Kafka's ``TransactionIndex`` (``<base>.txnindex``): a file of fixed-size entries,
one per aborted transaction, written when the marker is appended. A read_committed fetch
collects the entries overlapping the fetched range (``AbortedTxn.first_offset`` is what the
fetch response carries, with the producer id) so the consumer can drop the aborted batches.
Each entry is ``version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 |
lastStableOffset int64`` (34 bytes, big-endian), Kafka's own layout.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

from sluice.log.file_cache import UNBOUNDED, CachedFile, FileCache

__all__ = ["TXN_INDEX_FILE_SUFFIX", "AbortedTxn", "TransactionIndex"]

log = logging.getLogger(__name__)

TXN_INDEX_FILE_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


class AbortedTxn(NamedTuple):
    """An aborted transaction: its producer, first and last (marker) offsets, and the
    partition's last stable offset once the marker was written."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex(CachedFile):
    """The aborted transactions of one segment, kept in memory and in ``<base>.txnindex``
    (created on the first entry, as Kafka does; its descriptor opened for appends when
    needed, through the broker's file cache)."""

    __slots__ = ("_dirty", "_entries")

    def __init__(self, path: Path, absent: bool = False, cache: FileCache = UNBOUNDED) -> None:
        """``absent``: the caller knows there is no file at ``path`` (a segment at a new
        base offset, or not among the directory's names), so none is looked for: the
        look-up would wait for the directory while another thread creates or renames
        files in it (next_segment.py)."""
        super().__init__(path, cache)
        self._entries: list[AbortedTxn] = []
        self._dirty = False
        if not absent and path.exists():
            self._entries = self._read(path)

    def _open_descriptor(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _may_be_absent(self) -> bool:
        return not self._entries

    @staticmethod
    def _read(path: Path) -> list[AbortedTxn]:
        data = path.read_bytes()
        usable = len(data) - len(data) % _ENTRY.size
        if usable != len(data):
            log.warning("%s: dropping a torn entry of %d bytes", path.name, len(data) - usable)
        entries = []
        for pos in range(0, usable, _ENTRY.size):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != _VERSION:
                log.warning("%s: stopping at an entry of unknown version %d", path.name, version)
                break
            entries.append(AbortedTxn(pid, first, last, lso))
        return entries

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    @property
    def last_offset(self) -> int:
        """The marker offset of the last entry (-1 when empty)."""
        return self._entries[-1].last_offset if self._entries else -1

    def append(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction; markers come in offset order."""
        if txn.last_offset <= self.last_offset:
            raise ValueError(
                f"The last offset of appended transaction {txn} is not larger than the last "
                f"offset {self.last_offset} in {self.path.name}"
            )
        self._entries.append(txn)
        os.write(self.fileno(), _ENTRY.pack(_VERSION, *txn))
        self._dirty = True

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Entries of transactions overlapping ``[fetch_offset, upper_bound)``."""
        return [
            t
            for t in self._entries
            if t.last_offset >= fetch_offset and t.first_offset < upper_bound
        ]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset``."""
        keep = [t for t in self._entries if t.last_offset < offset]
        if len(keep) == len(self._entries):
            return
        self._entries = keep
        self.release()
        if keep:
            self.path.write_bytes(b"".join(_ENTRY.pack(_VERSION, *t) for t in keep))
        else:
            self.path.unlink(missing_ok=True)
        self._dirty = bool(keep)

    def flush(self) -> None:
        file = self.take_unsynced()
        if file is not None:
            os.fsync(file.fileno())

    def take_unsynced(self) -> TransactionIndex | None:
        """This index if entries were written since the last sync, which they then count
        as; None when clean."""
        if self._dirty and not self.closed:
            self._dirty = False
            return self
        return None

    def close(self) -> None:
        self.flush()
        self.close_descriptor()

    def close_handler(self) -> None:
        """Close the file without syncing it (its log directory is offline)."""
        self.close_descriptor()

    def delete(self) -> None:
        self.close_descriptor()
        self.path.unlink(missing_ok=True)
        self._entries = []

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path.name}, entries={len(self._entries)})"
