"""Opening a partition directory: find segments, check or rebuild indexes, recover after a crash.

Mirrors Kafka's ``LogLoader``: leftover ``.deleted``/``.cleaned``/``.tmp`` files are removed,
a next segment's ``.next`` files are named or removed (next_segment.py),
index files without a ``.log`` are dropped, a segment whose index fails the sanity check, or
whose offset index is missing while its data file is larger than ``index.interval.bytes``
(so that an entry may have been due), is rebuilt, and, when the previous shutdown was not clean,
every segment holding offsets at or above the recovery point is recovered; the first one
that needed truncation makes every later segment suspect, so those are deleted.

Indexes are created by their first entry (index.py), so a missing index of a smaller
segment is an empty one. After a clean shutdown the loader reads no index entries and
no data but the last segment's tail after its last offset index entry (for the log end
offset) and the index files' last entries (their sanity check); it leaves no descriptor
open: the files open again, through the log's file cache, when first used.

What lies below the recovery point was flushed before the crash: it is not validated
again (segments wholly below it are not read at all; in the segment holding it the
batches before it are only hopped over by their headers) and never truncated, except
where a bad header in the last segment leaves no other way to find the log end. A
corrupt batch there is kept and reported when read (CORRUPT_MESSAGE), as Kafka does.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Container
from pathlib import Path
from typing import NamedTuple

from sluice.base.clock import Clock
from sluice.log.cleaner.files import complete_interrupted_swaps
from sluice.log.config import LogConfig
from sluice.log.errors import CorruptIndexException
from sluice.log.file_cache import UNBOUNDED, FileCache
from sluice.log.file_records import LOG_FILE_SUFFIX, FileRecords
from sluice.log.index import INDEX_FILE_SUFFIX
from sluice.log.next_segment import NEXT_FILE_SUFFIX, PreparedFiles, settle_next_files
from sluice.log.segment import LogSegment, SegmentRecovery

__all__ = [
    "CLEANED_FILE_SUFFIX",
    "DELETED_FILE_SUFFIX",
    "RECOVERY_MAX_BATCH_SIZE",
    "LoadedLog",
    "load_log",
]

log = logging.getLogger(__name__)

DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
SWAP_END_FILE_SUFFIX = ".swapend"
TEMP_FILE_SUFFIX = ".tmp"
# The batch length is already bounded by the file size, so recovery does not re-apply
# max.message.bytes (lowering it must not turn stored batches into "corruption").
RECOVERY_MAX_BATCH_SIZE = 2**31 - 1
_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")


class LoadedLog(NamedTuple):
    """The state of a partition log once loaded (and recovered if needed)."""

    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int


def open_segment(
    directory: Path,
    base_offset: int,
    config: LogConfig,
    clock: Clock,
    recycled: FileRecords | None = None,
    prepared: PreparedFiles | None = None,
    cache: FileCache = UNBOUNDED,
    present: Container[str] | None = None,
) -> LogSegment:
    return LogSegment.open(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.max_index_size,
        clock=clock,
        recycled=recycled,
        prepared=prepared,
        segment_bytes=config.segment_bytes,
        preallocate=config.preallocate,
        cache=cache,
        present=present,
    )


def _settled_names(directory: Path, names: list[str] | None) -> list[str]:
    """The names in ``directory`` (``names`` if the caller listed it) once interrupted
    swaps and next segments are settled (listed again only where one was)."""
    if names is None:
        names = os.listdir(directory)
    unsettled = False
    for name in names:
        if name.endswith((SWAP_FILE_SUFFIX, SWAP_END_FILE_SUFFIX, NEXT_FILE_SUFFIX)):
            unsettled = True
            break
    if not unsettled:
        return names
    complete_interrupted_swaps(directory)  # the log cleaner's .swap files (cleaner_files.py)
    settle_next_files(directory)  # files a roll took before they had their names
    return os.listdir(directory)


def _remove_temp_files(directory: Path, names: list[str]) -> tuple[list[int], set[int]]:
    """Delete leftovers of interrupted operations; return the base offsets of .log files
    and those of them with an offset index file."""
    bases: set[int] = set()
    indexes: dict[int, list[str]] = {}
    for name in names:
        if name.endswith((DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, TEMP_FILE_SUFFIX)):
            (directory / name).unlink(missing_ok=True)
            continue
        match = _SEGMENT_FILE.match(name)
        if match is None:
            continue
        base = int(match.group(1))
        if match.group(2) == LOG_FILE_SUFFIX:
            bases.add(base)
        else:
            indexes.setdefault(base, []).append(name)
    indexed: set[int] = set()
    for base, index_names in indexes.items():
        if base not in bases:
            for name in index_names:  # orphan index: its data file is gone
                (directory / name).unlink(missing_ok=True)
        elif any(name.endswith(INDEX_FILE_SUFFIX) for name in index_names):
            indexed.add(base)
    return sorted(bases), indexed


def load_log(
    directory: Path,
    config: LogConfig,
    clock: Clock,
    *,
    had_clean_shutdown: bool,
    recovery_point: int,
    log_start_offset: int,
    cache: FileCache = UNBOUNDED,
    names: list[str] | None = None,
) -> LoadedLog:
    """Load every segment of ``directory``, its files to be opened through ``cache``;
    ``names``: the directory's, if the caller listed it. See the module docstring for
    what is checked."""
    segments: list[LogSegment] = []
    names = _settled_names(directory, names)
    present = frozenset(names)
    bases, indexed = _remove_temp_files(directory, names)
    for i, base in enumerate(bases):
        segment = open_segment(directory, base, config, clock, cache=cache, present=present)
        try:
            segment.sanity_check()
            # An index is created by its first entry: one may be missing because none
            # was due (a single batch larger than the interval), or lost in a crash.
            rebuild = base not in indexed and segment.size > config.index_interval_bytes
        except CorruptIndexException as exc:
            log.warning("%s: rebuilding indexes of segment %d: %s", directory.name, base, exc)
            rebuild = True
        if rebuild:
            upper = bases[i + 1] if i + 1 < len(bases) else None
            if had_clean_shutdown or (upper is not None and upper <= recovery_point):
                result = segment.recover(
                    RECOVERY_MAX_BATCH_SIZE, recovery_point, keep_unverified=upper is not None
                )
                _report(directory, segment, result, recovery_point, None)
            # else the recovery of the unflushed segments below rebuilds them
        segments.append(segment)

    if not had_clean_shutdown:
        segments = _recover_unflushed(directory, segments, recovery_point)
    if not segments:
        base = max(log_start_offset, 0)
        segments.append(open_segment(directory, base, config, clock, cache=cache, present=present))

    next_offset = max(segments[-1].read_next_offset(), segments[-1].base_offset)
    start = max(log_start_offset, segments[0].base_offset)
    if start > next_offset:
        log.warning(
            "%s: log start offset %d is beyond the log end offset %d; starting empty at %d",
            directory.name,
            start,
            next_offset,
            start,
        )
        for segment in segments:
            segment.delete()
        segments = [open_segment(directory, start, config, clock, cache=cache, present=())]
        next_offset = start
    while len(segments) > 1 and segments[1].base_offset <= start:
        segments.pop(0).delete()
    for segment in segments:
        segment.release_files()
    return LoadedLog(segments, start, next_offset, next_offset)


def _recover_unflushed(
    directory: Path, segments: list[LogSegment], recovery_point: int
) -> list[LogSegment]:
    """Recover the segments holding offsets at or above ``recovery_point``; a truncation
    deletes the segments after it (their data came later than a torn or bad write)."""
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if upper is not None and upper <= recovery_point:
            continue  # wholly flushed before the crash
        result = segment.recover(
            RECOVERY_MAX_BATCH_SIZE, recovery_point, keep_unverified=upper is not None
        )
        segment.flush()
        _report(directory, segment, result, recovery_point, len(segments) - i - 1)
        if result.truncated:
            for later in segments[i + 1 :]:
                later.delete()
            return segments[: i + 1]
    return segments


def _report(
    directory: Path,
    segment: LogSegment,
    result: SegmentRecovery,
    recovery_point: int,
    later: int | None,
) -> None:
    """Log what a segment's recovery found: one line, with the file and position;
    ``later``: how many later segments the truncation deletes."""
    if result.kept:
        log.error(
            "%s: corrupt batch below the recovery point %d, kept as it is (reads reaching "
            "it answer CORRUPT_MESSAGE): %s",
            directory.name, recovery_point, result.stop,
        )  # fmt: skip
    elif result.truncated:
        log.warning(
            "%s: recovery truncated %d bytes of segment %d at %s%s",
            directory.name, result.truncated, segment.base_offset, result.stop,
            "" if later is None else f"; deleting {later} later segments",
        )  # fmt: skip
