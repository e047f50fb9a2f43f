"""Kafka's preallocate: a new segment's whole file is allocated when it is created, the
records never see the zeros past them, rolls and closes cut them, a crash leaves them to
recovery, and where allocating fails the appends go on without it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_log_property import _let_go
from test_log_recycle import _values

from sluice.base.clock import ManualClock
from sluice.log import Log, LogConfig
from sluice.log import file_records as file_records_module
from sluice.log.file_records import FileRecords
from support.logs import START_MS
from support.records import Rec, build_batch

LIMIT = 64 * 1024


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


def _batch(clock: ManualClock, tag: str, size: int = 200) -> bytes:
    return build_batch([Rec(tag.encode().ljust(size, b"."), timestamp=clock.milliseconds())])


def _count_allocations(monkeypatch: pytest.MonkeyPatch, works: bool = True) -> list[int]:
    """Record the lengths asked of ``allocate``; ``works`` False: every call fails."""
    calls: list[int] = []
    real = file_records_module.allocate

    def counting(fd: int, offset: int, length: int) -> bool:
        calls.append(length)
        return works and real(fd, offset, length)

    monkeypatch.setattr(file_records_module, "allocate", counting)
    return calls


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 9000), min_size=1, max_size=30))
def test_appends_read_back_whole_and_a_close_cuts_the_preallocated_end(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int]
) -> None:
    path = tmp_path_factory.mktemp("alloc") / "0.log"
    records = FileRecords.open(path)
    records.preallocate(LIMIT)
    written = b""
    for index, size in enumerate(sizes):
        data = bytes([index % 251 + 1]) * size
        records.append(data)
        written += data
        length = path.stat().st_size
        assert records.size == len(written)
        assert length == max(LIMIT, records.size)  # allocated, never short
        assert records.stale_bytes == length - records.size
        assert records.read(0, len(written)) == written
    records.close()
    assert path.read_bytes() == written


def test_where_allocating_fails_appends_go_on_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_allocations(monkeypatch, works=False)
    path = tmp_path / "0.log"
    records = FileRecords.open(path)
    records.preallocate(LIMIT)
    assert calls == [LIMIT] and path.stat().st_size == 0 and records.stale_bytes == 0
    for index in range(10):
        records.append(bytes([65 + index]) * 3000)
        assert path.stat().st_size == records.size  # nothing past the records
    assert records.read(0, 30_000) == b"".join(bytes([65 + i]) * 3000 for i in range(10))
    records.close()


def test_no_allocation_when_off(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_allocations(monkeypatch)
    log = Log(tmp_path / "t-0", _config(), clock=clock)
    log.append_as_leader(_batch(clock, "z"), 0)
    assert calls == [] and log.active_segment.log.stale_bytes == 0
    log.close()


def _config(**kw: object) -> LogConfig:
    base: dict[str, object] = {"segment_bytes": 1000, "index_interval_bytes": 64}
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def test_preallocate_allocates_a_new_segment_whole(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "t-0", _config(preallocate=True), clock=clock)
    assert log.active_segment.log.path.stat().st_size == 1000  # before any append
    for index in range(6):
        log.append_as_leader(_batch(clock, f"p{index}"), 0)
    assert len(log.segments) > 1
    for segment in log.segments[:-1]:
        assert segment.log.path.stat().st_size == segment.size
    assert log.active_segment.log.path.stat().st_size == 1000
    log.close()
    assert log.active_segment.log.path.stat().st_size == log.active_segment.size


def test_recovery_after_a_crash_stops_at_the_allocated_zeros(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    config = _config(segment_bytes=100_000, preallocate=True)
    log = Log(directory, config, clock=clock)
    for index in range(7):
        log.append_as_leader(_batch(clock, f"c{index}"), 0)
    expected = _values(log)
    path = log.active_segment.log.path
    assert path.stat().st_size > log.active_segment.size
    _let_go(log)  # the process dies here: the zeros stay; the next open recovers
    recovered = Log(directory, config, clock=clock)
    assert recovered.log_end_offset == 7
    assert _values(recovered) == expected
    assert path.stat().st_size == recovered.active_segment.size
    assert recovered.append_as_leader(_batch(clock, "c7"), 0).first_offset == 7
    recovered.close()


def test_config_names_and_defaults() -> None:
    assert LogConfig().preallocate is False
    props = LogConfig.from_properties({"preallocate": "true"}).to_properties()
    assert props["preallocate"] == "true"
