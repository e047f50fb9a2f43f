"""LogManager: log.dirs ownership, clean-shutdown marker, create/open/delete of logs."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sluice.base.clock import ManualClock
from sluice.log import (
    InvalidTopicException,
    KafkaStorageException,
    LogConfig,
    LogManager,
    TopicPartition,
)
from sluice.log.manager import CLEAN_SHUTDOWN_FILE
from sluice.log.segment import LogSegment, SegmentRecovery
from support.logs import START_MS
from support.records import Rec, build_batch


def _batch(clock: ManualClock, n: int = 2) -> bytes:
    return build_batch([Rec(b"value-%d" % i, timestamp=clock.milliseconds()) for i in range(n)])


def _cfg(**kw: object) -> LogConfig:
    return LogConfig(**{"file_delete_delay_ms": 0, **kw})  # type: ignore[arg-type]


def test_create_reopen_and_marker(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    manager = LogManager(tmp_path, _cfg(), clock=clock)
    assert not manager.had_clean_shutdown(tmp_path)
    log = manager.get_or_create_log("orders", 2)
    assert manager.get_or_create_log("orders", 2) is log
    assert log.dir == tmp_path / "orders-2"
    log.append_as_leader(_batch(clock), 0)
    manager.get_or_create_log("my-topic.v2", 0).append_as_leader(_batch(clock, 3), 0)
    manager.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()

    reopened = LogManager(tmp_path, _cfg(), clock=clock)
    assert reopened.had_clean_shutdown(tmp_path)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # removed once loaded
    assert set(reopened.logs) == {TopicPartition("orders", 2), TopicPartition("my-topic.v2", 0)}
    assert reopened.get_log("my-topic.v2", 0).log_end_offset == 3  # type: ignore[union-attr]
    assert reopened.get_log("nope", 0) is None
    reopened.shutdown()


def test_clean_marker_skips_recovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock(START_MS)
    with LogManager(tmp_path, _cfg(), clock=clock) as manager:
        log = manager.get_or_create_log("t", 0)
        for _ in range(3):
            log.append_as_leader(_batch(clock), 0)
    calls: list[int] = []
    original = LogSegment.recover

    def spy(self: LogSegment, *args: Any, **kwargs: Any) -> SegmentRecovery:
        calls.append(self.base_offset)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "recover", spy)
    segment_file = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(segment_file.read_bytes())
    data[-3] ^= 0xFF  # payload damage: only a CRC check would notice
    segment_file.write_bytes(bytes(data))

    manager = LogManager(tmp_path, _cfg(), clock=clock)  # marker present: no recovery
    assert calls == []
    assert manager.get_log("t", 0).log_end_offset == 6  # type: ignore[union-attr]
    # simulate a crash: no shutdown, so no marker
    for log in manager:
        log.close()
    manager._release_locks()

    # ... before its recovery point was checkpointed: the damage is above it
    (tmp_path / "t-0" / "recovery-point-offset-checkpoint").unlink()
    crashed = LogManager(tmp_path, _cfg(), clock=clock)
    assert not crashed.had_clean_shutdown(tmp_path)
    assert calls == [0]
    assert crashed.get_log("t", 0).log_end_offset == 4  # type: ignore[union-attr]
    crashed.shutdown()


def test_delete_log_and_leftover_delete_dirs(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    manager = LogManager(tmp_path, _cfg(), clock=clock)
    manager.get_or_create_log("t", 0).append_as_leader(_batch(clock), 0)
    assert manager.delete_log("t", 0)
    assert not manager.delete_log("t", 0)
    assert not (tmp_path / "t-0").exists()
    manager.shutdown()
    leftover = tmp_path / "t-1.abc-delete"
    leftover.mkdir()
    (tmp_path / "not-a-partition").mkdir()
    manager = LogManager(tmp_path, _cfg(), clock=clock)
    assert not leftover.exists() and len(manager) == 0
    manager.shutdown()


def test_multiple_dirs_lock_and_validation(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, _cfg(), clock=clock)
    logs = [manager.get_or_create_log("t", p) for p in range(4)]
    assert sorted(log.dir.parent.name for log in logs) == ["a", "a", "b", "b"]
    with pytest.raises(KafkaStorageException):
        LogManager(dirs[0], _cfg(), clock=clock)  # locked by the running manager
    with pytest.raises(InvalidTopicException):
        manager.get_or_create_log("../etc", 0)
    manager.shutdown()
    with pytest.raises(KafkaStorageException):
        manager.get_or_create_log("t", 9)
    again = LogManager(dirs, _cfg(), clock=clock)
    assert len(again) == 4
    again.shutdown()


def test_retention_flush_and_topic_configs(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    one = len(_batch(clock))
    special = _cfg(segment_bytes=one, retention_bytes=0)
    manager = LogManager(tmp_path, _cfg(flush_ms=1000), clock=clock,
                         topic_config=lambda topic: special if topic == "s" else None)  # fmt: skip
    small = manager.get_or_create_log("s", 0)
    plain = manager.get_or_create_log("p", 0)
    for _ in range(3):
        small.append_as_leader(_batch(clock), 0)
        plain.append_as_leader(_batch(clock), 0)
    assert small.number_of_segments == 3
    assert manager.cleanup_logs({TopicPartition("s", 0): 2}) == 1
    assert manager.cleanup_logs() == 1
    assert small.number_of_segments == 1 and plain.number_of_segments == 1
    assert manager.flush_dirty_logs() == 0
    clock.advance(1000)
    assert manager.flush_dirty_logs() == 1  # "s" keeps the default flush.ms (never)
    assert plain.unflushed_messages == 0 and small.unflushed_messages > 0
    # the rolls flushed the segments they left (inline file work: at once)
    assert small.recovery_point == small.active_segment.base_offset
    manager.update_config("p", _cfg(segment_bytes=one))
    plain.append_as_leader(_batch(clock), 0)
    assert plain.number_of_segments == 2
    manager.shutdown()


def test_logs_created_off_the_manager_then_added(tmp_path: Path) -> None:
    """new_log_dirs plans where a topic's new logs go (spread over the dirs as one by one
    creation would), create_log makes each on a worker thread, add_log manages it."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    clock = ManualClock(START_MS)
    manager = LogManager(dirs, _cfg(), clock=clock)
    existing = manager.get_or_create_log("t", 1)  # in a: b is now the least used
    planned = manager.new_log_dirs("t", range(4))
    assert planned == {0: dirs[1] / "t-0", 2: dirs[0] / "t-2", 3: dirs[1] / "t-3"}
    with ThreadPoolExecutor(1) as worker:
        logs = worker.submit(lambda: {p: manager.create_log(d, _cfg()) for p, d in planned.items()})
        created = logs.result(timeout=30)
    assert manager.get_log("t", 0) is None  # not managed until added
    for p, log in created.items():
        assert manager.add_log("t", p, log) is log
    assert manager.get_or_create_log("t", 0) is created[0]
    with pytest.raises(KafkaStorageException):
        manager.add_log("t", 1, created[2])
    with pytest.raises(InvalidTopicException):
        manager.new_log_dirs("bad/name", [0])
    with pytest.raises(ValueError):
        manager.new_log_dirs("t", [-1])
    created[0].append_as_leader(_batch(clock), 0)
    assert existing.log_end_offset == 0 and created[0].log_end_offset == 2
    manager.shutdown()
    reopened = LogManager(dirs, _cfg(), clock=clock)
    assert {tp.partition for tp in reopened.logs} == {0, 1, 2, 3}
    reopened.shutdown()


