"""A removed segment's page-cache pages are freed when retention removes it, not when its
file is deleted file.delete.delay.ms later (sluice.log.local_log._drop_pages_of_removed).

The kernel drops clean pages only: most files here are fsynced first; the file
thread writes dirty ones back before dropping them. And it drops them on a best-effort
basis, so each scenario that asserts what the kernel dropped runs through
``support.logs.attempts`` in the ``disk`` fixture's directory (tests/log/conftest.py)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from sluice.base.clock import ManualClock
from sluice.log import Log, file_records
from sluice.log.file_records import FileRecords
from sluice.log.local_log import FlushWork
from support.logs import START_MS, ManualFileWork, attempts, segmented_log
from support.records import Rec, build_batch

DELAY = 60_000


def _log(
    tmp_path: Path,
    clock: ManualClock,
    segments: int,
    recycle: bool,
    fsync: bool = True,
    file_work: ManualFileWork | None = None,
) -> Log:
    """``segments`` full segments of two batches each and an active one (offsets 2i and
    2i + 1 in segment i), retention removing all but the active one after ``DELAY``."""
    return segmented_log(
        tmp_path, clock, segments, fsync, file_work,
        retention_bytes=0, file_delete_delay_ms=DELAY, segment_recycle=recycle,
    )  # fmt: skip


def test_with_recycling_only_the_newest_removed_segment_keeps_its_pages(
    disk: Path,
) -> None:
    attempts(disk, _only_the_newest_removed_segment_keeps_its_pages)


def _only_the_newest_removed_segment_keeps_its_pages(disk: Path) -> None:
    clock = ManualClock(START_MS)
    log = _log(disk, clock, segments=3, recycle=True)
    removed = [segment.log for segment in log.segments[:3]]
    assert all(records.cached() for records in removed)
    assert log.delete_old_segments() == 3
    # Only the newest keeps its pages: it may become the spare ...
    assert [records.cached() for records in removed] == [False, False, True]
    # ... but the files stay for the delay, and in-flight reads of them still work.
    assert all(records.path.name.endswith(".log.deleted") for records in removed)
    assert removed[0].read(0, 8) == bytes(8)  # the first batch's base offset, 0
    assert removed[0].cached()

    for i in range(4):  # two more segments full, and removed in turn
        log.append_as_leader(
            build_batch([Rec(b"n%02d" % i + b"x" * 197, timestamp=clock.milliseconds())]), 0
        )
    for segment in log.segments:
        os.fsync(segment.log.fileno())
    newer = [segment.log for segment in log.segments[:2]]
    assert log.delete_old_segments() == 2
    # The one kept before lost its pages to the newer removal. (Each file is probed once
    # after its drop: a probe that misses may start readahead of the file.)
    assert [records.cached() for records in [removed[2], *newer]] == [False, False, True]
    log.close()


def test_without_recycling_every_removed_segment_drops_its_pages(disk: Path) -> None:
    attempts(disk, _every_removed_segment_drops_its_pages)


def _every_removed_segment_drops_its_pages(disk: Path) -> None:
    clock = ManualClock(START_MS)
    log = _log(disk, clock, segments=2, recycle=False)
    removed = [segment.log for segment in log.segments[:2]]
    assert log.delete_old_segments() == 2
    assert [records.cached() for records in removed] == [False, False]
    clock.advance(DELAY)
    assert log.delete_pending_files() == 2
    assert not [p for p in (disk / "t-0").iterdir() if p.name.endswith(".deleted")]
    log.close()


def test_the_kept_pages_become_the_spare_and_are_not_dropped_by_a_later_removal(
    disk: Path,
) -> None:
    clock = ManualClock(START_MS)
    log = _log(disk, clock, segments=1, recycle=True)
    kept = log.segments[0].log
    inode = kept.path.stat().st_ino
    assert log.delete_old_segments() == 1
    clock.advance(DELAY)
    assert log.delete_pending_files() == 1  # kept as the spare, still cached
    assert kept.cached()
    for tag in (b"y", b"z"):  # fills the active segment (offsets 2-3), then rolls
        log.append_as_leader(build_batch([Rec(tag * 200, timestamp=clock.milliseconds())]), 0)
    assert log.active_segment.log.path.stat().st_ino == inode  # written into the spare
    for segment in log.segments:
        os.fsync(segment.log.fileno())
    assert log.delete_old_segments() == 1  # segment 2-3: the spare's pages are not its
    assert log.active_segment.log.cached()
    log.close()


def test_a_dropper_outlives_the_file_it_was_made_for(tmp_path: Path) -> None:
    """Dropping runs on the file thread, possibly after the file was deleted: it holds
    a descriptor of its own, so it never touches a descriptor number reused since."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"z" * 8192)
    records = FileRecords.open(path)
    drop = records.cache_dropper()
    records.delete()
    reused = os.open(tmp_path / "other", os.O_CREAT | os.O_RDWR)
    try:
        drop()
        os.fstat(reused)  # still open: the dropper closed only its own descriptor
    finally:
        os.close(reused)
    assert not path.exists()


def test_a_dropper_drops_pages_not_yet_written_back(disk: Path) -> None:
    """A removed segment younger than the kernel's writeback age still has dirty pages,
    which POSIX_FADV_DONTNEED alone leaves in memory: the dropper writes them first."""
    attempts(disk, _a_dropper_drops_dirty_pages)


def _a_dropper_drops_dirty_pages(disk: Path) -> None:
    disk.mkdir()
    path = disk / "00000000000000000000.log"
    records = FileRecords.open(path)
    records.append(b"d" * (1 << 20))  # dirty: nothing fsynced
    assert records.cached()
    records.cache_dropper()()
    assert not records.cached()
    assert records.read(0, 4) == b"dddd"  # from the disk: the bytes were written, not lost
    records.delete()


def test_on_the_file_thread_removed_segments_drop_dirty_pages_too(
    disk: Path, file_work: ManualFileWork
) -> None:
    """What a broker's file thread runs, run here in turn."""
    attempts(disk, functools.partial(_on_the_file_thread, file_work))


def _on_the_file_thread(file_work: ManualFileWork, disk: Path) -> None:
    clock = ManualClock(START_MS)
    log = _log(disk, clock, segments=2, recycle=False, fsync=False, file_work=file_work)
    rolled_flushes = file_work.take(FlushWork)  # run last: the pages stay dirty till then
    removed = [segment.log for segment in log.segments[:2]]
    assert log.delete_old_segments() == 2
    assert file_work.work.qsize() == 2  # the two droppers, queued for the thread
    file_work.run()
    assert [records.cached() for records in removed] == [False, False]
    for flush in rolled_flushes:
        flush()
    log.close()


def test_inline_the_drop_does_not_wait_for_the_disk(
    disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With inline file work dirty pages are left to the kernel's writeback: only file
    work in the background may wait for the disk."""
    waited: list[int] = []
    monkeypatch.setattr(file_records, "_write_back", waited.append)
    clock = ManualClock(START_MS)
    log = _log(disk, clock, segments=2, recycle=False, fsync=False)
    assert log.delete_old_segments() == 2
    assert waited == []
    log.segments[0].log.cache_dropper()()  # the thread's kind of drop does wait
    assert len(waited) == 1
    log.close()
