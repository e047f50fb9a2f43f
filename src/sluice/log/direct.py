"""Direct I/O for replicated appends: whole blocks go to the disk, not the page cache.

A follower writes every byte its leader wrote; in the page cache those bytes would take
memory that the leader's own data (which consumers and followers read) could use, and
on a VM each new page-cache page costs a fault on the host. So a follower's append writes the
whole 4 KiB blocks it covers with ``O_DIRECT`` from a reused, page-aligned staging
buffer, and only the partial blocks at either end through the page cache, as every
append does otherwise. A block is therefore always written one way only: the partial
block at the end of one append is the partial block at the start of the next, and
``O_DIRECT`` writes only blocks that lie wholly inside one append. The file's size is
what buffered writes leave (the log's size, or the end of a preallocated file:
file_records.py); reads go through the page cache (which the kernel keeps coherent with
direct writes) and find the direct-written blocks on disk.

Where the filesystem refuses ``O_DIRECT`` (tmpfs, for one: ``EINVAL``), the file is
written through the page cache.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
from pathlib import Path

from sluice.log.patched_records import pwrite_all

__all__ = ["BLOCK_SIZE", "DirectWriter"]

BLOCK_SIZE = 4096  # the largest logical block size in common use: aligned for any device
_STAGING_STEP = 1 << 20
_REFUSED = -2
_O_DIRECT = getattr(os, "O_DIRECT", 0)  # Linux


class _Staging(threading.local):
    """One page-aligned buffer per thread (in-process clusters run a loop per broker),
    grown to the largest append and then reused: its pages are touched once."""

    buffer: mmap.mmap | None = None

    def get(self, size: int) -> mmap.mmap:
        buffer = self.buffer
        if buffer is None or len(buffer) < size:
            if buffer is not None:
                buffer.close()
            buffer = self.buffer = mmap.mmap(-1, -(-size // _STAGING_STEP) * _STAGING_STEP)
        return buffer


_staging = _Staging()


class DirectWriter:
    """The ``O_DIRECT`` descriptor of one segment file, opened on first use."""

    __slots__ = ("_fd",)

    def __init__(self) -> None:
        self._fd = -1

    def append(self, path: Path, buffered_fd: int, view: memoryview, position: int) -> bool:
        """Write ``view`` at ``position`` (the file's end): its whole blocks with
        ``O_DIRECT``, the partial blocks at either end through ``buffered_fd``. False,
        with nothing written, when the append covers no whole block or the filesystem
        refuses direct I/O: the caller writes it through the page cache."""
        size = len(view)
        head = -position % BLOCK_SIZE
        body = (size - head) // BLOCK_SIZE * BLOCK_SIZE if size > head else 0
        if body == 0:
            return False
        fd = self._open(path, buffered_fd)
        if fd < 0:
            return False
        staging = _staging.get(body)
        staging[:body] = view[head : head + body]
        with memoryview(staging) as aligned:
            try:
                pwrite_all(fd, [aligned[:body]], position + head)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                self._refuse()
                return False
        if head:
            pwrite_all(buffered_fd, [view[:head]], position)
        if head + body < size:
            pwrite_all(buffered_fd, [view[head + body :]], position + head + body)
        return True

    def _open(self, path: Path, buffered_fd: int) -> int:
        """The file opened again with ``O_DIRECT``: through ``buffered_fd`` where /proc
        has it, which stays right while another thread renames the file (a segment
        taking its final name, next_segment.py), else by ``path``."""
        if self._fd == -1:
            try:
                if not _O_DIRECT:
                    raise OSError(errno.EINVAL, "no O_DIRECT on this platform")
                try:
                    self._fd = os.open(f"/proc/self/fd/{buffered_fd}", os.O_WRONLY | _O_DIRECT)
                except FileNotFoundError:
                    self._fd = os.open(path, os.O_WRONLY | _O_DIRECT)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                self._fd = _REFUSED
        return self._fd

    def _refuse(self) -> None:
        self.close()
        self._fd = _REFUSED

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        if self._fd != _REFUSED:
            self._fd = -1
