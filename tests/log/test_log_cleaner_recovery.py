"""Crashes in the middle of a cleaner swap: startup completes a committed swap (``.swap``) and
rolls back an uncommitted one (``.cleaned``), leaving a consistent log either way.

A crash is simulated by copying the partition directory at the chosen instant (the disk state
a killed process leaves) and opening the copy without a clean shutdown.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.base.clock import ManualClock
from sluice.log import Log
from sluice.log.cleaner.files import complete_interrupted_swaps
from sluice.log.segment import LogSegment
from support.cleaner import cleaner_for, key_values, kv_batch, latest_view, open_log
from support.logs import START_MS

Written = dict[int, tuple[bytes, bytes]]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


def _fill(log: Log, clock: ManualClock, rounds: int, tag: str = "v") -> Written:
    written: Written = {}
    for i in range(rounds):
        pairs = [(f"k{(i * 3 + j) % 5}".encode(), f"{tag}{i}-{j}".encode()) for j in range(3)]
        info = log.append_as_leader(kv_batch(list(pairs), clock), 0)
        for j, pair in enumerate(pairs):
            written[info.first_offset + j] = pair
    return written


@pytest.fixture
def setup(tmp_path: Path, clock: ManualClock) -> Iterator[tuple[Log, Written]]:
    log = open_log(tmp_path / "t-0", clock, file_delete_delay_ms=60_000)
    written = _fill(log, clock, 60)
    log.roll()
    yield log, written
    if not log.is_closed:
        log.close()


def _crash_copy(log: Log, name: str) -> Path:
    """The partition directory as a crash at this instant would leave it."""
    copy = log.dir.parent / name / log.dir.name
    shutil.copytree(log.dir, copy)
    return copy


def _reopen(path: Path, clock: ManualClock) -> Log:
    return open_log(path, clock, file_delete_delay_ms=60_000)  # had_clean_shutdown=False


def _assert_consistent(log: Log, written: Written, end: int) -> None:
    records = key_values(log)
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets))
    for offset, key, value in records:
        assert written[offset] == (key, value)
    assert log.log_end_offset == end
    suffixes = (".cleaned", ".swap", ".swapend")
    leftovers = [p.name for p in log.dir.iterdir() if p.name.endswith(suffixes)]
    assert leftovers == []
    for segment in log.segments:
        segment.sanity_check()  # indexes present and sane (rebuilt where needed)


def _expected_after_first_group(tmp_path: Path, log: Log, clock: ManualClock) -> list[object]:
    """What the log holds once the first group's swap has completed (a reference run)."""
    reference = shutil.copytree(log.dir, tmp_path / "reference" / log.dir.name)
    ref = _reopen(reference, clock)
    cleaning = cleaner_for(ref, clock).start_pass(cleaner_for(ref, clock).log_to_clean(ref))
    while cleaning.stats.segments_cleaned == 0:
        assert not cleaning.step()
    result: list[object] = list(key_values(ref))
    cleaning.abort()
    ref.close()
    return result


def test_crash_while_writing_cleaned_files_rolls_back(
    tmp_path: Path, clock: ManualClock, setup: tuple[Log, Written]
) -> None:
    log, written = setup
    before = key_values(log)
    cleaner = cleaner_for(log, clock)
    cleaner.slice_bytes = 100
    while not any(p.name.endswith(".cleaned") for p in log.dir.iterdir()):
        assert cleaner.step()
    crashed = _reopen(_crash_copy(log, "crash"), clock)
    assert key_values(crashed) == before
    _assert_consistent(crashed, written, log.log_end_offset)


def test_crash_between_the_cleaned_and_swap_renames_rolls_back(
    tmp_path: Path, clock: ManualClock, setup: tuple[Log, Written]
) -> None:
    log, written = setup
    before = key_values(log)
    # Index files already renamed .swap, the data file still .cleaned: not committed.
    stem = f"{0:020d}"
    (log.dir / f"{stem}.log.cleaned").write_bytes(b"partial garbage")
    (log.dir / f"{stem}.index.swap").write_bytes(b"\x00" * 8)
    (log.dir / f"{stem}.timeindex.swap").write_bytes(b"\x00" * 12)
    crashed = _reopen(_crash_copy(log, "crash"), clock)
    assert key_values(crashed) == before
    _assert_consistent(crashed, written, log.log_end_offset)


