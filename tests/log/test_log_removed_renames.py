"""Where the file thread runs (the ``sluice broker`` process), the segments retention and
the log start offset remove are renamed ``*.deleted`` on it, not on the event loop
(sluice.log.local_log.LocalLog.remove_and_delete_segments). Its queue is a plain one here,
run when each test says (``Deleter``). Segments hold two 400-byte records (offsets 2i and
2i + 1 in segment i)."""

from __future__ import annotations

from pathlib import Path

from sluice_log_helpers import Deleter, ManualClock, Rec, build_batch, values_of

from sluice.log import Log, LogConfig

MAX = 1 << 20
DELAY = 60_000


def _log(directory: Path, clock: ManualClock, records: int) -> Log:
    one = len(build_batch([Rec(b"x" * 400, timestamp=clock())]))
    config = LogConfig(segment_bytes=2 * one, file_delete_delay_ms=DELAY, segment_recycle=False)
    log = Log(directory / "t-0", config, clock=clock)
    for i in range(records):
        log.append_as_leader(build_batch([Rec(b"%03d" % i + b"x" * 397, timestamp=clock())]), 0)
    return log


def _names(log: Log, suffix: str) -> list[str]:
    return sorted(p.name for p in log.dir.iterdir() if p.name.endswith(suffix))


def _first_values(log: Log) -> list[bytes | None]:
    return [value for _, value in values_of(log.read(log.log_start_offset, MAX).records.read())]


def _retention(log: Log, keep_from: int) -> int:
    """Retention removing every segment wholly below ``keep_from``."""
    return log._delete_segments(lambda _, upper: upper <= keep_from, None)


def test_retention_renames_on_the_file_thread_and_deletes_there_after_the_delay(
    tmp_path: Path, deleter: Deleter
) -> None:
    clock = ManualClock()
    log = _log(tmp_path, clock, records=7)  # segments 0, 2, 4, 6
    deleter.run()
    removed = list(log.segments[:2])
    assert _retention(log, 4) == 2
    assert [s.base_offset for s in log.segments] == [4, 6]
    # Not renamed on this thread: for each, the rename and the page drop are queued.
    assert all(s.suffix_due == ".deleted" for s in removed)
    assert _names(log, ".deleted") == []
    assert deleter.work.qsize() == 4
    deleter.run()
    assert all(s.suffix_due is None for s in removed)
    assert _names(log, ".log.deleted") == ["00000000000000000000.log.deleted",
                                           "00000000000000000002.log.deleted"]  # fmt: skip
    clock.advance(DELAY)
    assert log.delete_pending_files() == 2
    deleter.run()
    assert _names(log, ".deleted") == [] and _names(log, ".log") == [
        "00000000000000000004.log", "00000000000000000006.log"]  # fmt: skip
    log.close()


def test_a_truncation_makes_the_renames_still_due_first(tmp_path: Path, deleter: Deleter) -> None:
    clock = ManualClock()
    log = _log(tmp_path, clock, records=7)
    deleter.run()
    removed = list(log.segments[:2])
    _retention(log, 4)
    log.truncate_to(5)
    assert all(s.suffix_due is None for s in removed)
    assert "00000000000000000000.log.deleted" in _names(log, ".deleted")
    log._local.truncate_fully_and_start_at(40)
    deleter.run()  # the new segment took the set made ahead: named on the thread
    assert _names(log, ".log") == ["00000000000000000040.log"]
    log.close()


def test_a_crash_before_the_renames_brings_retention_s_segments_back_for_the_next_pass(
    tmp_path: Path, deleter: Deleter
) -> None:
    from test_log_next_segment import _crash

    clock = ManualClock()
    log = _log(tmp_path, clock, records=7)
    deleter.run()
    _retention(log, 4)
    _crash(log, deleter)  # the queued renames are lost with the process
    back = Log(tmp_path / "t-0", log.config, clock=clock)
    assert back.log_start_offset == 0  # as if that retention pass had not run yet
    assert _first_values(back) == [b"000" + b"x" * 397, b"001" + b"x" * 397]
    _retention(back, 4)  # the next pass removes them again
    assert back.log_start_offset == 4
    back.close()  # a clean close removes what it removed
    again = Log(tmp_path / "t-0", log.config, clock=clock, had_clean_shutdown=True)
    assert again.log_start_offset == 4 and _names(again, ".deleted") == []
    again.close()


def test_after_delete_records_a_crash_before_the_renames_keeps_the_new_start(
    tmp_path: Path, deleter: Deleter
) -> None:
    from test_log_next_segment import _crash

    clock = ManualClock()
    log = _log(tmp_path, clock, records=7)
    deleter.run()
    assert log.delete_records_before(4) == 4  # the log start offset checkpointed first
    assert [s.base_offset for s in log.segments] == [4, 6]
    _crash(log, deleter)
    back = Log(tmp_path / "t-0", log.config, clock=clock)
    assert back.log_start_offset == 4 and [s.base_offset for s in back.segments] == [4, 6]
    back.close()


def test_renames_still_due_at_close_or_when_the_log_is_deleted(
    tmp_path: Path, deleter: Deleter
) -> None:
    clock = ManualClock()
    log = _log(tmp_path, clock, records=7)
    deleter.run()
    _retention(log, 4)
    log.close()  # removes the removed segments' files, renamed or not
    assert _names(log, ".log") == ["00000000000000000004.log", "00000000000000000006.log"]
    assert _names(log, ".deleted") == []
    assert deleter.run() == 4  # what was queued finds nothing left to do

    other = _log(tmp_path / "other", clock, records=7)
    deleter.run()
    _retention(other, 4)
    other.delete()  # the directory goes first; the queued renames find no files
    assert deleter.run() == 4 and not other.dir.exists()
