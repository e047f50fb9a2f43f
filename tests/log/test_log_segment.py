"""LogSegment: append, header-only reads, timestamp search, recovery, truncation, roll rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluice.base.clock import ManualClock
from sluice.log.segment import LogSegment
from sluice.protocol.records.batch import iter_batches
from support.records import Rec, build_batch, values_of


def _open(tmp_path: Path, base: int = 0, interval: int = 200, **kw: object) -> LogSegment:
    return LogSegment.open(tmp_path, base, index_interval_bytes=interval, **kw)  # type: ignore[arg-type]


def _fill(
    segment: LogSegment, first: int, batches: int, per_batch: int = 2, ts0: int = 1000
) -> int:
    """Append ``batches`` batches of ``per_batch`` records; returns the next offset."""
    offset = first
    for i in range(batches):
        recs = [Rec(b"v%06d" % (offset + j), timestamp=ts0 + offset + j) for j in range(per_batch)]
        data = build_batch(recs, base_offset=offset)
        offset += per_batch
        segment.append(offset - 1, ts0 + offset - 1, data)
        del i
    return offset


def test_file_names_and_append(tmp_path: Path) -> None:
    segment = _open(tmp_path, 1234)
    assert list(tmp_path.iterdir()) == []  # each file is created by its first write
    end = _fill(segment, 1234, 20)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000001234.index",
        "00000000000000001234.log",
        "00000000000000001234.timeindex",
    ]
    assert segment.read_next_offset() == end == 1274
    assert segment.size == (tmp_path / "00000000000000001234.log").stat().st_size
    assert segment.offset_index.entries > 0
    assert segment.max_timestamp_so_far == 1000 + 1273
    segment.close()


def test_read_returns_whole_batches(tmp_path: Path) -> None:
    segment = _open(tmp_path)
    _fill(segment, 0, 50)
    batch_size = next(segment.batches()).size_in_bytes
    info = segment.read(17, batch_size * 3 + 10)
    assert info is not None
    assert info.fetch_offset_metadata.message_offset == 17
    assert info.records.position == 8 * batch_size  # batch holding 16-17
    assert info.size == 3 * batch_size
    assert [o for o, _ in values_of(info.read())] == list(range(16, 22))
    # max_size smaller than the first batch
    empty = segment.read(17, batch_size - 1)
    assert empty is not None and empty.size == 0
    one = segment.read(17, 1, min_one_message=True)
    assert one is not None and one.size == batch_size
    # bounded by an offset (high watermark) and by a position
    bounded = segment.read(10, 10**6, max_offset=20)
    assert bounded is not None
    assert [o for o, _ in values_of(bounded.read())] == list(range(10, 20))
    assert segment.read(19, 10**6, max_offset=19) is not None
    assert segment.read(19, 10**6, max_offset=19).size == 0  # type: ignore[union-attr]
    by_position = segment.read(0, 10**6, max_position=batch_size * 2 + 5)
    assert by_position is not None and by_position.size == 2 * batch_size
    assert segment.read(100, 10) is None  # beyond this segment
    segment.close()


def test_translate_offset_uses_index_then_headers(tmp_path: Path) -> None:
    segment = _open(tmp_path, interval=100)
    _fill(segment, 0, 40)
    for target in (0, 1, 2, 39, 40, 79):
        header = segment.translate_offset(target)
        assert header is not None and header.base_offset <= target <= header.last_offset
    assert segment.translate_offset(80) is None
    segment.close()


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    segment = _open(tmp_path, interval=100)
    offset = 0
    stamps = [5, 1, 9, 9, 20, 15, 30, 31, 40, 41, 50, 51]
    for i in range(0, len(stamps), 2):
        data = build_batch([Rec(b"a", timestamp=stamps[i]), Rec(b"b", timestamp=stamps[i + 1])],
                           base_offset=offset)  # fmt: skip
        segment.append(offset + 1, max(stamps[i : i + 2]), data)
        offset += 2
    for target in (0, 1, 5, 6, 9, 10, 16, 20, 21, 31, 45, 51):
        expected = next(i for i, t in enumerate(stamps) if t >= target)
        found = segment.find_offset_by_timestamp(target)
        assert found is not None and found.offset == expected, target
        assert found.timestamp == stamps[expected]
    assert segment.find_offset_by_timestamp(52) is None
    found = segment.find_offset_by_timestamp(0, starting_offset=3)
    assert found is not None and found.offset == 3
    top = segment.find_max_timestamp()
    assert top is not None and (top.timestamp, top.offset) == (51, 11)
    segment.close()


def test_recover_rebuilds_identical_indexes(tmp_path: Path) -> None:
    segment = _open(tmp_path, interval=150)
    _fill(segment, 0, 60)
    segment.close()
    original = [
        (tmp_path / f"00000000000000000000{s}").read_bytes() for s in (".index", ".timeindex")
    ]
    reopened = _open(tmp_path, interval=150)
    assert reopened.recover(10**6) == (0, None, False)
    reopened.close()
    rebuilt = [
        (tmp_path / f"00000000000000000000{s}").read_bytes() for s in (".index", ".timeindex")
    ]
    assert rebuilt == original
    assert len(original[0]) > 0


@pytest.mark.parametrize("damage", ["cut", "flip", "zeros"])
def test_recover_truncates_torn_or_corrupt_tail(tmp_path: Path, damage: str) -> None:
    segment = _open(tmp_path)
    _fill(segment, 0, 10)
    segment.close()
    path = tmp_path / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    sizes = [h.size_in_bytes for h in iter_batches(data)]
    good = sum(sizes[:-1])
    if damage == "cut":
        data = data[: good + 30]
    elif damage == "flip":
        data[good + 70] ^= 0x40
    else:
        data += b"\x00" * 100
        good = len(data) - 100
    path.write_bytes(bytes(data))
    reopened = _open(tmp_path)
    result = reopened.recover(10**6)
    assert result.truncated == len(data) - good and not result.kept
    assert result.stop is not None and result.stop.position == good
    problem = {"cut": "30 bytes remain", "flip": "CRC", "zeros": "batchLength 0"}[damage]
    assert problem in result.stop.problem
    assert reopened.size == good
    expected_next = 18 if damage != "zeros" else 20
    assert reopened.read_next_offset() == expected_next
    reopened.close()


def test_truncate_to(tmp_path: Path) -> None:
    segment = _open(tmp_path, interval=100)
    _fill(segment, 0, 30)
    assert segment.truncate_to(30) > 0
    assert segment.read_next_offset() == 30
    assert segment.offset_index.last_offset < 30
    assert segment.max_timestamp_so_far == 1000 + 29
    segment.truncate_to(25)  # mid-batch: the batch holding 24..25 goes too
    assert segment.read_next_offset() == 24
    segment.truncate_to(0)
    assert segment.size == 0 and segment.read_next_offset() == 0
    segment.close()


def test_should_roll_rules(tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    segment = _open(tmp_path, clock=clock, max_index_size=10 * 1024 * 1024)
    kw = dict(max_segment_bytes=1000, max_segment_ms=500, roll_jitter_ms=0,
              max_offset_in_messages=5, now_ms=clock.milliseconds())  # fmt: skip
    assert not segment.should_roll(max_timestamp_in_messages=10_000, messages_size=100, **kw)
    assert segment.should_roll(max_timestamp_in_messages=10_000, messages_size=1001, **kw)
    data = build_batch([Rec(b"x", timestamp=10_000)])
    segment.append(0, 10_000, data)
    # time: by message timestamps relative to the segment's first batch
    assert not segment.should_roll(max_timestamp_in_messages=10_500, messages_size=1, **kw)
    assert segment.should_roll(max_timestamp_in_messages=10_501, messages_size=1, **kw)
    kw["max_offset_in_messages"] = 2**31
    assert segment.should_roll(max_timestamp_in_messages=10_000, messages_size=1, **kw)
    segment.close()


def test_rename_and_delete(tmp_path: Path) -> None:
    segment = _open(tmp_path)
    _fill(segment, 0, 2)
    segment.on_become_inactive_segment()  # a time index entry, as at a roll
    segment.change_file_suffixes("", ".deleted")
    # the offset index has no entry (two small batches), so no file
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"{0:020d}.log.deleted", f"{0:020d}.timeindex.deleted"]
    assert segment.read(0, 1000) is not None  # still readable through the open descriptor
    segment.delete()
    assert list(tmp_path.iterdir()) == []


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_translate_offset_from_recent_appends_matches_a_full_scan(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """Searches that start where a recent append began find what a scan from the
    segment's first byte finds, across appends of several batches, truncations (also to
    the middle of a batch) and more appends than the segment remembers."""
    segment = _open(tmp_path_factory.mktemp("seg"), interval=data.draw(st.sampled_from([60, 400])))
    end = 0
    for _ in range(data.draw(st.integers(1, 50))):
        if end and data.draw(st.integers(0, 5)) == 0:
            segment.truncate_to(data.draw(st.integers(0, end)))
            end = segment.read_next_offset()
        else:
            chunk = b""
            for _ in range(data.draw(st.integers(1, 3))):
                count = data.draw(st.integers(1, 4))
                chunk += build_batch(
                    [Rec(b"v%d" % (end + j)) for j in range(count)], base_offset=end
                )
                end += count
            segment.append(end - 1, 1000 + end, chunk)
        for target in range(end + 2):
            found = segment.translate_offset(target)
            scanned = segment.log.search_for_offset(target, 0)
            assert (found and (found.position, found.base_offset)) == (
                scanned and (scanned.position, scanned.base_offset)
            )
    segment.close()
