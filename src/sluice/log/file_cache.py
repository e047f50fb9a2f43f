"""The open descriptors of a broker's segment files: opened when first needed, at most
``log.open.files.max`` of them open at once.

Kafka keeps every segment's data file open for the segment's life and maps its indexes
once they are first used (``LazyIndex``); it has no bound on open files, so a broker
needs an open-file limit above three descriptors per segment. Sluice goes one step
further: every segment file (``.log``, ``.index``, ``.timeindex``, ``.txnindex``) is a
:class:`CachedFile`, opened on its first read or write, and the broker's
:class:`FileCache` closes the least recently used ones when more than its capacity are
open. A closed file is opened again, by its path, the next time it is used; what it
holds in memory (its size, an index's loaded entries) stays. So a partition costs no
descriptor until it is used, and those that are used keep theirs while they are among
the most recently used.

Recency is approximated as the CLOCK algorithm does: each use of a descriptor
(:meth:`CachedFile.fileno`) sets a flag, one store on the hot path; when the cache is
over its capacity it walks the files from the least recently opened, clearing set flags
(a second chance) and closing the first file whose flag is clear.

Rules for the code holding descriptors, which make closing a file at any open safe:

- use a descriptor from :meth:`CachedFile.fileno` before the next file is opened (call
  ``fileno()`` again before each system call in a loop that yields or opens others);
  where one must outlive that (a background fsync, a response sent across event-loop
  iterations), use a ``dup`` of it; the file being opened is never the one closed;
- the files belong to the thread that made the cache (the broker's event loop): files
  opened on another thread are not tracked (and so never closed by the cache) until
  their owner hands them over (:meth:`FileCache.adopt`) or releases them
  (:meth:`CachedFile.release`); files being renamed on another thread are ``pinned``.
"""

from __future__ import annotations

import os
import resource
import threading
from collections import OrderedDict
from pathlib import Path

from sluice.log.errors import KafkaStorageException

__all__ = ["UNBOUNDED", "CachedFile", "FileCache", "default_capacity"]

_MIN_CAPACITY = 16
_MIN_RESERVE = 256


