"""An I/O error takes its log directory offline, as Kafka's LogDirFailureChannel does.

Every write site of a log meets an injected ``OSError`` (``support.disk_faults``: a full
disk is ``ENOSPC`` after a byte budget, the write crossing it short; a failing one
``EIO``): the operation raises ``KafkaStorageException``, the log refuses every use from
then on, the directory is logged once with its errno, the log end offset never passes
what was written, and a restart once the space is back finds every append that returned.
The log manager takes the rest of the directory offline, places new logs in the live
directories only, and writes no clean-shutdown marker where it failed."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest

from sluice.base.clock import ManualClock
from sluice.log import (
    KafkaStorageException,
    Log,
    LogConfig,
    LogDirFailureChannel,
    LogManager,
    TopicPartition,
)
from sluice.log.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
from sluice.log.file_work import InlineFileWork
from sluice.log.manager import CLEAN_SHUTDOWN_FILE
from support.disk_faults import DiskFaults
from support.logs import START_MS, ManualFileWork
from support.records import Rec, build_batch, values_of

CHANNEL_LOGGER = "sluice.log.log_dir_failure_channel"


def _batch(clock: ManualClock, first: int, n: int = 5) -> bytes:
    return build_batch(
        [Rec(b"v%05d" % (first + i) + b"." * 60, timestamp=clock.milliseconds()) for i in range(n)]
    )


def _config(clock: ManualClock, **extra: object) -> LogConfig:
    one = len(_batch(clock, 0))
    settings: dict[str, object] = {
        "segment_bytes": 4 * one,
        "index_interval_bytes": one,
        "file_delete_delay_ms": 0,
        "segment_prepare_next": False,
    }
    settings.update(extra)
    return LogConfig(**settings)  # type: ignore[arg-type]


def _append_until_refused(log: Log, clock: ManualClock) -> list[int]:
    """Append batches until one raises; the first offsets of those that returned."""
    acknowledged: list[int] = []
    while True:
        try:
            info = log.append_as_leader(_batch(clock, log.log_end_offset), 0)
        except KafkaStorageException:
            return acknowledged
        acknowledged.append(info.first_offset)
        assert len(acknowledged) < 10_000, "the injected failure never came"


def _values(log: Log) -> list[bytes | None]:
    out: list[bytes | None] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        records = values_of(log.read(offset, 1 << 20).read())
        out.extend(value for _, value in records)
        offset = records[-1][0] + 1
    return out


def _error_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize(
    ("ops", "budget", "written"),
    [
        (("write", "pwrite", "pwritev"), 0, False),  # the first data write
        (("write", "pwrite", "pwritev"), 1000, False),  # a batch in part: a torn tail
        (("pwrite",), 0, False),  # an offset or time index entry (a pwrite of 8 or 12 bytes)
        (("create",), 0, False),  # a roll's new segment files
        (("fsync",), 0, True),  # a flush.messages flush
    ],
    ids=["data", "torn-data", "index", "roll", "flush"],
)
def test_a_write_that_fails_takes_the_log_offline_and_loses_nothing_acknowledged(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    ops: tuple[str, ...],
    budget: int,
    written: bool,
) -> None:
    """``written``: the refused append's batch is in the log (its flush failed), not
    acknowledged; it may also be found whole after a restart when an index entry failed
    after it, as a write Kafka refuses may be."""
    clock = ManualClock(START_MS)
    channel = LogDirFailureChannel()
    reported: list[Path] = []
    channel.on_offline = reported.append
    config = _config(clock, flush_messages=5 if "fsync" in ops else 2**62)
    log = Log(tmp_path / "t-0", config, clock=clock, log_dir_failure_channel=channel)
    for i in range(3):
        log.append_as_leader(_batch(clock, 5 * i), 0)
    faults = DiskFaults(monkeypatch, tmp_path, errno.ENOSPC, ops)
    faults.arm(budget)
    with caplog.at_level(logging.DEBUG, CHANNEL_LOGGER):
        acknowledged = _append_until_refused(log, clock)
        end = log.log_end_offset
        assert end == 15 + 5 * len(acknowledged) + 5 * written  # nothing past what was written
        for _ in range(3):  # refused at once from now on, logged no more
            with pytest.raises(KafkaStorageException, match="offline"):
                log.append_as_leader(_batch(clock, end), 0)
            with pytest.raises(KafkaStorageException):
                log.read(0, 1 << 20)
    assert log.is_offline and log.log_end_offset == end
    assert reported == [tmp_path] and set(channel.offline_log_dirs) == {tmp_path}
    (line,) = _error_lines(caplog)
    assert str(tmp_path) in line and "ENOSPC" in line
    faults.disarm()  # space freed; the process restarts
    log.close()
    reopened = Log(tmp_path / "t-0", config, clock=clock)
    assert reopened.log_end_offset in (end, end + 5)
    values = _values(reopened)
    assert values == [b"v%05d" % i + b"." * 60 for i in range(len(values))]
    reopened.close()


def test_a_read_that_fails_takes_the_log_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(START_MS)
    log = Log(tmp_path / "t-0", _config(clock), clock=clock)
    log.append_as_leader(_batch(clock, 0), 0)
    real_pread = os.pread

    def pread(fd: int, size: int, at: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".log"):
            raise OSError(errno.EIO, "injected")
        return real_pread(fd, size, at)

    monkeypatch.setattr(os, "pread", pread)
    log.active_segment._forget_appends()  # the read must search the file
    with pytest.raises(KafkaStorageException, match="EIO"):
        log.read(1, 1 << 20)
    monkeypatch.undo()
    assert log.is_offline
    with pytest.raises(KafkaStorageException):
        log.read(0, 1 << 20)
    log.close()


def test_a_failed_checkpoint_write_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The recovery-point checkpoint runs on the file thread: its failure is logged once
    (no traceback), takes the log offline, and leaves the file as it was: the write is
    short and then fails, and neither a torn file nor its temporary file remain."""
    clock = ManualClock(START_MS)
    file_work = ManualFileWork()
    log = Log(tmp_path / "t-0", _config(clock), clock=clock, file_work=file_work)
    path = tmp_path / "t-0" / RECOVERY_POINT_CHECKPOINT
    while log.number_of_segments < 2:
        log.append_as_leader(_batch(clock, log.log_end_offset), 0)
    file_work.run()  # the roll's flush
    log.apply_finished_flushes()
    log.write_recovery_point_checkpoint()  # a new log has none: now it holds the roll's
    first = log.recovery_point
    before = path.read_bytes()
    while log.number_of_segments < 3:
        log.append_as_leader(_batch(clock, log.log_end_offset), 0)
    file_work.run()  # the rolls' flushes
    log.apply_finished_flushes()
    assert log.recovery_point > first > 0 and not log.recovery_point_checkpointed
    faults = DiskFaults(monkeypatch, tmp_path).arm(budget=3)
    with caplog.at_level(logging.DEBUG):  # as on the file thread
        InlineFileWork().submit(log.write_recovery_point_checkpoint)
    assert faults.failures == 1
    faults.disarm()
    assert path.read_bytes() == before
    assert not path.with_name(path.name + ".tmp").exists()
    assert log.is_offline
    (line,) = _error_lines(caplog)
    assert "recovery point checkpoint" in line and "Traceback" not in caplog.text
    log.close()
    assert OffsetCheckpointFile(path).read() == {("t", 0): first}


