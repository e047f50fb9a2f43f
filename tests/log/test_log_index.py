"""OffsetIndex and TimeIndex: file format, lookups, truncation, reload, sanity checks."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from sluice.log.errors import CorruptIndexException, InvalidOffsetException
from sluice.log.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset


def test_offset_index_file_format_and_lookup(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, 1024)
    for i in range(10):
        index.append(100 + i * 10, i * 4096)
    assert path.read_bytes()[:16] == struct.pack(">iiii", 0, 0, 10, 4096)
    assert path.stat().st_size == 80
    assert index.entries == 10
    assert index.lookup(99) == OffsetPosition(100, 0)
    assert index.lookup(100) == OffsetPosition(100, 0)
    assert index.lookup(125) == OffsetPosition(120, 2 * 4096)
    assert index.lookup(130) == OffsetPosition(130, 3 * 4096)
    assert index.lookup(10**12) == OffsetPosition(190, 9 * 4096)
    assert index.last_entry() == OffsetPosition(190, 9 * 4096)
    assert index.entry(4) == OffsetPosition(140, 4 * 4096)
    with pytest.raises(InvalidOffsetException):
        index.append(190, 99_999)
    index.close()


def test_offset_index_empty_lookup(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000005.index", 5, 1024)
    assert index.lookup(1000) == OffsetPosition(5, 0)
    assert index.last_entry() == OffsetPosition(5, 0)
    index.close()


def test_offset_index_reload_lazily_and_truncate(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, 1024)
    for i in range(1, 9):
        index.append(i * 5, i * 100)
    index.flush()
    index.close()
    reopened = OffsetIndex(path, 0, 1024)
    assert reopened.entries == 8
    assert reopened.last_entry() == OffsetPosition(40, 800)  # read without a full load
    assert reopened.lookup(22) == OffsetPosition(20, 400)
    reopened.truncate_to(20)  # drops entries with offset >= 20
    assert reopened.entries == 3
    assert reopened.lookup(1000) == OffsetPosition(15, 300)
    assert path.stat().st_size == 24
    reopened.truncate_to(0)
    assert reopened.entries == 0
    reopened.reset()
    assert path.stat().st_size == 0
    reopened.close()


def test_offset_index_is_full_is_advisory(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 24)
    assert index.max_entries == 3
    for i in range(3):
        index.append(i + 1, i)
    assert index.is_full()
    index.append(10, 10)  # still accepted: fullness only triggers a roll
    assert index.entries == 4
    index.close()


def test_offset_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, 1024)
    index.append(3, 500)
    index.sanity_check(log_size=1000)
    with pytest.raises(CorruptIndexException):
        index.sanity_check(log_size=100)  # position beyond the data file
    index.close()
    with path.open("ab") as f:
        f.write(b"\x00\x01\x02")
    broken = OffsetIndex(path, 0, 1024)
    with pytest.raises(CorruptIndexException):
        broken.sanity_check(log_size=1000)
    broken.close()


def test_time_index_format_and_lookup(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.timeindex"
    index = TimeIndex(path, 50, 1200)
    assert not index.maybe_append(-1, 50)  # nothing before a real timestamp
    assert index.maybe_append(1000, 55)
    assert not index.maybe_append(1000, 57)  # timestamp must grow
    assert not index.maybe_append(900, 58)
    assert index.maybe_append(2000, 60)
    assert index.maybe_append(3000, 70)
    assert path.read_bytes()[:12] == struct.pack(">qi", 1000, 5)
    assert index.entries == 3
    assert index.lookup(999) == TimestampOffset(-1, 50)
    assert index.lookup(1000) == TimestampOffset(1000, 55)
    assert index.lookup(2500) == TimestampOffset(2000, 60)
    assert index.lookup(10**15) == TimestampOffset(3000, 70)
    assert index.last_entry() == TimestampOffset(3000, 70)
    with pytest.raises(InvalidOffsetException):
        index.maybe_append(4000, 65)
    index.close()
    reopened = TimeIndex(path, 50, 1200)
    assert reopened.last_entry() == TimestampOffset(3000, 70)
    assert reopened.lookup(2999) == TimestampOffset(2000, 60)
    reopened.truncate_to(60)
    assert reopened.last_entry() == TimestampOffset(1000, 55)
    reopened.sanity_check()
    reopened.close()


def test_time_index_sanity_check_detects_decreasing(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(struct.pack(">qiqi", 5000, 1, 10, 2))
    index = TimeIndex(path, 0, 1200)
    with pytest.raises(CorruptIndexException):
        index.sanity_check()
    index.close()