def test_crash_after_commit_completes_the_swap(
    tmp_path: Path,
    clock: ManualClock,
    setup: tuple[Log, Written],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log, written = setup
    expected = _expected_after_first_group(tmp_path, log, clock)

    class Crash(Exception):
        pass

    def crash(*_: object) -> None:
        raise Crash

    monkeypatch.setattr(Log, "replace_segments", crash)
    monkeypatch.setattr("sluice.log.cleaner.cleaning_pass.remove_cleaning_files", lambda *_: None)
    cleaner = cleaner_for(log, clock)
    cleaning = cleaner.start_pass(cleaner.log_to_clean(log))
    with pytest.raises(Crash):
        cleaning.run()
    names = {p.name for p in log.dir.iterdir()}
    assert {f"{0:020d}.log.swap", f"{0:020d}.log"} <= names  # committed, old still in place
    crashed = _reopen(_crash_copy(log, "crash"), clock)
    assert key_values(crashed) == expected
    _assert_consistent(crashed, written, log.log_end_offset)


def test_crash_after_old_segments_were_renamed_deleted_completes_the_swap(
    tmp_path: Path,
    clock: ManualClock,
    setup: tuple[Log, Written],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log, written = setup
    expected = _expected_after_first_group(tmp_path, log, clock)
    original = LogSegment.change_file_suffixes
    copies: list[Path] = []

    def rename(segment: LogSegment, old: str, new: str) -> None:
        if old == ".swap":  # the old files are now *.deleted: crash before the final rename
            copies.append(_crash_copy(log, "crash"))
            raise RuntimeError("crash")
        original(segment, old, new)

    monkeypatch.setattr(LogSegment, "change_file_suffixes", rename)
    cleaner = cleaner_for(log, clock)
    cleaning = cleaner.start_pass(cleaner.log_to_clean(log))
    with pytest.raises(RuntimeError, match="crash"):
        cleaning.run()
    (copy,) = copies
    names = {p.name for p in copy.iterdir()}
    assert f"{0:020d}.log.deleted" in names and f"{0:020d}.log" not in names
    crashed = _reopen(copy, clock)
    assert key_values(crashed) == expected
    _assert_consistent(crashed, written, log.log_end_offset)


def test_leftover_index_swap_files_after_the_final_rename(
    tmp_path: Path, clock: ManualClock, setup: tuple[Log, Written]
) -> None:
    log, written = setup
    cleaner_for(log, clock).clean_log(log)
    after = key_values(log)
    copy = _crash_copy(log, "crash")
    stem = f"{0:020d}"
    # The data file got its final name; the crash came before the index renames (an
    # index without entries has no file: an empty one stands for it).
    for suffix in (".index", ".timeindex"):
        index = copy / f"{stem}{suffix}"
        swap = copy / f"{stem}{suffix}.swap"
        if index.exists():
            index.rename(swap)
        else:
            swap.write_bytes(b"")
    crashed = _reopen(copy, clock)
    assert key_values(crashed) == after
    _assert_consistent(crashed, written, log.log_end_offset)


def test_a_committed_swap_replaces_every_segment_of_its_group(
    tmp_path: Path,
    clock: ManualClock,
    setup: tuple[Log, Written],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log, written = setup
    cleaner_for(log, clock).clean_log(log)  # leaves many small segments
    written.update(_fill(log, clock, 30, tag="w"))
    log.roll()
    small = [s for s in log.segments[:-1] if s.size < 400]
    assert len(small) > 2
    before = key_values(log)

    def crash(*_: object) -> None:
        raise RuntimeError("crash")

    monkeypatch.setattr(Log, "replace_segments", crash)
    monkeypatch.setattr("sluice.log.cleaner.cleaning_pass.remove_cleaning_files", lambda *_: None)
    cleaner = cleaner_for(log, clock)
    cleaning = cleaner.start_pass(cleaner.log_to_clean(log))
    with pytest.raises(RuntimeError):
        cleaning.run()
    copy = _crash_copy(log, "crash")
    segments_before = len([p for p in copy.iterdir() if p.name.endswith(".log")])
    assert complete_interrupted_swaps(copy) == [0]
    segments_after = len([p for p in copy.iterdir() if p.name.endswith(".log")])
    assert segments_after < segments_before - 1  # one swap replaced several segments
    crashed = _reopen(copy, clock)
    assert latest_view(key_values(crashed)) == latest_view(before)
    _assert_consistent(crashed, written, log.log_end_offset)


def test_without_a_swapend_file_recovery_falls_back_to_the_swap_next_offset(
    tmp_path: Path,
    clock: ManualClock,
    setup: tuple[Log, Written],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log, written = setup
    before = key_values(log)

    def crash(*_: object) -> None:
        raise RuntimeError("crash")

    monkeypatch.setattr(Log, "replace_segments", crash)
    monkeypatch.setattr("sluice.log.cleaner.cleaning_pass.remove_cleaning_files", lambda *_: None)
    cleaner = cleaner_for(log, clock)
    cleaning = cleaner.start_pass(cleaner.log_to_clean(log))
    with pytest.raises(RuntimeError):
        cleaning.run()
    copy = _crash_copy(log, "crash")
    (copy / f"{0:020d}.swapend").unlink()  # as Kafka: only the swap segment's next offset
    crashed = _reopen(copy, clock)
    assert latest_view(key_values(crashed)) == latest_view(before)
    _assert_consistent(crashed, written, log.log_end_offset)
    assert not any(p.name.endswith(".swapend") for p in crashed.dir.iterdir())
