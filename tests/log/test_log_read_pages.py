"""An inactive segment's page-cache pages are freed once every recent reader has fetched
past it (``segment.drop.read.pages``; sluice.log.local_log.LocalLog.note_read).

Segment i holds offsets 2i and 2i + 1 (sluice_log_helpers.segmented_log), so a reader
fetching from offset 2i + 2 has read it. Pages are freed only where the deletion thread
runs (the ``sluice broker`` process): here its queue is a plain one, whose work each
scenario runs in turn (``Deleter``). What the kernel dropped is probed with
``RWF_NOWAIT`` reads, each dropped file once (a probe that misses may start readahead),
and each such scenario runs through ``attempts`` in the ``disk`` fixture's directory
(tests/log/conftest.py)."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sluice_log_helpers import (
    Deleter,
    ManualClock,
    attempts,
    deletion_thread,
    segmented_log,
    values_of,
)

from sluice.log import Log, deletion
from sluice.log.file_records import FileRecords
from sluice.log.readers import READER_IDLE_MS

MAX = 1 << 20
ON = {"segment_drop_read_pages": True}  # off by default


def _files(log: Log) -> list[FileRecords]:
    return [segment.log for segment in log.segments]


def _values(log: Log, offset: int) -> list[tuple[int, bytes | None]]:
    return values_of(log.read(offset, MAX).records.read())


def test_pages_go_once_every_reader_has_read_past_them(disk: Path, deleter: Deleter) -> None:
    attempts(disk, functools.partial(_every_reader_has_read_past, deleter))


def _every_reader_has_read_past(deleter: Deleter, disk: Path) -> None:
    log = segmented_log(disk, ManualClock(), segments=3, segment_recycle=False, **ON)
    files = _files(log)
    log.read(0, MAX, reader="a")
    log.read(5, MAX, reader="b")
    assert deleter.run() == 0  # a has read nothing yet
    assert all(f.cached() for f in files)
    log.read(4, MAX, reader="a")  # both past segments 0 and 1
    assert deleter.run() == 2
    assert [f.cached() for f in files] == [False, False, True, True]
    log.read(6, MAX, reader="a")
    assert deleter.run() == 0
    assert log.segments[2].log.cached()  # b is still in segment 2
    log.read(6, MAX, reader="b")
    assert deleter.run() == 1
    assert not files[2].cached()
    assert files[3].cached()  # the active segment never goes
    # The records are all there, read back from the disk.
    assert [offset for offset, _ in _values(log, 0)] == [0, 1]
    assert _values(log, 2)[0][1] == b"002" + b"x" * 197
    log.close()


def test_off_by_default_with_no_reader_named_or_without_the_deletion_thread_pages_stay(
    disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts(disk, functools.partial(_pages_stay, monkeypatch))


def _pages_stay(monkeypatch: pytest.MonkeyPatch, disk: Path) -> None:
    monkeypatch.setattr(deletion, "_queue", None)
    inline = segmented_log(disk / "inline", ManualClock(), 2, **ON)
    inline.read(4, MAX, reader="a")  # an embedded broker: no deletion thread
    with deletion_thread() as deleter:
        off = segmented_log(disk / "off", ManualClock(), 2)  # the default
        off.read(4, MAX, reader="a")
        unnamed = segmented_log(disk / "unnamed", ManualClock(), 2, **ON)
        unnamed.read(4, MAX)  # an internal read: no reader
        assert deleter.run() == 0
    assert all(f.cached() for f in _files(inline) + _files(off) + _files(unnamed))
    assert (inline.pages_freed_below, off.pages_freed_below, unnamed.pages_freed_below) == (
        0, 0, 0,
    )  # fmt: skip
    for log in (inline, off, unnamed):
        log.close()


def test_a_reader_that_stopped_fetching_holds_pages_only_for_the_idle_limit(
    disk: Path, deleter: Deleter
) -> None:
    attempts(disk, functools.partial(_idle_reader, deleter))


def _idle_reader(deleter: Deleter, disk: Path) -> None:
    clock = ManualClock()
    log = segmented_log(disk, clock, segments=2, **ON)
    files = _files(log)
    log.read(0, MAX, reader="stopped")
    clock.advance(READER_IDLE_MS)
    log.read(4, MAX, reader="tail")
    assert deleter.run() == 0  # idle for exactly the limit: still counts
    clock.advance(1)
    log.read(4, MAX, reader="tail")
    assert deleter.run() == 2
    assert [f.cached() for f in files] == [False, False, True]
    log.close()


def test_a_truncation_forgets_the_readers(disk: Path, deleter: Deleter) -> None:
    """After a truncation the readers' offsets may name records that are gone; a slow
    reader seen before it no longer holds what follows."""
    attempts(disk, functools.partial(_truncation, deleter))


def _truncation(deleter: Deleter, disk: Path) -> None:
    log = segmented_log(disk, ManualClock(), segments=3, **ON)
    log.read(0, MAX, reader="slow")
    log.read(6, MAX, reader="fast")
    assert log.truncate_to(4)
    deleter.run()  # the removed segments' own drops
    files = _files(log)  # segments 0 and 1, and the (empty) active one from offset 4
    log.read(4, MAX, reader="fast")
    assert deleter.run() == 2
    assert [f.cached() for f in files[:2]] == [False, False]
    log.close()


def test_dirty_pages_are_written_back_and_dropped_each_segment_once(
    disk: Path, deleter: Deleter
) -> None:
    attempts(disk, functools.partial(_dirty_pages, deleter))


def _dirty_pages(deleter: Deleter, disk: Path) -> None:
    log = segmented_log(disk, ManualClock(), segments=2, fsync=False, **ON)
    files = _files(log)
    log.read(4, MAX, reader="a")
    assert deleter.run() == 2  # a dropper per read segment
    assert [f.cached() for f in files] == [False, False, True]
    log.read(4, MAX, reader="a")
    assert deleter.run() == 0  # each segment is dropped once
    log.close()


@settings(max_examples=40, deadline=None)
@given(
    reads=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 9), st.integers(0, 200_000)),
        max_size=12,
    )
)
def test_what_is_freed_is_exactly_what_every_recent_reader_has_read(
    reads: list[tuple[str, int, int]],
) -> None:
    """Any reads, time passing between them: the segments freed are the inactive ones
    below the slowest reader seen in the last ``READER_IDLE_MS``, each dropped once."""
    with deletion_thread() as deleter, tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock()
        log = segmented_log(Path(tmp), clock, segments=4, fsync=False, **ON)
        seen: dict[str, tuple[int, int]] = {}
        expected = 0
        for reader, offset, later_ms in reads:
            clock.advance(later_ms)
            log.read(offset, MAX, reader=reader)
            seen[reader] = (offset, clock())
            live = [o for o, at in seen.values() if at >= clock() - READER_IDLE_MS]
            bounds = [2 * (i + 1) for i in range(4)]  # the inactive segments'
            expected = max([expected] + [b for b in bounds if b <= min(live)])
            assert log.pages_freed_below == expected
        assert deleter.run() == expected // 2  # one dropper per freed segment
        log.close()