def default_capacity(soft_limit: int | None = None) -> int:
    """Three quarters of the process's open-file limit (``RLIMIT_NOFILE``), at least
    256 below it, for segment files: the rest is for connections, checkpoints and the
    files the broker opens briefly."""
    if soft_limit is None:
        soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft_limit == resource.RLIM_INFINITY:
        soft_limit = 1 << 20
    reserve = max(soft_limit // 4, _MIN_RESERVE)
    return max(_MIN_CAPACITY, soft_limit - reserve)


class CachedFile:
    """A file whose descriptor is opened on first use and may be closed by its
    :class:`FileCache` while it is idle; subclasses say how it is opened
    (:meth:`_open_descriptor`) and what to drop when it closes (:meth:`_descriptor_closed`)."""

    __slots__ = ("_cache", "_closed", "_fd", "_used", "path", "pinned")

    def __init__(self, path: Path, cache: FileCache, fd: int = -1) -> None:
        """``fd``: a descriptor already open on ``path``, which this file takes over (and
        the cache tracks, on its thread)."""
        self.path = path
        self._cache = cache
        self._fd = fd
        self._used = True
        self._closed = False
        self.pinned = False  # never closed by the cache (renamed on another thread)
        if fd >= 0:
            cache.opened(self)

    def fileno(self) -> int:
        """The open descriptor, opened now if it is not (KafkaStorageException once
        :meth:`close_descriptor` closed it for good)."""
        fd = self._fd
        if fd >= 0:
            self._used = True
            return fd
        return self._reopen()

    def _reopen(self) -> int:
        if self._closed:
            raise KafkaStorageException(f"{self.path} is closed")
        fd = self._open_descriptor()
        self._fd = fd
        self._used = True
        self._cache.opened(self)
        return fd

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is open now."""
        return self._fd >= 0

    @property
    def closed(self) -> bool:
        """Closed for good: no descriptor will be opened again."""
        return self._closed

    def _open_descriptor(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def _descriptor_closed(self) -> None:
        """Called after the descriptor was closed (by the cache or a release)."""

    def release(self) -> None:
        """Close the descriptor if open; the file opens again when next used."""
        fd = self._fd
        if fd >= 0:
            self._cache.forget(self)
            self._fd = -1
            os.close(fd)
            self._descriptor_closed()

    def close_descriptor(self) -> None:
        """Close the descriptor for good (the object stays, for its path and state)."""
        self.release()
        self._closed = True

    def take_descriptor(self) -> int:
        """Hand the open descriptor over (opened now if needed) and close this file for
        good without closing it: the new owner tracks it (:meth:`FileCache.adopt`)."""
        fd = self.fileno()
        self._cache.forget(self)
        self._fd = -1
        self._closed = True
        self._descriptor_closed()
        return fd

    def rename_to(self, path: Path) -> None:
        """Rename the file (open or not); one that was never created (nothing written
        yet) just takes the new path."""
        try:
            os.replace(self.path, path)
        except FileNotFoundError:
            if self._fd >= 0 or not self._may_be_absent():
                raise
        self.path = path

    def _may_be_absent(self) -> bool:
        """Whether the file may not exist yet because nothing was written to it."""
        return False

    def move_to(self, cache: FileCache) -> None:
        """Have ``cache`` track this file's descriptor from now on (on its thread)."""
        if cache is self._cache:
            return
        self._cache.forget(self)
        self._cache = cache
        if self._fd >= 0:
            cache.adopt(self)

    def evict(self) -> None:
        """Called by the cache: close the idle descriptor."""
        fd = self._fd
        if fd >= 0:
            self._fd = -1
            os.close(fd)
            self._descriptor_closed()


class FileCache:
    """The open :class:`CachedFile` descriptors of one broker's logs, at most
    ``capacity`` (None: unbounded, nothing tracked). Used on the thread that made it."""

    __slots__ = ("_files", "_owner", "capacity", "evictions")

    def __init__(self, capacity: int | None = None) -> None:
        if capacity is not None and capacity < 1:
            raise ValueError(f"capacity must be positive, not {capacity}")
        self.capacity = capacity
        self._files: OrderedDict[CachedFile, None] = OrderedDict()
        self._owner = threading.get_ident()
        self.evictions = 0  # descriptors closed to stay within the capacity

    def __len__(self) -> int:
        """The tracked descriptors open now."""
        return len(self._files)

    def opened(self, file: CachedFile) -> None:
        """``file`` opened its descriptor: track it and, over the capacity, close the
        least recently used. Untracked on another thread than the owner's."""
        capacity = self.capacity
        if capacity is None or threading.get_ident() != self._owner:
            return
        files = self._files
        files[file] = None
        if len(files) > capacity:
            self._evict(len(files) - capacity, file)

    adopt = opened
    """Track a file opened elsewhere (a prepared segment's files taken by a roll)."""

    def forget(self, file: CachedFile) -> None:
        """``file`` closed its descriptor itself (on another thread: it was not tracked)."""
        if self.capacity is not None and threading.get_ident() == self._owner:
            self._files.pop(file, None)

    def _evict(self, count: int, opening: CachedFile) -> None:
        """Close ``count`` descriptors, never ``opening``'s (being opened: its caller is
        about to use it)."""
        files = self._files
        # Each file is passed over at most twice (once to clear its flag); pinned ones
        # stay, so the walk is bounded rather than certain to reach the capacity.
        budget = 2 * len(files)
        while count > 0 and budget > 0 and files:
            budget -= 1
            file, _ = files.popitem(last=False)
            if file._used or file.pinned or file is opening:
                file._used = False
                files[file] = None
                continue
            file.evict()
            self.evictions += 1
            count -= 1


UNBOUNDED = FileCache()
"""The cache of files opened without one (a log on its own, tools, tests): it closes
nothing and tracks nothing, so it may be shared by every thread."""
