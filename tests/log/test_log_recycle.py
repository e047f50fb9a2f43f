"""segment.recycle: a new segment writes into the data file of a segment that retention
removed, once file.delete.delay.ms has passed (sluice.log.local_log._new_segment)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule
from test_log_property import LogMachine, _let_go

from sluice.base.clock import ManualClock
from sluice.log import Log, LogConfig
from sluice.log.errors import KafkaStorageException
from sluice.log.file_records import FileRecords
from support.logs import START_MS, attempts
from support.records import Rec, build_batch, values_of

DELAY = 100


def _batch(clock: ManualClock, tag: str, size: int = 200) -> bytes:
    return build_batch([Rec(tag.encode().ljust(size, b"."), timestamp=clock.milliseconds())])


def _config(one: int, **kw: object) -> LogConfig:
    """Two batches of ``one`` bytes per segment; everything but the active segment past
    retention; removed files linger DELAY ms. No preallocation, so that bytes past the
    records (``stale_bytes``) are a reused file's old ones."""
    base: dict[str, object] = {
        "segment_bytes": 2 * one,
        "retention_bytes": 0,
        "file_delete_delay_ms": DELAY,
        "index_interval_bytes": 64,
    }
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def _values(log: Log) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20)
        out.extend((o, v) for o, v in values_of(info.read()) if o >= offset)
        offset = out[-1][0] + 1
    return out


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if "checkpoint" not in p.name)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


def _log_with_spare(tmp_path: Path, clock: ManualClock, **kw: object) -> tuple[int, Log, int]:
    """A log whose first segment (offsets 0-1, written "old") was removed by retention and
    kept as the spare; returns the batch size, the log and the spare's inode."""
    one = len(_batch(clock, "old"))
    log = Log(tmp_path / "t-0", _config(one, **kw), clock=clock)
    for i in range(4):
        log.append_as_leader(_batch(clock, f"old{i}"), 0)
    inode = log.segments[0].log.path.stat().st_ino
    assert log.delete_old_segments() == 1
    clock.advance(DELAY)
    assert log.delete_pending_files() == 1
    return one, log, inode


