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


class TransactionIndex:
    """The aborted transactions of one segment, kept in memory and in ``<base>.txnindex``
    (created on the first entry, as Kafka does)."""

    __slots__ = ("_entries", "_fd", "path")

    def __init__(self, path: Path, new: bool = False) -> None:
        """``new``: no file can be at ``path`` yet (a segment at a new base offset), so
        none is looked for: the look-up waits for the directory while another thread
        creates or renames files in it (next_segment.py)."""
        self.path = path
        self._fd: int | None = None
        self._entries: list[AbortedTxn] = []
        if not new and path.exists():
            self._entries = self._read(path)

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
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, _ENTRY.pack(_VERSION, *txn))

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
        self._close_fd()
        if keep:
            self.path.write_bytes(b"".join(_ENTRY.pack(_VERSION, *t) for t in keep))
        else:
            self.path.unlink(missing_ok=True)

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def fileno(self) -> int | None:
        """The open descriptor, None before the first entry is written."""
        return self._fd

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        self.flush()
        self._close_fd()

    def close_handler(self) -> None:
        """Close the file without syncing it (its log directory is offline)."""
        self._close_fd()

    def rename_to(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self._close_fd()
        self.path.unlink(missing_ok=True)
        self._entries = []

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path.name}, entries={len(self._entries)})"