def test_a_failed_snapshot_at_roll_takes_the_log_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idempotent producer's state is snapshotted at each roll: a full disk there is
    an I/O error of the append that rolled."""
    from sluice.log.producer_state_manager import PRODUCER_SNAPSHOT_SUFFIX

    clock = ManualClock(START_MS)
    log = Log(tmp_path / "t-0", _config(clock), clock=clock)
    real_replace = os.replace

    def replace(src: str | Path, dst: str | Path) -> None:
        if str(dst).endswith(PRODUCER_SNAPSHOT_SUFFIX):
            raise OSError(errno.ENOSPC, "injected")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KafkaStorageException, match="ENOSPC"):
        for seq in range(0, 100, 5):
            batch = build_batch(
                [Rec(b"x" * 60, timestamp=clock.milliseconds()) for _ in range(5)],
                producer_id=7, producer_epoch=0, base_sequence=seq,
            )  # fmt: skip
            log.append_as_leader(batch, 0)
    monkeypatch.undo()
    assert log.is_offline and log.number_of_segments == 2
    log.close()
    assert not list((tmp_path / "t-0").glob("*.tmp"))


def test_an_offline_log_closes_without_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No snapshot, checkpoint, index entry or trim on an offline directory; the next
    start recovers the log from its files."""
    clock = ManualClock(START_MS)
    log = Log(tmp_path / "t-0", _config(clock), clock=clock)
    log.append_as_leader(_batch(clock, 0), 0)
    log.take_offline(OSError(errno.EIO, "injected"))
    faults = DiskFaults(
        monkeypatch, tmp_path, errno.EIO, ("write", "pwrite", "pwritev", "fsync", "create")
    ).arm()
    log.close()
    assert faults.failures == 0 and log.is_closed
    faults.disarm()
    reopened = Log(tmp_path / "t-0", _config(clock), clock=clock)
    assert reopened.log_end_offset == 5
    reopened.close()