def test_the_next_roll_writes_into_the_spare_and_trims_its_old_bytes(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    one, log, inode = _log_with_spare(tmp_path, clock)
    # The spare keeps its data file only; its indexes are gone.
    assert "00000000000000000000.log.deleted" in _names(directory)
    assert not [
        n for n in _names(directory) if n.startswith("00000000000000000000.") and "index" in n
    ]

    small = _batch(clock, "new4", size=50)
    log.append_as_leader(small, 0)  # segment 2-3 is full: rolls to 4, into the spare
    active = log.active_segment
    assert active.base_offset == 4
    assert active.log.path.stat().st_ino == inode
    assert active.log.path.stat().st_size == 2 * one  # the old bytes are still there
    assert active.log.stale_bytes == 2 * one - len(small)
    assert not [n for n in _names(directory) if n.endswith(".deleted")]
    assert _values(log)[-1] == (4, b"new4".ljust(50, b"."))

    log.append_as_leader(_batch(clock, "new5"), 0)
    log.append_as_leader(_batch(clock, "new6"), 0)  # rolls again: segment 4 is trimmed
    segment = log.segments[-2]
    assert segment.base_offset == 4 and segment.log.stale_bytes == 0
    assert segment.log.path.stat().st_size == segment.size
    expected = _values(log)
    assert [o for o, _ in expected] == [2, 3, 4, 5, 6]
    log.close()

    reopened = Log(directory, _config(one), clock=clock, had_clean_shutdown=True)
    assert _values(reopened) == expected
    reopened.close()


@pytest.mark.parametrize("new_size", [200, 50, 3])
def test_recovery_after_a_crash_keeps_only_the_new_batches_of_a_reused_file(
    tmp_path: Path, clock: ManualClock, new_size: int
) -> None:
    """With ``new_size`` 200 the new batch is exactly as long as the old ones, so recovery
    finds a whole, CRC-valid old batch right after it: only its offsets tell it apart."""
    directory = tmp_path / "t-0"
    one, log, inode = _log_with_spare(tmp_path, clock)
    log.append_as_leader(_batch(clock, "new4", size=new_size), 0)
    expected = _values(log)
    assert log.active_segment.log.stale_bytes > 0
    _let_go(log)  # the process dies here: nothing is trimmed; the next open recovers
    recovered = Log(directory, _config(one), clock=clock)
    assert recovered.log_end_offset == 5
    assert _values(recovered) == expected
    path = recovered.active_segment.log.path
    assert path.stat().st_ino == inode and path.stat().st_size == recovered.active_segment.size
    assert recovered.append_as_leader(_batch(clock, "new5"), 0).first_offset == 5
    recovered.close()


def test_a_clean_close_trims_the_active_reused_file(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "t-0"
    one, log, _inode = _log_with_spare(tmp_path, clock)
    log.append_as_leader(_batch(clock, "new4", size=50), 0)
    expected = _values(log)
    path = log.active_segment.log.path
    log.close()
    assert path.stat().st_size == len(_batch(clock, "new4", size=50))
    reopened = Log(directory, _config(one), clock=clock, had_clean_shutdown=True)
    assert _values(reopened) == expected
    reopened.close()


def test_a_slice_of_the_removed_segment_fails_instead_of_reading_new_data(
    tmp_path: Path, clock: ManualClock
) -> None:
    one = len(_batch(clock, "old"))
    log = Log(tmp_path / "t-0", _config(one), clock=clock)
    for i in range(4):
        log.append_as_leader(_batch(clock, f"old{i}"), 0)
    in_flight = log.read(0, 1 << 20)
    log.delete_old_segments()
    clock.advance(DELAY)
    log.delete_pending_files()
    log.append_as_leader(_batch(clock, "new4"), 0)  # reuses segment 0's file
    with pytest.raises(KafkaStorageException):
        in_flight.read()
    log.close()


def test_a_spare_is_only_reused_by_a_segment_above_every_offset_it_held(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Truncation removes segments whose offsets the log will write again; their file may
    become the spare, but only a segment based at or above its old log end reuses it."""
    directory = tmp_path / "t-0"
    one = len(_batch(clock, "a"))
    log = Log(directory, _config(one, retention_bytes=-1), clock=clock)
    for i in range(6):  # segments 0-1, 2-3, 4-5
        log.append_as_leader(_batch(clock, f"a{i}"), 0)
    truncated_inode = log.segments[-1].log.path.stat().st_ino
    log.truncate_to(3)  # removes segment 4-5 (offsets below 6); segment 2 keeps offset 2
    clock.advance(DELAY)
    log.delete_pending_files()
    assert "00000000000000000004.log.deleted" in _names(directory)
    log.append_as_leader(_batch(clock, "b3"), 0)  # 3: fills segment 2
    log.append_as_leader(_batch(clock, "b4"), 0)  # rolls to 4 < 6: a new file
    assert log.active_segment.base_offset == 4
    assert log.active_segment.log.stale_bytes == 0
    assert "00000000000000000004.log.deleted" in _names(directory)  # still the spare
    log.append_as_leader(_batch(clock, "b5"), 0)
    log.append_as_leader(_batch(clock, "b6"), 0)  # rolls to 6: the spare
    assert log.active_segment.base_offset == 6
    assert log.active_segment.log.path.stat().st_ino == truncated_inode
    assert [v for _, v in _values(log)] == [
        t.encode().ljust(200, b".") for t in ("a0", "a1", "a2", "b3", "b4", "b5", "b6")
    ]
    log.close()


def test_a_spare_whose_name_another_removed_segment_took_is_not_reused(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Segment 4 is removed by truncation, written again and removed again within the
    delay: the second ``4.log.deleted`` replaces the first. When the first expires and
    becomes the spare, its name is the second's file, which in-flight reads still use."""
    directory = tmp_path / "t-0"
    one = len(_batch(clock, "a"))
    log = Log(directory, _config(one, retention_bytes=-1), clock=clock)
    for i in range(6):  # segments 0-1, 2-3, 4-5
        log.append_as_leader(_batch(clock, f"a{i}"), 0)
    log.truncate_to(3)  # segment 4 -> 4.log.deleted, due at +100
    clock.advance(50)
    for tag in ("b3", "b4", "b5", "b6"):  # segment 4 again (4-5), active 6
        log.append_as_leader(_batch(clock, tag), 0)
    in_flight = log.read(4, 1 << 20)
    log.delete_records_before(6)
    log.delete_old_segments()  # segment 4 again -> 4.log.deleted, due at +150
    clock.advance(50)
    assert log.delete_pending_files() == 1  # the first segment 4 becomes the spare
    log.append_as_leader(_batch(clock, "b7"), 0)
    log.append_as_leader(_batch(clock, "b8"), 0)  # rolls to 8: the spare is not reused
    assert log.active_segment.base_offset == 8 and log.active_segment.log.stale_bytes == 0
    assert [v for _, v in values_of(in_flight.read())] == [
        b"b4".ljust(200, b"."),
        b"b5".ljust(200, b"."),
    ]
    clock.advance(50)
    log.delete_pending_files()  # now the second becomes the spare, for the next roll
    assert _names(directory).count("00000000000000000004.log.deleted") == 1
    log.close()


@pytest.mark.parametrize("why", ["not cached", "recycling turned off"])
def test_a_spare_that_will_not_be_used_is_deleted_at_the_next_roll(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    directory = tmp_path / "t-0"
    one, log, _inode = _log_with_spare(tmp_path, clock)
    if why == "not cached":
        monkeypatch.setattr(FileRecords, "cached", lambda self, samples=64: False)
    else:
        log.update_config(_config(one, segment_recycle=False))
    small = _batch(clock, "new4", size=50)
    log.append_as_leader(small, 0)
    # A new file (ext4 may give it the freed inode number, so compare sizes instead).
    assert log.active_segment.log.stale_bytes == 0
    assert log.active_segment.log.path.stat().st_size == len(small)
    assert not [n for n in _names(directory) if n.endswith(".deleted")]
    log.close()


def test_close_deletes_the_spare(tmp_path: Path, clock: ManualClock) -> None:
    _one, log, _inode = _log_with_spare(tmp_path, clock)
    log.close()
    assert not [n for n in _names(tmp_path / "t-0") if n.endswith(".deleted")]


def test_cached_tells_whether_the_page_cache_holds_the_file(disk: Path) -> None:
    attempts(disk, _cached_follows_the_page_cache)  # the kernel's drop is best-effort


def _cached_follows_the_page_cache(directory: Path) -> None:
    directory.mkdir()
    records = FileRecords.open(directory / "f.log")
    try:
        assert not records.cached()  # empty: nothing to reuse
        records.append(os.urandom(64 * 1024))
        assert records.cached()
        records.flush()  # clean pages can be dropped
        os.posix_fadvise(records.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        assert not records.cached()
        records.read(0, 64 * 1024)
        assert records.cached()
    finally:
        records.close()


class RecyclingLogMachine(LogMachine):
    """The log model of test_log_property.py with small segments, removed files that
    linger, and recycling on, so rolls keep writing into reused files (and crashes leave
    their old bytes behind)."""

    @initialize(
        segment_bytes=st.integers(400, 900),
        interval=st.sampled_from([0, 64, 4096]),
        preallocate=st.booleans(),
    )
    def open_log(  # type: ignore[override]
        self, segment_bytes: int, interval: int, preallocate: bool
    ) -> None:
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=interval,
            file_delete_delay_ms=DELAY,
            segment_recycle=True,
            preallocate=preallocate,  # reused files and preallocated tails, with crashes
        )
        self.log = self._open_log()

    @rule()
    def drop_all_but_the_active_segment(self) -> None:
        self.retention_by_size(0)
        self.expire_deleted_files()

    @rule(size=st.integers(0, 60))
    def append_until_a_roll(self, size: int) -> None:
        base = self.log.active_segment.base_offset
        for _ in range(100):
            self.append([size, size], [0] * 4, 0)
            if self.log.active_segment.base_offset != base:
                return


TestRecyclingLogMachine = RecyclingLogMachine.TestCase
TestRecyclingLogMachine.settings = settings(
    max_examples=int(os.environ.get("LOG_PROP_EXAMPLES", "75")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_segment_recycle_is_a_topic_config_with_a_broker_default() -> None:
    from sluice.config import BrokerConfig, topic_config_defaults
    from sluice.log.errors import ConfigException

    assert LogConfig().segment_recycle is True
    assert LogConfig.from_properties({"segment.recycle": "false"}).segment_recycle is False
    assert LogConfig.from_properties({"segment.recycle": True}).segment_recycle is True
    assert LogConfig(segment_recycle=False).to_properties()["segment.recycle"] == "false"
    with pytest.raises(ConfigException, match=r"segment\.recycle"):
        LogConfig.from_properties({"segment.recycle": "sometimes"})
    broker = BrokerConfig({"log.segment.recycle": "false", "log.segment.delete.delay.ms": "5"})
    assert topic_config_defaults(broker)["segment.recycle"] is False
    # Kafka's broker name for the topic's file.delete.delay.ms
    assert topic_config_defaults(broker)["file.delete.delay.ms"] == 5
    assert topic_config_defaults(BrokerConfig())["file.delete.delay.ms"] == 60_000
