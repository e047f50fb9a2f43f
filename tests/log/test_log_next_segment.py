"""The next segment's files, created on the file thread before the roll that takes them
(``segment.prepare.next``; sluice.log.next_segment).

The file thread is a broker's background file work (sluice.log.file_work); here it is a
plain queue whose work each test runs when it says (``ManualFileWork``), so every
interleaving of the asking, the making, the roll and the naming is chosen, not timed.
Segments of 1,000 bytes hold two 400-byte records: the second append into a segment makes
it half full."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule
from test_log_property import LogMachine

from sluice.base.clock import ManualClock
from sluice.log import Log, LogConfig
from sluice.log.local_log import FlushWork
from sluice.log.next_segment import NEXT_FILE_SUFFIX, NextSegment, PreparedFiles
from support.logs import START_MS, ManualFileWork
from support.records import Rec, build_batch, values_of

MAX = 1 << 20


def _config(**extra: object) -> LogConfig:
    return LogConfig(segment_bytes=1000, file_delete_delay_ms=0, **extra)  # type: ignore[arg-type]


def _append(log: Log, clock: ManualClock, i: int) -> None:
    log.append_as_leader(
        build_batch([Rec(b"%03d" % i + b"x" * 397, timestamp=clock.milliseconds())]), 0
    )


def _values(log: Log) -> list[bytes | None]:
    """Every record's value, reading segment after segment (a read stops at one's end)."""
    values: list[bytes | None] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = values_of(log.read(offset, MAX).records.read())
        assert got, f"nothing read at {offset}"
        values += [value for _, value in got]
        offset = got[-1][0] + 1
    return values


def _expected(count: int) -> list[bytes | None]:
    return [b"%03d" % i + b"x" * 397 for i in range(count)]


def _filled(
    directory: Path, clock: ManualClock, count: int, file_work: ManualFileWork, **extra: object
) -> Log:
    """A log in ``directory`` holding records 0 .. ``count`` - 1, its file work queued in
    ``file_work``."""
    log = Log(directory / "t-0", _config(**extra), clock=clock, file_work=file_work)
    for i in range(count):
        _append(log, clock, i)
    return log


def _next_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(NEXT_FILE_SUFFIX))


def _stems(directory: Path, suffix: str) -> list[int]:
    return sorted(int(p.name[:20]) for p in directory.iterdir() if p.name.endswith(suffix))


def test_a_roll_takes_the_files_made_ahead_and_the_file_thread_names_them(
    tmp_path: Path, file_work: ManualFileWork
) -> None:
    clock = ManualClock(START_MS)
    log = Log(tmp_path / "t-0", _config(), clock=clock, file_work=file_work)
    _append(log, clock, 0)
    assert file_work.run() == 0  # 4xx of 1,000 bytes: not half full yet
    _append(log, clock, 1)
    assert file_work.run() == 1  # half full: the next segment's files were made
    names = ["00000000000000000000.index.next", "00000000000000000000.log.next",
             "00000000000000000000.timeindex.next"]  # fmt: skip
    assert _next_files(log.dir) == names
    _append(log, clock, 2)  # rolls onto them
    active = log.active_segment
    assert active.base_offset == 2 and not active.named
    assert active.log.path.name == "00000000000000000000.log.next"
    _append(log, clock, 3)  # half full again: the next set is asked for after the naming
    assert _values(log) == _expected(4)
    assert file_work.run() == 3  # the naming, the flush of segment 0 (the roll's), the set
    assert active.named and active.log.path.name == "00000000000000000002.log"
    assert _stems(log.dir, ".log") == [0, 2]
    # segment 0's offset index never had an entry, so it has no file
    assert _stems(log.dir, ".index") == [2] and _stems(log.dir, ".timeindex") == [0, 2]
    assert _next_files(log.dir) == [n.replace("00000000000000000000", "00000000000000000002")
                                    for n in names]  # fmt: skip
    log.close()
    reopened = Log(
        tmp_path / "t-0", _config(), clock=clock, had_clean_shutdown=True, file_work=file_work
    )
    assert _values(reopened) == _expected(4)
    assert _next_files(reopened.dir) == []  # an unused set is removed at close
    reopened.close()


def test_without_the_file_thread_or_with_the_setting_off_a_roll_creates_its_files(
    tmp_path: Path,
) -> None:
    clock = ManualClock(START_MS)
    log = Log(tmp_path / "t-0", _config(), clock=clock)  # inline file work
    for i in range(7):
        _append(log, clock, i)
        assert _next_files(log.dir) == []
    assert _stems(log.dir, ".log") == [0, 2, 4, 6] and _values(log) == _expected(7)
    log.close()
    thread = ManualFileWork()
    off = Log(tmp_path / "t-1", _config(segment_prepare_next=False), clock=clock, file_work=thread)
    for i in range(7):
        _append(off, clock, i)
    assert thread.queued(FlushWork) == 3  # each roll flushes the segment it left
    assert thread.run() == 3 and _next_files(off.dir) == []
    off.close()


def test_a_roll_before_the_files_are_made_creates_its_own_and_keeps_the_set(
    tmp_path: Path, file_work: ManualFileWork
) -> None:
    clock = ManualClock(START_MS)
    log = _filled(tmp_path, clock, 3, file_work)  # asked at the second append, not made yet
    assert log.active_segment.named and _stems(log.dir, ".log") == [0, 2]
    assert file_work.run() == 2  # made now, named after segment 0; the roll's flush
    _append(log, clock, 3)
    _append(log, clock, 4)  # the roll takes the set made for it earlier
    assert log.active_segment.base_offset == 4 and not log.active_segment.named
    assert file_work.run() == 2  # the naming (at offset 3 a set was held: none asked); flush
    assert _next_files(log.dir) == []
    _append(log, clock, 5)
    assert file_work.run() == 1  # half full: the next set
    assert _stems(log.dir, ".log") == [0, 2, 4] and _values(log) == _expected(6)
    log.close()


def _on_unnamed_files(directory: Path, clock: ManualClock, file_work: ManualFileWork) -> Log:
    """A log whose active segment (offsets 2 and 3) is on files made ahead, not named yet."""
    log = Log(directory / "t-0", _config(), clock=clock, file_work=file_work)
    for i in range(2):
        _append(log, clock, i)
    file_work.run()
    for i in range(2, 4):
        _append(log, clock, i)  # segment 2 on the .next files; the naming is queued
    assert not log.active_segment.named
    return log


def test_a_crash_before_the_naming_leaves_a_data_file_the_loader_names(
    tmp_path: Path, file_work: ManualFileWork
) -> None:
    clock = ManualClock(START_MS)
    log = _on_unnamed_files(tmp_path, clock, file_work)
    _crash(log, file_work)  # the naming never runs
    reopened = Log(tmp_path / "t-0", _config(), clock=clock, file_work=file_work)
    assert _next_files(reopened.dir) == []
    assert [s.base_offset for s in reopened.segments] == [0, 2]
    # Segment 2's .next indexes were removed; its rebuilt index has no entry (two small
    # batches), so no file, as segment 0's never had one.
    assert _stems(reopened.dir, ".index") == []
    assert _values(reopened) == _expected(4)
    assert reopened.read(3, MAX).records.size > 0  # found through the rebuilt index
    _append(reopened, clock, 4)
    assert _values(reopened) == _expected(5)
    reopened.close()


def test_a_crash_between_the_indexes_and_the_data_file_names_rebuilds_the_indexes(
    tmp_path: Path, file_work: ManualFileWork
) -> None:
    clock = ManualClock(START_MS)
    log = _on_unnamed_files(tmp_path, clock, file_work)
    active = log.active_segment
    # The naming stopped after the indexes (their entries may be stale or torn).
    active.offset_index.rename_to(log.dir / "00000000000000000002.index")
    active.time_index.rename_to(log.dir / "00000000000000000002.timeindex")
    (log.dir / "00000000000000000002.index").write_bytes(b"\xff" * 12)  # not whole entries
    _crash(log, file_work)
    reopened = Log(tmp_path / "t-0", _config(), clock=clock, file_work=file_work)
    assert _next_files(reopened.dir) == [] and _values(reopened) == _expected(4)
    index = reopened.dir / "00000000000000000002.index"
    assert not index.exists() or index.stat().st_size % 8 == 0
    reopened.close()


def test_files_made_but_not_rolled_onto_go_after_a_crash(
    tmp_path: Path, file_work: ManualFileWork
) -> None:
    clock = ManualClock(START_MS)
    log = _filled(tmp_path, clock, 2, file_work, preallocate=True)
    file_work.run()
    prepared = log._local._next._ready
    assert prepared is not None and prepared.log.stale_bytes == 1000  # preallocate
    _crash(log, file_work)
    reopened = Log(tmp_path / "t-0", _config(), clock=clock, file_work=file_work)
    assert _next_files(reopened.dir) == [] and _stems(reopened.dir, ".log") == [0]
    assert _values(reopened) == _expected(2)
    reopened.close()


def test_a_segment_removed_before_its_naming_goes_under_the_names_it_has(
    tmp_path: Path, file_work: ManualFileWork
) -> None:
    clock = ManualClock(START_MS)
    log = _filled(tmp_path, clock, 2, file_work)
    file_work.run()
    _append(log, clock, 2)
    segment = log.active_segment
    assert not segment.named
    log.truncate_to(1)  # segment 2 removed (file.delete.delay.ms=0: at once)
    assert file_work.run() == 2  # the naming finds nothing to do; the roll's flush
    assert segment.named and _stems(log.dir, ".log") == [0] and _next_files(log.dir) == []
    assert _values(log) == _expected(1)
    log.close()


def test_a_set_made_after_its_log_closed_is_removed(
    tmp_path: Path, file_work: ManualFileWork
) -> None:
    clock = ManualClock(START_MS)
    log = _filled(tmp_path, clock, 2, file_work)
    log.close()  # the set was asked for, not made
    assert file_work.run() == 1
    assert _next_files(log.dir) == []


def test_a_set_that_cannot_be_made_leaves_nothing_and_the_roll_makes_its_files(
    tmp_path: Path, file_work: ManualFileWork
) -> None:
    clock = ManualClock(START_MS)
    log = _filled(tmp_path, clock, 2, file_work)
    taken = log.dir / "00000000000000000000.timeindex.next"
    taken.write_bytes(b"")  # a name that exists: the set is not made (O_EXCL)
    file_work.run()
    assert _next_files(log.dir) == [taken.name] and log._local._next._ready is None
    _append(log, clock, 2)
    assert log.active_segment.named and _values(log) == _expected(3)
    taken.unlink()
    log.close()


def test_the_slot_holds_one_set_and_makes_one_at_a_time(
    tmp_path: Path, file_work: ManualFileWork
) -> None:
    slot = NextSegment(tmp_path, file_work)
    assert slot.ask(5, 0) and not slot.ask(5, 0)  # being made
    assert file_work.run() == 1 and slot.ready and not slot.ask(6, 0)  # held
    files = slot.take()
    assert isinstance(files, PreparedFiles) and slot.take() is None
    files.discard()
    assert _next_files(tmp_path) == []
    assert slot.ask(7, 0)
    slot.close()
    assert file_work.run() == 1 and _next_files(tmp_path) == [] and not slot.ask(8, 0)


def test_segment_prepare_next_is_a_topic_config_with_a_broker_default() -> None:
    from sluice.config import BrokerConfig, topic_config_defaults
    from sluice.log.errors import ConfigException

    assert LogConfig().segment_prepare_next is True
    props = {"segment.prepare.next": "false"}
    assert LogConfig.from_properties(props).segment_prepare_next is False
    with pytest.raises(ConfigException, match=r"segment\.prepare\.next"):
        LogConfig.from_properties({"segment.prepare.next": "later"})
    broker = BrokerConfig({"log.segment.prepare.next": "false"})
    assert topic_config_defaults(broker)["segment.prepare.next"] is False


def _crash(log: Log, thread: ManualFileWork) -> None:
    """The process dies: descriptors closed, nothing trimmed or named, queued file work lost."""
    from test_log_property import _let_go

    _let_go(log)
    thread.drop()


class NextSegmentLogMachine(LogMachine):
    """The log model of test_log_property.py with its file work queued and run by a rule,
    and small segments, so the next segment's files are asked for, made, rolled
    onto and named in every order among appends, truncations, removals, reopenings and
    crashes (which lose the queued work)."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = ManualFileWork()
        self.file_work = self.thread

    @initialize(
        segment_bytes=st.integers(300, 900),
        delete_delay=st.sampled_from([0, 100]),
        recycle=st.booleans(),
        preallocate=st.booleans(),
    )
    def open_log(  # type: ignore[override]
        self, segment_bytes: int, delete_delay: int, recycle: bool, preallocate: bool
    ) -> None:
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=64,
            file_delete_delay_ms=delete_delay,
            segment_recycle=recycle,
            preallocate=preallocate,
        )
        self.log = self._open_log()

    @rule()
    def run_file_thread(self) -> None:
        self.thread.run()

    @rule()
    def crash(self) -> None:
        _crash(self.log, self.thread)
        self.log = self._open_log()

    @rule(size=st.integers(0, 60), run_at=st.integers(0, 8))
    def append_until_a_roll(self, size: int, run_at: int) -> None:
        """Appends until the log rolls, the file thread running after ``run_at`` of them
        (before the next set is asked for, between the ask and the roll, or not at all)."""
        base = self.log.active_segment.base_offset
        for i in range(100):
            if i == run_at:
                self.thread.run()
            self.append([size, size], [0] * 4, 0)
            if self.log.active_segment.base_offset != base:
                return

    @rule()
    def drop_all_but_the_active_segment(self) -> None:
        self.retention_by_size(0)
        self.expire_deleted_files()

    @invariant()
    def named_segments_are_at_their_names(self) -> None:
        if hasattr(self, "log"):
            for segment in self.log.segments:
                if segment.named:
                    assert segment.log.path.name == f"{segment.base_offset:020d}.log"
                    # created by its first append
                    assert os.path.exists(segment.log.path) or segment.size == 0


TestNextSegmentLogMachine = NextSegmentLogMachine.TestCase
TestNextSegmentLogMachine.settings = settings(
    max_examples=int(os.environ.get("LOG_PROP_EXAMPLES", "75")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