def test_the_manager_hands_its_file_work_to_every_log(tmp_path: Path) -> None:
    """Created and loaded logs alike run their file work (here the removal of expired
    segment files) where the manager's policy says; inline when none is given."""
    from sluice.log.local_log import FlushWork
    from support.logs import START_MS, ManualFileWork

    clock = ManualClock(START_MS)
    one = len(_batch(clock))
    config = _cfg(segment_bytes=one, retention_bytes=0, file_delete_delay_ms=100,
                  segment_recycle=False, segment_prepare_next=False)  # fmt: skip

    def expire(manager: LogManager) -> tuple[int, int]:
        """Roll three segments, remove every inactive one; how many were removed, and
        how many rolls queued the flush of the segment they left."""
        log = manager.get_or_create_log("t", 0)
        for _ in range(3):
            log.append_as_leader(_batch(clock), 0)
        flushes = file_work.queued(FlushWork)
        removed = manager.cleanup_logs()
        assert removed >= 2
        clock.advance(100)
        assert log.delete_pending_files() == removed
        return removed, flushes

    file_work = ManualFileWork()
    manager = LogManager(tmp_path, config, clock=clock, file_work=file_work)
    assert manager.file_work is file_work
    removed, flushes = expire(manager)  # a created log
    assert len(list(tmp_path.glob("t-0/*.log.deleted"))) == removed  # queued, not run
    # a flush of what a roll left; a page drop (at the removal) and a deletion per segment
    assert file_work.run() == flushes + 2 * removed
    assert not list(tmp_path.glob("t-0/*.deleted"))
    manager.shutdown()

    reopened = LogManager(tmp_path, config, clock=clock, file_work=file_work)
    removed, flushes = expire(reopened)  # a loaded log
    assert len(list(tmp_path.glob("t-0/*.log.deleted"))) == removed
    assert file_work.run() == flushes + 2 * removed
    assert not list(tmp_path.glob("t-0/*.deleted"))
    reopened.shutdown()

    inline = LogManager(tmp_path, config, clock=clock)
    expire(inline)
    assert file_work.run() == 0 and not list(tmp_path.glob("t-0/*.deleted"))
    inline.shutdown()