# -- the log manager -----------------------------------------------------------------------
def test_a_failed_dir_goes_offline_and_the_other_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(START_MS)
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, _config(clock), clock=clock)
    failed: list[Path] = []
    manager.failure_channel.on_offline = failed.append
    logs = {p: manager.get_or_create_log("t", p) for p in range(4)}  # two in each dir
    assert {log.dir.parent for log in logs.values()} == set(dirs)
    in_a = [log for log in logs.values() if log.dir.parent == dirs[0]]
    in_b = [log for log in logs.values() if log.dir.parent == dirs[1]]
    for log in logs.values():
        log.append_as_leader(_batch(clock, 0), 0)
    faults = DiskFaults(monkeypatch, dirs[0], errno.EIO).arm()
    with caplog.at_level(logging.ERROR), pytest.raises(KafkaStorageException):
        in_a[0].append_as_leader(_batch(clock, 5), 0)
    assert failed == [dirs[0]] and not in_a[1].is_offline  # until the owner hands it on
    offline = manager.handle_log_dir_failure(dirs[0])
    assert offline == sorted(TopicPartition(log.topic, log.partition) for log in in_a)
    assert manager.handle_log_dir_failure(dirs[0]) == []
    assert all(log.is_offline for log in in_a) and manager.live_log_dirs == [dirs[1]]
    with pytest.raises(KafkaStorageException):
        in_a[1].append_as_leader(_batch(clock, 5), 0)
    for log in in_b:  # the other directory serves on
        log.append_as_leader(_batch(clock, 5), 0)
        assert log.log_end_offset == 10
    assert manager.get_or_create_log("u", 0).dir.parent == dirs[1]  # new logs: live dirs
    assert manager.get_log("t", in_a[0].partition) is in_a[0]  # offline, not recreated
    with pytest.raises(KafkaStorageException, match="offline"):
        manager.get_or_create_log("v", 0, is_new=False)  # may have been in the failed dir
    assert manager.cleanup_logs() == 0 and manager.flush_dirty_logs() == 0
    assert manager.checkpoint_recovery_points() >= 0
    lines = _error_lines(caplog)
    assert len(lines) == 2 and "log dir" in lines[0] and "stopped serving the 2 logs" in lines[1]
    manager.shutdown()
    faults.disarm()
    assert not (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()
    assert (dirs[1] / CLEAN_SHUTDOWN_FILE).exists()
    reopened = LogManager(dirs, _config(clock), clock=clock)
    assert not reopened.had_clean_shutdown(dirs[0]) and reopened.had_clean_shutdown(dirs[1])
    ends = {tp.partition: log.log_end_offset for tp, log in reopened.logs.items() if tp.topic < "u"}
    assert ends == {log.partition: 5 if log in in_a else 10 for log in logs.values()}
    reopened.shutdown()


def test_a_dir_that_cannot_be_loaded_starts_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(START_MS)
    dirs = [tmp_path / "a", tmp_path / "b"]
    with LogManager(dirs, _config(clock), clock=clock) as manager:
        for p in range(2):
            manager.get_or_create_log("t", p).append_as_leader(_batch(clock, 0), 0)
    # After a crash (a clean shutdown's logs load without a write), so that loading
    # recovers the logs, and fsyncs them.
    for directory in dirs:
        (directory / CLEAN_SHUTDOWN_FILE).unlink()
    faults = DiskFaults(monkeypatch, dirs[0], errno.EIO, ("create", "fsync")).arm()
    manager = LogManager(dirs, _config(clock), clock=clock)
    assert manager.live_log_dirs == [dirs[1]]
    assert set(manager.failure_channel.offline_log_dirs) == {dirs[0]}
    assert manager.new_log_dirs("u", [0]) == {0: dirs[1] / "u-0"}
    manager.shutdown()
    for directory in dirs:
        (directory / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    faults.root = str(tmp_path.resolve())  # both now
    with pytest.raises(KafkaStorageException, match="no log dir"):
        LogManager(dirs, _config(clock), clock=clock)
    faults.disarm()
    LogManager(dirs, _config(clock), clock=clock).shutdown()  # the locks were released


def test_a_log_that_cannot_be_created_takes_its_dir_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(START_MS)
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, _config(clock), clock=clock)
    # A new log is its directory alone (its files come with its first writes)
    DiskFaults(monkeypatch, dirs[0], errno.ENOSPC, ("write", "create", "mkdir")).arm()
    with pytest.raises(KafkaStorageException, match="ENOSPC"):
        manager.get_or_create_log("t", 0)  # placed in a, the emptiest
    assert dirs[0] in manager.failure_channel.offline_log_dirs
    assert manager.get_or_create_log("t", 0).dir.parent == dirs[1]
    manager.shutdown()


def test_a_cleaning_pass_that_fails_takes_its_dir_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The cleaner's own files (``.cleaned``) meet a full disk: the log's dir goes offline,
    as Kafka's cleaner does, logged once without a traceback; the log keeps what it had."""
    from support.cleaner import cleaner_for, key_values, kv_batch, open_log

    clock = ManualClock(START_MS)
    log = open_log(tmp_path / "t-0", clock)
    for i in range(40):
        log.append_as_leader(kv_batch([(b"k%d" % (i % 3), b"v%d" % i)], clock), 0)
    log.roll()
    before = key_values(log)
    cleaner = cleaner_for(log, clock)
    DiskFaults(monkeypatch, tmp_path, errno.ENOSPC, ("write", "pwrite", "pwritev")).arm()
    with caplog.at_level(logging.DEBUG):
        assert cleaner.step()  # starts the pass
        while cleaner.in_progress is not None:
            cleaner.step()
    monkeypatch.undo()
    assert cleaner.passes_failed == 1 and log.is_offline
    assert not [r for r in caplog.records if r.exc_info]
    (line,) = _error_lines(caplog)
    assert "log cleaning of t-0" in line and "ENOSPC" in line
    assert cleaner.cleanable_logs() == []  # offline logs are left alone
    log.close()
    reopened = open_log(tmp_path / "t-0", clock)
    assert key_values(reopened) == before
    reopened.close()
