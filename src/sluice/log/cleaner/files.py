"""Files of the log cleaner: its checkpoint, the ``.cleaned``/``.swap`` segment files of a
swap, and the startup step that completes or rolls back a swap a crash interrupted.

A cleaned group of segments becomes one new segment named after the group's first base
offset. It is swapped in as Kafka does:

1. written as ``<base>.log.cleaned`` (+ ``.index.cleaned``, ``.timeindex.cleaned`` once they
   have entries), fsynced;
2. ``<base>.swapend`` is written (atomically) with the group's end offset: the base offset of
   the segment that follows the group;
3. renamed ``.cleaned`` -> ``.swap``: the index files first, the ``.log`` file last. The rename
   of ``<base>.log.swap`` is the commit point;
4. the replaced segments are renamed ``*.deleted`` (removed after ``file.delete.delay.ms``);
5. the ``.swap`` files are renamed to their final names and ``<base>.swapend`` is removed.

On startup (:func:`complete_interrupted_swaps`, run by the loader before anything else): a
``<base>.log.swap`` means the swap committed, so every ordinary segment whose base offset lies
in ``[base, end)`` is deleted and the swap file is renamed into place (its indexes are rebuilt
by the loader). ``end`` comes from ``<base>.swapend``; Kafka, which has no such file, uses the
next offset of the swap segment, which misses old segments whose batches were all removed (they
would come back with superseded records), so that is only the fallback. Index ``.swap`` files
and ``.swapend`` files without a committed swap are dropped, and ``.cleaned`` files are
removed by the loader: an uncommitted cleaning leaves the old segments untouched.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from sluice.base.clock import Clock
from sluice.log.checkpoint import OffsetCheckpointFile, fsync_directory
from sluice.log.config import LogConfig
from sluice.log.file_records import LOG_FILE_SUFFIX, FileRecords
from sluice.log.index import INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX
from sluice.log.segment import LogSegment, filename_prefix_from_offset

__all__ = [
    "CLEANED_SUFFIX",
    "CLEANER_CHECKPOINT",
    "SWAP_SUFFIX",
    "commit_cleaned_segment",
    "complete_interrupted_swaps",
    "finish_swap",
    "open_cleaned_segment",
    "open_swap_segment",
    "read_cleaner_checkpoint",
    "remove_cleaning_files",
    "truncate_cleaner_checkpoint",
    "write_cleaner_checkpoint",
]

logger = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SWAP_END_SUFFIX = ".swapend"
_SEGMENT_SUFFIXES = (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX)
# Commit order: indexes first, the data file last.
_COMMIT_ORDER = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX)
_SWAP_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)\.swap$")
_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")
_SWAP_END_FILE = re.compile(r"^(\d{20})\.swapend$")


# -- checkpoint -----------------------------------------------------------------------------
def _checkpoint(log_dir: Path) -> OffsetCheckpointFile:
    return OffsetCheckpointFile(log_dir / CLEANER_CHECKPOINT)


def read_cleaner_checkpoint(log_dir: Path) -> int | None:
    """The first dirty offset recorded for the partition in ``log_dir`` (None if never)."""
    offsets = _checkpoint(log_dir).read()
    return next(iter(offsets.values()), None)


def write_cleaner_checkpoint(log_dir: Path, topic: str, partition: int, offset: int) -> None:
    """Record that everything below ``offset`` has been cleaned (atomic, durable)."""
    _checkpoint(log_dir).write({(topic, partition): offset})


def truncate_cleaner_checkpoint(log_dir: Path, topic: str, partition: int, offset: int) -> None:
    """Kafka's ``maybeTruncateCheckpoint``: lower the checkpoint to ``offset`` after the log
    was truncated below it (re-appended data there is dirty again)."""
    if not (log_dir / CLEANER_CHECKPOINT).exists():
        return
    current = read_cleaner_checkpoint(log_dir)
    if current is not None and current > offset:
        write_cleaner_checkpoint(log_dir, topic, partition, offset)


# -- cleaned and swap segments --------------------------------------------------------------
def _paths(directory: Path, base_offset: int, suffix: str) -> list[Path]:
    stem = filename_prefix_from_offset(base_offset)
    return [directory / f"{stem}{kind}{suffix}" for kind in _SEGMENT_SUFFIXES]


def _swap_end_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{filename_prefix_from_offset(base_offset)}{SWAP_END_SUFFIX}"


def remove_cleaning_files(directory: Path, base_offset: int) -> None:
    """Delete the ``.cleaned``, ``.swap`` and ``.swapend`` files of ``base_offset`` (an aborted
    cleaning, whose old segments are still in place)."""
    for suffix in (CLEANED_SUFFIX, SWAP_SUFFIX):
        for path in _paths(directory, base_offset, suffix):
            path.unlink(missing_ok=True)
    _swap_end_path(directory, base_offset).unlink(missing_ok=True)


def finish_swap(directory: Path, base_offset: int) -> None:
    """The swap of ``base_offset`` is complete: its ``.swapend`` file is no longer needed."""
    _swap_end_path(directory, base_offset).unlink(missing_ok=True)


def _open(
    directory: Path, base_offset: int, config: LogConfig, clock: Clock, suffix: str
) -> LogSegment:
    return LogSegment.open(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.max_index_size,
        clock=clock,
        file_suffix=suffix,
    )


def open_cleaned_segment(
    directory: Path, base_offset: int, config: LogConfig, clock: Clock
) -> LogSegment:
    """A new, empty segment written as ``<base>.*.cleaned`` (leftovers are discarded first);
    its data file is created now, since its rename commits the swap even when it stays
    empty (its indexes are created by their first entries, if any)."""
    remove_cleaning_files(directory, base_offset)
    segment = _open(directory, base_offset, config, clock, CLEANED_SUFFIX)
    segment.log.fileno()
    return segment


def commit_cleaned_segment(
    directory: Path, base_offset: int, end_offset: int, last_modified_ms: int
) -> None:
    """Record the group's ``end_offset`` in ``<base>.swapend``, then rename the (flushed,
    closed) ``.cleaned`` files to ``.swap``, the data file last, after giving it the replaced
    segments' last-modified time as Kafka does."""
    stem = filename_prefix_from_offset(base_offset)
    end_file = _swap_end_path(directory, base_offset)
    tmp = end_file.with_name(end_file.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"{end_offset}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, end_file)
    fsync_directory(directory)  # the end offset is durable before the commit rename
    data = directory / f"{stem}{LOG_FILE_SUFFIX}{CLEANED_SUFFIX}"
    seconds = last_modified_ms / 1000
    os.utime(data, (seconds, seconds))
    for kind in _COMMIT_ORDER:
        cleaned = directory / f"{stem}{kind}{CLEANED_SUFFIX}"
        if kind == LOG_FILE_SUFFIX or cleaned.exists():  # an index without entries has none
            os.replace(cleaned, directory / f"{stem}{kind}{SWAP_SUFFIX}")
    fsync_directory(directory)


def open_swap_segment(
    directory: Path, base_offset: int, config: LogConfig, clock: Clock
) -> LogSegment:
    """Open the committed ``.swap`` files of ``base_offset`` as a segment."""
    return _open(directory, base_offset, config, clock, SWAP_SUFFIX)


# -- startup recovery -----------------------------------------------------------------------
def _next_offset(path: Path, base_offset: int) -> int:
    records = FileRecords.open(path)
    try:
        next_offset = base_offset
        for header in records.batch_headers():
            next_offset = header.next_offset
        return next_offset
    finally:
        records.close()


def _recorded_end(path: Path | None) -> int:
    if path is None:
        return -1
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return -1  # torn or missing: fall back to the swap segment's next offset


def complete_interrupted_swaps(directory: Path) -> list[int]:
    """Finish every committed swap in ``directory`` and drop uncommitted swap files; returns
    the base offsets of the swaps completed. See the module docstring."""
    swaps: dict[int, dict[str, Path]] = {}
    ends: dict[int, Path] = {}
    for path in directory.iterdir():
        match = _SWAP_FILE.match(path.name)
        if match is not None:
            swaps.setdefault(int(match.group(1)), {})[match.group(2)] = path
        end_match = _SWAP_END_FILE.match(path.name)
        if end_match is not None:
            ends[int(end_match.group(1))] = path
    for base, path in ends.items():
        if LOG_FILE_SUFFIX not in swaps.get(base, {}):
            path.unlink(missing_ok=True)  # not committed, or already completed
    if not swaps:
        return []
    completed: list[int] = []
    for base in sorted(swaps):
        files = swaps[base]
        for kind, path in files.items():
            if kind != LOG_FILE_SUFFIX:
                path.unlink(missing_ok=True)  # indexes are rebuilt from the data file
        swap = files.get(LOG_FILE_SUFFIX)
        if swap is None:
            continue
        end = max(_next_offset(swap, base), base + 1, _recorded_end(ends.get(base)))
        replaced = 0
        for path in directory.iterdir():
            match = _SEGMENT_FILE.match(path.name)
            if match is not None and base <= int(match.group(1)) < end:
                path.unlink(missing_ok=True)
                replaced += path.suffix == LOG_FILE_SUFFIX
        os.replace(swap, directory / f"{filename_prefix_from_offset(base)}{LOG_FILE_SUFFIX}")
        if base in ends:
            ends[base].unlink(missing_ok=True)
        logger.warning(
            "%s: completed an interrupted cleaner swap at offset %d (replaced %d segments)",
            directory.name, base, replaced,
        )  # fmt: skip
        completed.append(base)
    fsync_directory(directory)
    return completed
