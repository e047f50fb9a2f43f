"""A log's next segment files, created before its roll on the file thread.

Creating a file changes the file system's metadata, and under sustained writes that can
wait for tens of milliseconds, which a roll would spend on the event loop. So once the
active segment is half full (``segment.bytes``) the log asks its background file work
(file_work.py), where it runs off the event loop, to create the next segment's files
under temporary names: ``<stem>.log.next``, ``<stem>.index.next`` and
``<stem>.timeindex.next``, ``stem`` being the active segment's base offset then. The
roll takes them, open, for the new segment; the same thread then gives them their final
names (the indexes first, the data file last: :meth:`LogSegment.take_final_names`).
The transaction index is not among them: it is created at its final name, and only when
a transaction aborts.

A crash before the final names leaves ``.next`` files, which the loader settles before
it reads the directory (:func:`settle_next_files`): a data file holding a batch is named
after that batch's base offset and its indexes are rebuilt; an empty one, and every
``.next`` index, is removed.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from pathlib import Path

from sluice.log.file_records import LOG_FILE_SUFFIX, FileRecords
from sluice.log.file_work import FileWork
from sluice.log.index import INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX
from sluice.log.segment import filename_prefix_from_offset

__all__ = ["NEXT_FILE_SUFFIX", "NextSegment", "PreparedFiles", "settle_next_files"]

logger = logging.getLogger(__name__)

NEXT_FILE_SUFFIX = ".next"
_SUFFIXES = (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX)


class PreparedFiles:
    """The three files of a next segment, open under their ``.next`` names."""

    __slots__ = ("index_fd", "index_path", "log", "time_index_fd", "time_index_path")

    def __init__(
        self,
        log: FileRecords,
        index_path: Path,
        index_fd: int,
        time_index_path: Path,
        time_index_fd: int,
    ) -> None:
        self.log = log
        self.index_path = index_path
        self.index_fd = index_fd
        self.time_index_path = time_index_path
        self.time_index_fd = time_index_fd

    @classmethod
    def create(cls, directory: Path, stem_offset: int, preallocate_bytes: int) -> PreparedFiles:
        """Create the files (each must not exist yet); ``preallocate_bytes`` > 0 allocates
        the data file's blocks (Kafka's ``preallocate``). Nothing is left open or on disk
        when one cannot be made."""
        stem = filename_prefix_from_offset(stem_offset)
        paths = [directory / f"{stem}{suffix}{NEXT_FILE_SUFFIX}" for suffix in _SUFFIXES]
        fds: list[int] = []
        try:
            for path in paths:
                fds.append(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644))
            log = FileRecords(paths[0], fds[0], 0)
            if preallocate_bytes > 0:
                log.preallocate(preallocate_bytes)
        except BaseException:
            for fd, path in zip(fds, paths, strict=False):
                os.close(fd)
                path.unlink(missing_ok=True)
            raise
        return cls(log, paths[1], fds[1], paths[2], fds[2])

    def discard(self) -> None:
        """Close and remove the files (any thread)."""
        self.log.delete()
        os.close(self.index_fd)
        self.index_path.unlink(missing_ok=True)
        os.close(self.time_index_fd)
        self.time_index_path.unlink(missing_ok=True)


class NextSegment:
    """One log's slot for its next segment's files: asked for on the log's thread, made on
    the file thread, taken by the log's roll. At most one set is made or held at a time."""

    __slots__ = ("_asked", "_closed", "_directory", "_file_work", "_lock", "_ready")

    def __init__(self, directory: Path, file_work: FileWork) -> None:
        self._directory = directory
        self._file_work = file_work
        self._lock = threading.Lock()
        self._ready: PreparedFiles | None = None
        self._asked = False
        self._closed = False

    @property
    def ready(self) -> bool:
        return self._ready is not None

    def ask(self, stem_offset: int, preallocate_bytes: int) -> bool:
        """Have the file thread create a set named after ``stem_offset`` unless one is
        held or being made; says whether it asked."""
        with self._lock:
            if self._asked or self._ready is not None or self._closed:
                return False
            self._asked = True
        make = functools.partial(self._make, self._directory, stem_offset, preallocate_bytes)
        self._file_work.submit(make)
        return True

    def _make(self, directory: Path, stem_offset: int, preallocate_bytes: int) -> None:
        files = None
        try:
            files = PreparedFiles.create(directory, stem_offset, preallocate_bytes)
        except FileNotFoundError:
            pass  # the partition directory was renamed for deletion meanwhile
        except OSError as exc:  # the roll creates its files itself, as without this
            logger.warning("%s: could not create the next segment's files: %s",
                           directory.name, exc)  # fmt: skip
        with self._lock:
            self._asked = False
            if files is not None and not self._closed:
                self._ready, files = files, None
        if files is not None:
            files.discard()

    def take(self) -> PreparedFiles | None:
        """The set made for the next roll, if one is ready (then no longer held)."""
        with self._lock:
            files, self._ready = self._ready, None
        return files

    def close(self) -> None:
        """Remove a set still held, now; one still being made is removed when made."""
        with self._lock:
            self._closed = True
            files, self._ready = self._ready, None
        if files is not None:
            files.discard()


def _first_base_offset(path: Path) -> int | None:
    records = FileRecords.open(path)
    try:
        header = next(iter(records.batch_headers()), None)
    finally:
        records.close()
    return None if header is None else header.base_offset


def settle_next_files(directory: Path) -> None:
    """Complete what a crash interrupted (see the module docstring): before the loader
    reads ``directory``, a ``.next`` data file with a batch takes the name of that batch's
    base offset (the indexes of that name, if any, are removed, so they are rebuilt);
    ``.next`` files of any other kind, and empty ``.next`` data files, are removed."""
    data_suffix = LOG_FILE_SUFFIX + NEXT_FILE_SUFFIX
    leftovers = sorted(p for p in directory.iterdir() if p.name.endswith(NEXT_FILE_SUFFIX))
    for path in leftovers:
        if not path.name.endswith(data_suffix):
            path.unlink(missing_ok=True)
            continue
        base = _first_base_offset(path)
        if base is None:
            path.unlink(missing_ok=True)
            continue
        stem = filename_prefix_from_offset(base)
        target = directory / f"{stem}{LOG_FILE_SUFFIX}"
        if target.exists():
            # Not made by a roll (its base would be new): keep both, load neither twice.
            logger.error("%s: %s holds batches from offset %d, and %s exists; left as it is",
                         directory.name, path.name, base, target.name)  # fmt: skip
            continue
        for suffix in (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX):
            (directory / f"{stem}{suffix}").unlink(missing_ok=True)
        os.replace(path, target)
        logger.info("%s: named the next segment's data file %s (after a crash)",
                    directory.name, target.name)  # fmt: skip
