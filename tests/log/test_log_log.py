"""Log: appends, reads, rolls, retention, DeleteRecords, ListOffsets, recovery, truncation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sluice.base.clock import ManualClock
from sluice.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendOrigin,
    CorruptRecordException,
    InvalidRecordException,
    Log,
    LogConfig,
    OffsetOutOfRangeException,
    OffsetsOutOfOrderException,
    RecordBatchTooLargeException,
    RecordTooLargeException,
    UnexpectedAppendOffsetException,
)
from sluice.log.file_work import FileWork
from sluice.protocol.records.batch import iter_batches
from support.logs import START_MS
from support.records import Rec, build_batch, decode_batches, values_of

DAY = 24 * 3600 * 1000


def _cfg(**kw: object) -> LogConfig:
    base: dict[str, object] = {"index_interval_bytes": 256, "file_delete_delay_ms": 0}
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def _batch(clock: ManualClock, n: int = 2, tag: str = "m", size: int = 20) -> bytes:
    return build_batch(
        [
            Rec(f"{tag}{i}".encode().ljust(size, b"."), timestamp=clock.milliseconds())
            for i in range(n)
        ]
    )


def _read_all(
    log: Log, start: int | None = None, max_offset: int | None = None
) -> list[tuple[int, bytes | None]]:
    offset = log.log_start_offset if start is None else start
    out: list[tuple[int, bytes | None]] = []
    end = log.log_end_offset if max_offset is None else max_offset
    while offset < end:
        info = log.read(offset, 300, max_offset)
        assert info.size > 0
        for record_offset, value in values_of(info.read()):
            if record_offset >= offset:
                out.append((record_offset, value))
        offset = out[-1][0] + 1
    return out


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


def test_append_read_round_trip_across_segments(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "orders-0", _cfg(segment_bytes=600), clock=clock)
    assert (log.topic, log.partition) == ("orders", 0)
    expected = []
    for i in range(40):
        info = log.append_as_leader(_batch(clock, 3, tag=f"b{i}-"), leader_epoch=5)
        assert (info.first_offset, info.last_offset, info.record_count) == (3 * i, 3 * i + 2, 3)
        assert info.log_append_time == -1 and info.last_leader_epoch == 5
        expected += [(3 * i + j, f"b{i}-{j}".encode().ljust(20, b".")) for j in range(3)]
    assert log.log_end_offset == 120
    assert log.number_of_segments > 5
    assert all(s.size <= 600 for s in log.segments)
    assert _read_all(log) == expected
    for header in log.read(0, 10**6).records.batches():
        assert header.partition_leader_epoch == 5
    log.close()
    reopened = Log(tmp_path / "orders-0", _cfg(segment_bytes=600), clock=clock)
    assert reopened.log_end_offset == 120
    assert _read_all(reopened) == expected
    reopened.close()


def test_bytes_are_not_modified_but_bytearray_is_rewritten(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = Log(tmp_path / "t-0", _cfg(), clock=clock)
    log.append_as_leader(_batch(clock), 0)
    raw = _batch(clock)
    frozen = bytes(raw)
    log.append_as_leader(raw, 0)
    assert raw == frozen
    buf = bytearray(_batch(clock))
    log.append_as_leader(buf, 0)
    assert iter_batches(buf).__next__().base_offset == 4
    log.close()


def test_roll_by_size_and_by_time(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "t-0", _cfg(segment_bytes=10_000, segment_ms=1000), clock=clock)
    log.append_as_leader(_batch(clock), 0)
    clock.advance(1000)
    log.append_as_leader(_batch(clock), 0)
    assert log.number_of_segments == 1  # exactly segment.ms old: not yet
    clock.advance(1)
    log.append_as_leader(_batch(clock), 0)
    assert [s.base_offset for s in log.segments] == [0, 4]
    batch = _batch(clock)
    big = Log(tmp_path / "u-0", _cfg(segment_bytes=len(batch) * 3), clock=clock)
    for _ in range(7):
        big.append_as_leader(_batch(clock), 0)
    assert [s.base_offset for s in big.segments] == [0, 6, 12]
    log.close()
    big.close()


def test_fetch_bounded_by_high_watermark_and_max_bytes(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "t-0", _cfg(), clock=clock)
    for _ in range(10):
        log.append_as_leader(_batch(clock, 2), 0)
    size = next(iter_batches(log.read(0, 10**6).read())).size_in_bytes
    assert log.read(0, size * 3).size == size * 3
    assert log.read(0, size * 3 - 1).size == size * 2
    assert log.read(0, 5, min_one_message=True).size == size
    assert log.read(0, 5, min_one_message=False).size == 0
    # high watermark 6: batches holding 0..5 only
    assert [o for o, _ in values_of(log.read(0, 10**6, 6).read())] == list(range(6))
    assert log.read(6, 10**6, 6).size == 0
    assert log.read(8, 10**6, 6).size == 0  # above the HW but within the log: empty
    info = log.read(20, 10**6)
    assert info.size == 0 and info.fetch_offset_metadata.message_offset == 20
    log.close()


def test_offset_out_of_range(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "t-0", _cfg(), clock=clock)
    for _ in range(3):
        log.append_as_leader(_batch(clock), 0)
    with pytest.raises(OffsetOutOfRangeException) as info:
        log.read(7, 100)
    assert info.value.error_name == "OFFSET_OUT_OF_RANGE"
    log.delete_records_before(2)
    with pytest.raises(OffsetOutOfRangeException):
        log.read(1, 100)
    assert log.read(2, 100).size > 0
    with pytest.raises(OffsetOutOfRangeException):
        log.delete_records_before(7)
    log.close()


def test_corrupt_and_oversized_appends_rejected(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "t-0", _cfg(max_message_bytes=200, segment_bytes=400), clock=clock)
    bad = bytearray(_batch(clock))
    bad[-2] ^= 0x10
    with pytest.raises(CorruptRecordException) as corrupt:
        log.append_as_leader(bad, 0)
    assert corrupt.value.error_name == "CORRUPT_MESSAGE"
    with pytest.raises(CorruptRecordException):
        log.append_as_leader(_batch(clock)[:-3], 0)
    with pytest.raises(RecordTooLargeException) as large:
        log.append_as_leader(_batch(clock, 10), 0)
    assert large.value.error_name == "MESSAGE_TOO_LARGE"
    with pytest.raises(RecordBatchTooLargeException) as too_many:
        log.append_as_leader(_batch(clock) * 6, 0)
    assert too_many.value.error_name == "RECORD_LIST_TOO_LARGE"
    with pytest.raises(InvalidRecordException):
        log.append_as_leader(build_batch([b"x"], control=True), 0)
    log.append_as_leader(build_batch([b"x"], control=True), 0, origin=AppendOrigin.COORDINATOR)
    assert log.log_end_offset == 1
    log.close()


def test_log_append_time(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "t-0", _cfg(message_timestamp_type="LogAppendTime"), clock=clock)
    batch = build_batch([Rec(b"a", timestamp=5), Rec(b"b", timestamp=6)])
    info = log.append_as_leader(batch, 0)
    assert info.log_append_time == clock.milliseconds() == info.max_timestamp
    ((_fields, records),) = decode_batches(log.read(0, 1000).read())
    assert [r.timestamp for r in records] == [clock.milliseconds(), clock.milliseconds()]
    assert log.fetch_offset_by_timestamp(clock.milliseconds()) == (clock.milliseconds(), 0, 0)
    log.close()


def test_retention_by_time_and_size_never_active(tmp_path: Path, clock: ManualClock) -> None:
    one = len(_batch(clock))
    cfg = _cfg(segment_bytes=one * 2, retention_ms=DAY)
    log = Log(tmp_path / "t-0", cfg, clock=clock)
    for _ in range(6):
        log.append_as_leader(_batch(clock), 0)
        clock.advance(1000)
    assert log.number_of_segments == 3
    assert log.delete_old_segments() == 0
    clock.advance(DAY + 1)
    assert log.delete_old_segments(high_watermark=4) == 1  # second segment holds 4..7
    assert log.delete_old_segments() == 1
    assert log.number_of_segments == 1 and log.log_start_offset == 8
    assert _read_all(log)[0][0] == 8
    log.update_config(_cfg(segment_bytes=one * 2, retention_ms=-1, retention_bytes=one * 3))
    for _ in range(6):
        log.append_as_leader(_batch(clock), 0)
    assert log.number_of_segments == 4 and log.size == one * 8
    assert log.delete_old_segments() == 2
    assert log.size == one * 4 and log.log_start_offset == 16
    log.update_config(_cfg(segment_bytes=one * 2, retention_bytes=0))
    log.delete_old_segments()
    assert log.number_of_segments == 1 and log.active_segment.size > 0
    log.update_config(_cfg(cleanup_policy="compact", retention_bytes=0))
    log.roll()
    assert log.delete_old_segments() == 0
    log.close()


def _three_expired_segments(
    tmp_path: Path, clock: ManualClock, file_work: FileWork | None = None
) -> tuple[int, Log]:
    """A log of three one-batch segments, all past retention (retention.bytes=0), whose
    deleted files linger 100 ms and are then deleted, not kept for reuse (segment.recycle
    is tested in test_log_recycle.py); and the size of one batch."""
    one = len(_batch(clock))
    log = Log(
        tmp_path / "t-0",
        _cfg(segment_bytes=one, retention_bytes=0, file_delete_delay_ms=100, segment_recycle=False),
        clock=clock,
        file_work=file_work,
    )
    for _ in range(3):
        log.append_as_leader(_batch(clock), 0)
    return one, log


def test_deleted_segment_files_linger_for_file_delete_delay(
    tmp_path: Path, clock: ManualClock
) -> None:
    one, log = _three_expired_segments(tmp_path, clock)
    info = log.read(0, 1000)
    assert log.delete_old_segments() == 2
    assert len(list(tmp_path.glob("t-0/*.log.deleted"))) == 2
    assert len(info.read()) == one  # an in-flight slice stays readable
    clock.advance(100)
    assert log.delete_pending_files() == 2
    assert not list(tmp_path.glob("t-0/*.deleted"))
    log.close()


def test_a_file_thread_removes_segment_files_on_its_own_thread(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from sluice.log.file_work import FileThread
    from sluice.log.segment import LogSegment

    threads: list[str] = []
    close_for_removal = LogSegment.close_for_removal

    def recording_removal(self: LogSegment, with_data: bool = True) -> Callable[[], None]:
        remove = close_for_removal(self, with_data)  # descriptors: closed on the log's thread

        def recorded() -> None:
            threads.append(threading.current_thread().name)
            remove()

        return recorded

    monkeypatch.setattr(LogSegment, "close_for_removal", recording_removal)
    file_thread = FileThread("file-work-under-test")
    file_thread.start()
    try:
        _one, log = _three_expired_segments(tmp_path, clock, file_thread)
        assert log.delete_old_segments() == 2
        clock.advance(100)
        assert log.delete_pending_files() == 2
        log.close()
    finally:
        assert file_thread.stop(timeout_s=10.0)  # runs what is queued, then ends
    assert not file_thread.is_alive
    assert not list(tmp_path.glob("t-0/*.deleted"))
    assert threads == ["file-work-under-test", "file-work-under-test"]


def test_delete_records_persists_log_start_offset(tmp_path: Path, clock: ManualClock) -> None:
    one = len(_batch(clock))
    log = Log(tmp_path / "t-0", _cfg(segment_bytes=one * 2), clock=clock)
    for _ in range(5):
        log.append_as_leader(_batch(clock), 0)
    assert log.delete_records_before(5) == 5
    assert log.number_of_segments == 2  # 0..3 deleted; 4..7 holds the new start
    assert not log.maybe_increment_log_start_offset(3)
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 5  # type: ignore[union-attr]
    assert _read_all(log)[0][0] == 5
    log.close()
    checkpoint = (tmp_path / "t-0" / "log-start-offset-checkpoint").read_text().splitlines()
    assert checkpoint == ["0", "1", "t 0 5"]
    reopened = Log(tmp_path / "t-0", _cfg(segment_bytes=one * 2), clock=clock)
    assert reopened.log_start_offset == 5
    with pytest.raises(OffsetOutOfRangeException):
        reopened.read(4, 100)
    reopened.close()


def test_fetch_offset_by_timestamp(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "t-0", _cfg(segment_bytes=500, index_interval_bytes=64), clock=clock)
    stamps = [100, 50, 200, 300, 250, 400, 1000, 500, 600, 700, 800, 900]
    for i in range(0, len(stamps), 2):
        log.append_as_leader(
            build_batch([Rec(b"x" * 30, timestamp=t) for t in stamps[i : i + 2]]), 7
        )
    assert log.number_of_segments > 1
    for target in (0, 50, 51, 100, 101, 201, 250, 251, 401, 1000):
        expected = next(i for i, t in enumerate(stamps) if t >= target)
        found = log.fetch_offset_by_timestamp(target)
        assert found is not None and (found.timestamp, found.offset) == (stamps[expected], expected)
        assert found.leader_epoch == 7
    assert log.fetch_offset_by_timestamp(1001) is None
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (-1, 12, 7)
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (-1, 0, 7)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (1000, 6, 7)
    log.delete_records_before(8)
    found = log.fetch_offset_by_timestamp(0)
    assert found is not None and found.offset == 8
    log.close()


def _segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


@pytest.mark.parametrize("damage", ["cut", "flip"])
def test_recovery_after_torn_or_corrupt_tail(
    tmp_path: Path, clock: ManualClock, damage: str
) -> None:
    directory = tmp_path / "t-0"
    one = len(_batch(clock))
    log = Log(directory, _cfg(segment_bytes=one * 4), clock=clock)
    for i in range(10):
        log.append_as_leader(_batch(clock, tag=f"r{i}-"), 0)
    expected = _read_all(log)
    log.close()
    last = _segment_files(directory)[-1]
    data = bytearray(last.read_bytes())
    assert len(data) == 2 * one  # offsets 16..19
    if damage == "cut":
        data = data[: one + one // 2]
    else:
        data[one + 40] ^= 0x01
    last.write_bytes(bytes(data))
    recovered = Log(directory, _cfg(segment_bytes=one * 4), clock=clock)  # no clean marker
    assert recovered.log_end_offset == 18
    assert _read_all(recovered) == expected[:18]
    assert last.stat().st_size == one
    info = recovered.append_as_leader(_batch(clock, tag="new"), 0)
    assert info.first_offset == 18
    recovered.close()


def test_recovery_deletes_segments_after_corruption(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "t-0"
    one = len(_batch(clock))
    log = Log(directory, _cfg(segment_bytes=one * 2), clock=clock)
    for _ in range(6):
        log.append_as_leader(_batch(clock), 0)
    log.close()
    first = _segment_files(directory)[0]
    data = bytearray(first.read_bytes())
    data[one + 50] ^= 0xFF
    first.write_bytes(bytes(data))
    (directory / "recovery-point-offset-checkpoint").unlink()
    recovered = Log(directory, _cfg(segment_bytes=one * 2), clock=clock)
    assert recovered.log_end_offset == 2 and recovered.number_of_segments == 1
    recovered.close()


def test_recovery_point_limits_recovery(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sluice.log.segment import LogSegment, SegmentRecovery

    directory = tmp_path / "t-0"
    one = len(_batch(clock))
    log = Log(directory, _cfg(segment_bytes=one * 2), clock=clock)
    for _ in range(6):
        log.append_as_leader(_batch(clock), 0)
    log.flush(8)
    assert log.recovery_point == 8
    log.close()
    calls: list[int] = []
    original = LogSegment.recover

    def spy(self: LogSegment, *args: Any, **kwargs: Any) -> SegmentRecovery:
        calls.append(self.base_offset)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "recover", spy)
    Log(directory, _cfg(segment_bytes=one * 2), clock=clock).close()
    assert calls == [8]
    calls.clear()
    Log(directory, _cfg(segment_bytes=one * 2), clock=clock, had_clean_shutdown=True).close()
    assert calls == []


def test_missing_or_corrupt_index_is_rebuilt_even_after_clean_shutdown(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    log = Log(directory, _cfg(index_interval_bytes=64), clock=clock)
    for _ in range(20):
        log.append_as_leader(_batch(clock), 0)
    expected = _read_all(log)
    log.close()
    index = directory / "00000000000000000000.index"
    original = index.read_bytes()
    index.unlink()
    (directory / "00000000000000000000.timeindex").write_bytes(b"\x01\x02\x03")
    reopened = Log(directory, _cfg(index_interval_bytes=64), clock=clock, had_clean_shutdown=True)
    assert _read_all(reopened) == expected
    reopened.close()
    assert index.read_bytes() == original


def test_follower_append_keeps_offsets(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "t-0", _cfg(), clock=clock)
    b1 = build_batch([b"a", b"b"], base_offset=0, partition_leader_epoch=3)
    b2 = build_batch([b"c"], base_offset=2, partition_leader_epoch=4)
    b3 = build_batch([b"d", b"e"], base_offset=10, partition_leader_epoch=4)
    info = log.append_as_follower(b1 + b2 + b3[:20])  # partial trailing batch dropped
    assert (info.first_offset, info.last_offset, info.valid_bytes) == (0, 2, len(b1) + len(b2))
    assert info.last_leader_epoch == 4
    log.append_as_follower(b3)  # gap (compaction) allowed
    assert log.log_end_offset == 12
    assert values_of(log.read(10, 1000).read()) == [(10, b"d"), (11, b"e")]
    with pytest.raises(UnexpectedAppendOffsetException):
        log.append_as_follower(build_batch([b"x"], base_offset=11))
    with pytest.raises(OffsetsOutOfOrderException):
        log.append_as_follower(
            build_batch([b"x"], base_offset=20) + build_batch([b"y"], base_offset=20)
        )
    log.close()


def test_truncate_to(tmp_path: Path, clock: ManualClock) -> None:
    one = len(_batch(clock))
    log = Log(tmp_path / "t-0", _cfg(segment_bytes=one * 2), clock=clock)
    for i in range(6):
        log.append_as_leader(_batch(clock, tag=f"t{i}-"), 0)
    expected = _read_all(log)
    assert not log.truncate_to(12)
    assert log.truncate_to(7)  # mid-batch: 6..7 goes, log ends at 6
    assert log.log_end_offset == 6 and log.number_of_segments == 2
    assert _read_all(log) == expected[:6]
    assert log.append_as_leader(_batch(clock), 0).first_offset == 6
    assert log.truncate_to(0)
    assert log.log_end_offset == 0 and log.log_start_offset == 0 and log.number_of_segments == 1
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.append_as_leader(_batch(clock), 0).first_offset == 100
    log.close()
    reopened = Log(tmp_path / "t-0", _cfg(segment_bytes=one * 2), clock=clock)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (100, 102)
    reopened.close()


def test_flush_messages_and_flush_ms(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "t-0", _cfg(flush_messages=4, flush_ms=1000), clock=clock)
    log.append_as_leader(_batch(clock), 0)
    assert log.recovery_point == 0 and log.unflushed_messages == 2
    log.append_as_leader(_batch(clock), 0)
    assert log.recovery_point == 4
    log.append_as_leader(_batch(clock), 0)
    assert not log.flush_if_due()
    clock.advance(1000)
    assert log.flush_if_due() and log.recovery_point == 6
    log.close()


def test_closed_log_rejects_operations(tmp_path: Path, clock: ManualClock) -> None:
    from sluice.log import KafkaStorageException

    log = Log(tmp_path / "t-0", _cfg(), clock=clock)
    log.close()
    with pytest.raises(KafkaStorageException):
        log.append_as_leader(_batch(clock), 0)
    with pytest.raises(KafkaStorageException):
        log.read(0, 10)


def test_time_roll_uses_clock_when_batches_have_no_timestamp(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = Log(tmp_path / "t-0", _cfg(segment_ms=1000), clock=clock)
    untimed = build_batch([Rec(b"x", timestamp=-1)])
    log.append_as_leader(untimed, 0)
    clock.advance(1001)
    log.append_as_leader(untimed, 0)
    assert [s.base_offset for s in log.segments] == [0, 1]
    log.close()


def test_log_config_kafka_names() -> None:
    from sluice.log import ConfigException

    config = LogConfig.from_properties(
        {"segment.bytes": "1048576", "retention.ms": -1, "cleanup.policy": "compact,delete"}
    )
    assert config.segment_bytes == 1048576 and config.retention_ms == -1
    assert config.delete_enabled and config.compact_enabled
    defaults = LogConfig()
    assert defaults.max_message_bytes == 1048588 and defaults.index_interval_bytes == 4096
    assert defaults.segment_bytes == 2**30 and defaults.retention_bytes == -1
    assert LogConfig.from_properties(config.to_properties()) == config
    assert "message.timestamp.type" in LogConfig.kafka_names()
    with pytest.raises(ConfigException) as info:
        LogConfig.from_properties({"segment.bytes": "1"})
    assert info.value.error_name == "INVALID_CONFIG"
    with pytest.raises(ConfigException):
        LogConfig.from_properties({"no.such.config": "1"})
    with pytest.raises(ConfigException):
        LogConfig(message_timestamp_type="WallClock")
