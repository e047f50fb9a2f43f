"""An inactive segment's page-cache pages are freed once every recent reader has fetched
past it (``segment.drop.read.pages``; sluice.log.local_log.LocalLog.note_read).

Segment i holds offsets 2i and 2i + 1 (sluice_log_helpers.segmented_log), so a reader
fetching from offset 2i + 2 has read it. What the kernel dropped is probed with
``RWF_NOWAIT`` reads, each dropped file once (a probe that misses may start readahead),
and each such scenario runs through ``attempts`` in the ``disk`` fixture's directory
(tests/log/conftest.py)."""

from __future__ import annotations

import functools
import queue
from collections.abc import Callable
from pathlib import Path

import pytest
from sluice_log_helpers import ManualClock, attempts, segmented_log, values_of

from sluice.log import Log, deletion
from sluice.log.file_records import FileRecords
from sluice.log.readers import READER_IDLE_MS

MAX = 1 << 20


def _files(log: Log) -> list[FileRecords]:
    return [segment.log for segment in log.segments]


def _values(log: Log, offset: int) -> list[tuple[int, bytes | None]]:
    return values_of(log.read(offset, MAX).records.read())


def test_pages_go_once_every_reader_has_read_past_them(disk: Path) -> None:
    attempts(disk, _every_reader_has_read_past)


def _every_reader_has_read_past(disk: Path) -> None:
    log = segmented_log(disk, ManualClock(), segments=3, segment_recycle=False)
    files = _files(log)
    log.read(0, MAX, reader="a")
    log.read(5, MAX, reader="b")
    assert all(f.cached() for f in files)  # a has read nothing yet
    log.read(4, MAX, reader="a")  # both past segments 0 and 1
    assert [f.cached() for f in files] == [False, False, True, True]
    log.read(6, MAX, reader="a")
    assert log.segments[2].log.cached()  # b is still in segment 2
    log.read(6, MAX, reader="b")
    assert not files[2].cached()
    assert files[3].cached()  # the active segment never goes
    # The records are all there, read back from the disk.
    assert [offset for offset, _ in _values(log, 0)] == [0, 1]
    assert _values(log, 2)[0][1] == b"002" + b"x" * 197
    log.close()


def test_off_or_with_no_reader_named_the_pages_stay(disk: Path) -> None:
    attempts(disk, _pages_stay)


def _pages_stay(disk: Path) -> None:
    off = segmented_log(disk / "off", ManualClock(), 2, segment_drop_read_pages=False)
    off.read(4, MAX, reader="a")
    unnamed = segmented_log(disk / "unnamed", ManualClock(), 2)
    unnamed.read(4, MAX)  # an internal read: no reader
    assert all(f.cached() for f in _files(off) + _files(unnamed))
    off.close()
    unnamed.close()


def test_a_reader_that_stopped_fetching_holds_pages_only_for_the_idle_limit(
    disk: Path,
) -> None:
    attempts(disk, _idle_reader)


def _idle_reader(disk: Path) -> None:
    clock = ManualClock()
    log = segmented_log(disk, clock, segments=2)
    files = _files(log)
    log.read(0, MAX, reader="stopped")
    clock.advance(READER_IDLE_MS)
    log.read(4, MAX, reader="tail")
    assert all(f.cached() for f in files)  # idle for exactly the limit: still counts
    clock.advance(1)
    log.read(4, MAX, reader="tail")
    assert [f.cached() for f in files] == [False, False, True]
    log.close()


def test_a_truncation_forgets_the_readers(disk: Path) -> None:
    """After a truncation the readers' offsets may name records that are gone; a slow
    reader seen before it no longer holds what follows."""
    attempts(disk, _truncation)


def _truncation(disk: Path) -> None:
    log = segmented_log(disk, ManualClock(), segments=3)
    log.read(0, MAX, reader="slow")
    log.read(6, MAX, reader="fast")
    assert log.truncate_to(4)
    files = _files(log)  # segments 0 and 1, and the (empty) active one from offset 4
    log.read(4, MAX, reader="fast")
    assert [f.cached() for f in files[:2]] == [False, False]
    log.close()


def test_on_the_deletion_thread_dirty_pages_are_written_back_and_dropped(
    disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the ``sluice broker`` process's deletion thread runs, run here in turn."""
    work: queue.Queue[Callable[[], None]] = queue.Queue()
    monkeypatch.setattr(deletion, "_queue", work)
    attempts(disk, functools.partial(_on_the_deletion_thread, work))


def _on_the_deletion_thread(work: queue.Queue[Callable[[], None]], disk: Path) -> None:
    log = segmented_log(disk, ManualClock(), segments=2, fsync=False)
    files = _files(log)
    log.read(4, MAX, reader="a")
    assert work.qsize() == 2  # a dropper per read segment, queued for the thread
    while not work.empty():
        work.get()()
    assert [f.cached() for f in files] == [False, False, True]
    log.read(4, MAX, reader="a")
    assert work.empty()  # each segment is dropped once
    log.close()
