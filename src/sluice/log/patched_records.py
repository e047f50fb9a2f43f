"""Batches stored with new offsets without copying them: a patched head plus the original bytes.

A produce request's record batches arrive as a read-only view of the request frame. The
leader must rewrite two fields of each batch header before storing it, the baseOffset
and the partitionLeaderEpoch, both in the first :data:`PATCHED_HEAD_BYTES` bytes and
both outside the CRC. Instead of copying every batch into a writable buffer to patch
it (one full copy of all produced bytes), :class:`PatchedRecords` copies only each
batch's head and hands the file the list ``[head, rest, head, rest, ...]``, written
with one ``pwritev``: the kernel gathers the parts, no byte of a record is copied in
Python.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from sluice.protocol.records.batch import PARTITION_LEADER_EPOCH_OFFSET, BatchHeader

__all__ = ["PATCHED_HEAD_BYTES", "PatchedRecords", "pwrite_all"]

PATCHED_HEAD_BYTES = PARTITION_LEADER_EPOCH_OFFSET + 4
"""baseOffset (int64), batchLength (int32), partitionLeaderEpoch (int32)."""

_IOV_MAX = 1024  # Linux's limit on buffers per pwritev call


class PatchedRecords:
    """Record batches as writable head copies interleaved with read-only views of the rest.

    ``head(position)`` is the writable copy of the head of the batch at ``position``
    (relative to the original buffer), for the offset and epoch setters.
    """

    __slots__ = ("_heads", "parts", "size")

    def __init__(self, records: memoryview, headers: Iterable[BatchHeader]) -> None:
        self._heads: dict[int, bytearray] = {}
        self.parts: list[bytearray | memoryview] = []
        self.size = 0
        for header in headers:
            start, end = header.position, header.end_position
            head = bytearray(records[start : start + PATCHED_HEAD_BYTES])
            self._heads[start] = head
            self.parts.append(head)
            self.parts.append(records[start + PATCHED_HEAD_BYTES : end])
            self.size += end - start

    def head(self, position: int) -> bytearray:
        return self._heads[position]

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)


def pwrite_all(fd: int, parts: list[bytearray | memoryview], position: int) -> int:
    """Write ``parts`` back to back at ``position``, retrying short writes; returns the
    number of bytes written."""
    total = 0
    pending = [memoryview(part) for part in parts if len(part)]
    while pending:
        batch = pending[:_IOV_MAX]
        written = os.pwritev(fd, batch, position + total)
        total += written
        # Drop what was written, possibly splitting a part written halfway.
        index = 0
        while index < len(batch) and written >= len(batch[index]):
            written -= len(batch[index])
            index += 1
        rest = pending[index:]
        if written and rest:
            rest[0] = rest[0][written:]
        pending = rest
    return total
