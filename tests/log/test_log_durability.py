"""The recovery point moves while the log runs, and corruption is found and reported.

A roll has the segments it leaves flushed as background file work (Kafka's ``flush-log``
job), the recovery point moves once that is done, and the log's owner writes it to
``recovery-point-offset-checkpoint`` (a broker every
``log.flush.offset.checkpoint.interval.ms``). After a crash recovery starts there: what is
below it is neither validated again nor truncated. A read that meets a bad batch head
raises CorruptRecordException with the file and position instead of skipping ahead.

The file work is a queue run when the test says (``ManualFileWork``), or inline."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
from test_log_property import _let_go

from sluice.base.clock import ManualClock
from sluice.log import CorruptRecordException, KafkaStorageException, Log, LogConfig
from sluice.log.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
from sluice.log.local_log import FlushWork
from sluice.log.manager import LogManager
from sluice.log.segment import LogSegment, SegmentRecovery
from sluice.protocol.records.batch import batch_error, iter_batches
from support.logs import START_MS, ManualFileWork
from support.records import Rec, build_batch, values_of

BATCHES_PER_SEGMENT = 4
RECORDS_PER_BATCH = 5


def _batch(clock: ManualClock, first: int) -> bytes:
    return build_batch(
        [
            Rec(b"v%05d" % (first + i) + b"." * 60, timestamp=clock.milliseconds())
            for i in range(RECORDS_PER_BATCH)
        ]
    )


def _config(clock: ManualClock, **extra: Any) -> LogConfig:
    one = len(_batch(clock, 0))
    settings: dict[str, Any] = {
        "segment_bytes": BATCHES_PER_SEGMENT * one,
        "index_interval_bytes": one,
        "file_delete_delay_ms": 0,
        "segment_prepare_next": False,
    }
    settings.update(extra)
    return LogConfig(**settings)


def _fill(log: Log, clock: ManualClock, segments: int) -> None:
    """Append until the log has ``segments`` full segments and an active one holding one
    batch."""
    while log.number_of_segments <= segments:
        log.append_as_leader(_batch(clock, log.log_end_offset), 0)


def _values(log: Log, start: int, end: int) -> list[tuple[int, bytes | None]]:
    """Every record of ``[start, end)``, read batch by batch."""
    out: list[tuple[int, bytes | None]] = []
    offset = start
    while offset < end:
        records = [r for r in values_of(log.read(offset, 1).read()) if r[0] >= offset]
        out.extend(r for r in records if r[0] < end)
        offset = records[-1][0] + 1
    return out


def _expected(start: int, end: int) -> list[tuple[int, bytes | None]]:
    return [(i, b"v%05d" % i + b"." * 60) for i in range(start, end)]


def _checkpointed(log_dir: Path) -> int:
    """The recovery point of the log's checkpoint file (0 while it has none)."""
    offsets = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
    return next(iter(offsets.values()), 0)


def _damage(path: Path, position: int, data: bytes) -> None:
    """Overwrite bytes of a closed (or crashed) log's file, as the disk would."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, position)
    finally:
        os.close(fd)


def _batch_positions(path: Path) -> list[tuple[int, int, int]]:
    """(position, base offset, size) of each batch of a data file."""
    return [(h.position, h.base_offset, h.size_in_bytes) for h in iter_batches(path.read_bytes())]


# -- the recovery point moves ---------------------------------------------------------------
def test_a_roll_flushes_the_segment_it_leaves_as_file_work(
    tmp_path: Path, file_work: ManualFileWork, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(START_MS)
    synced: list[int] = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.fstat(fd).st_ino), fsync(fd)))
    manager = LogManager(tmp_path, _config(clock), clock=clock, file_work=file_work)
    log = manager.get_or_create_log("t", 0)
    synced.clear()  # the checkpoint written at the log's creation
    _fill(log, clock, 1)  # one roll
    rolled = log.segments[0].log.path
    assert file_work.queued(FlushWork) == 1 and synced == []  # nothing on the log's thread
    assert log.recovery_point == 0
    file_work.run()
    assert os.stat(rolled).st_ino in synced  # the rolled segment's data file, with the work
    assert log.recovery_point == 0  # applied on the log's thread ...
    log.apply_finished_flushes()
    assert log.recovery_point == log.active_segment.base_offset == 20  # ... not beyond
    assert _checkpointed(log.dir) == 0  # written when the owner says
    assert manager.checkpoint_recovery_points() == 1  # handed to the file work
    assert _checkpointed(log.dir) == 0
    file_work.run()
    assert _checkpointed(log.dir) == 20
    assert manager.checkpoint_recovery_points() == 0  # it holds the recovery point now
    _fill(log, clock, 3)  # two more rolls: each flushes only the segment it left
    assert file_work.queued(FlushWork) == 2
    file_work.run()
    assert manager.checkpoint_recovery_points() == 1  # applies the flushes done, then writes
    file_work.run()
    assert log.recovery_point == _checkpointed(log.dir) == 60
    manager.shutdown()
    file_work.run()


def test_with_inline_file_work_the_roll_flushes_before_it_returns(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    log = Log(tmp_path / "t-0", _config(clock), clock=clock)
    _fill(log, clock, 2)
    assert log.recovery_point == log.active_segment.base_offset == 40
    log.close()


def test_a_truncation_while_a_rolled_segment_is_flushed_keeps_the_recovery_point(
    tmp_path: Path, file_work: ManualFileWork
) -> None:
    clock = ManualClock(START_MS)
    log = Log(tmp_path / "t-0", _config(clock), clock=clock, file_work=file_work)
    _fill(log, clock, 1)
    log.truncate_to(10)  # before the flush of segment 0 (offsets 0..19) was done
    file_work.run()
    log.apply_finished_flushes()
    assert log.recovery_point == 0 and log.log_end_offset == 10
    log.close()
    file_work.run()


def test_a_failed_background_flush_takes_the_log_offline(
    tmp_path: Path, file_work: ManualFileWork, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(START_MS)
    log = Log(tmp_path / "t-0", _config(clock), clock=clock, file_work=file_work)
    _fill(log, clock, 1)

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(KafkaStorageException):  # offline from the file thread on ...
        file_work.run()
    monkeypatch.undo()
    assert log.write_error is not None
    log.apply_finished_flushes()  # ... and the recovery point stays
    assert log.recovery_point == 0
    with pytest.raises(KafkaStorageException):
        log.append_as_leader(_batch(clock, log.log_end_offset), 0)
    log.close()


# -- recovery starts at the recovery point ----------------------------------------------------
def _crashed_log_of_four_segments(directory: Path, clock: ManualClock) -> Log:
    """A log of four full segments (offsets 0..79) and an active one, its recovery point
    checkpointed past them, then a crash: descriptors closed, nothing else written."""
    log = Log(directory, _config(clock), clock=clock)
    _fill(log, clock, 4)
    log.write_recovery_point_checkpoint()  # what the broker's periodic job does
    _let_go(log)
    return log


def _spy_recover(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = LogSegment.recover

    def spy(self: LogSegment, *args: Any, **kwargs: Any) -> SegmentRecovery:
        calls.append(self.base_offset)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "recover", spy)
    return calls


def test_recovery_after_a_crash_scans_only_from_the_recovery_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(START_MS)
    directory = tmp_path / "t-0"
    _crashed_log_of_four_segments(directory, clock)
    calls = _spy_recover(monkeypatch)
    reopened = Log(directory, _config(clock), clock=clock)  # no clean shutdown
    assert calls == [80]  # the active segment only
    assert reopened.log_end_offset == 85 and _values(reopened, 0, 85) == _expected(0, 85)
    reopened.close()


@pytest.mark.parametrize("where", ["records", "length"])
def test_a_corrupt_byte_in_segment_1_of_4_keeps_segments_2_to_4(
    tmp_path: Path, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    """One byte of the first segment, below the recovery point, goes bad: a record's (its
    batch fails its CRC, which only a client checks) or its batch's length. Recovery does
    not read that segment; every record outside the bad batch stays readable, and a read
    that reaches a bad length says where it is instead of skipping to segment 2."""
    clock = ManualClock(START_MS)
    directory = tmp_path / "t-0"
    _crashed_log_of_four_segments(directory, clock)
    first = sorted(directory.glob("*.log"))[0]
    batches = _batch_positions(first)
    position, bad_base, size = batches[1]  # offsets 5..9
    if where == "records":
        _damage(first, position + size // 2, b"\xff")
    else:
        _damage(first, position + 8, (10**6).to_bytes(4, "big"))  # past the file's end
    with caplog.at_level(logging.WARNING):
        reopened = Log(directory, _config(clock), clock=clock)
    assert not [r for r in caplog.records if "truncated" in r.getMessage()]
    assert [s.base_offset for s in reopened.segments] == [0, 20, 40, 60, 80]
    assert reopened.log_end_offset == 85
    assert _values(reopened, 0, bad_base) == _expected(0, bad_base)
    assert _values(reopened, 20, 85) == _expected(20, 85)
    if where == "records":
        data = reopened.read(bad_base, 1).read()
        assert batch_error(data) is not None  # served as stored: the client's CRC check
        assert _values(reopened, bad_base + 5, 20) == _expected(bad_base + 5, 20)
    else:
        for offset in (bad_base, bad_base + 3, 10):  # at it, or hopping over it
            with pytest.raises(CorruptRecordException) as raised:
                reopened.read(offset, 1000)
            problem = f"{first} position {position}: batchLength 1000000 runs past the end"
            assert problem in str(raised.value)
        # past the next offset index entry (offset 14, the batch 10..14) a read starts there
        assert _values(reopened, 14, 20) == _expected(14, 20)
        # A read before it sends the stored bytes whole, unwalked: a client's parse stops
        # at the bad length, and its next fetch, from offset 5, is refused (above).
        sent = reopened.read(0, 10**6).read()
        assert [h.base_offset for h in iter_batches(sent)] == [0]
    reopened.close()


def test_corruption_above_the_recovery_point_truncates_and_says_where(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Data above the recovery point was not flushed: a bad batch there is cut, with the
    later segments, as in Kafka; the log line names the file, position and problem."""
    clock = ManualClock(START_MS)
    directory = tmp_path / "t-0"
    _crashed_log_of_four_segments(directory, clock)
    (directory / RECOVERY_POINT_CHECKPOINT).unlink()  # crashed before any checkpoint
    first = sorted(directory.glob("*.log"))[0]
    position, bad_base, size = _batch_positions(first)[1]
    _damage(first, position + size // 2, b"\xff")
    with caplog.at_level(logging.WARNING):
        reopened = Log(directory, _config(clock), clock=clock)
    assert reopened.log_end_offset == bad_base and reopened.number_of_segments == 1
    (line,) = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
    assert f"{first} position {position}: CRC" in line and "deleting 4 later segments" in line
    reopened.close()


def test_in_the_last_segment_only_what_follows_the_recovery_point_is_verified(
    tmp_path: Path,
) -> None:
    """The recovery point in the middle of the active segment (a flush.ms or
    flush.messages flush): a bad CRC before it stays, a bad CRC after it is cut."""
    clock = ManualClock(START_MS)
    directory = tmp_path / "t-0"
    log = Log(directory, _config(clock), clock=clock)
    _fill(log, clock, 2)  # segments 0..19, 20..39, active 40..44
    log.append_as_leader(_batch(clock, 45), 0)
    log.flush()
    log.write_recovery_point_checkpoint()
    for first in (50, 55):
        log.append_as_leader(_batch(clock, first), 0)
    _let_go(log)
    active = sorted(directory.glob("*.log"))[-1]
    batches = _batch_positions(active)  # offsets 40, 45 | 50, 55
    for position, _, size in (batches[1], batches[3]):
        _damage(active, position + size // 2, b"\xff")
    reopened = Log(directory, _config(clock), clock=clock)
    assert reopened.log_end_offset == 55  # 55..59 cut; 45..49 kept
    assert batch_error(reopened.read(45, 1).read()) is not None
    assert _values(reopened, 50, 55) == _expected(50, 55)
    reopened.close()


def test_a_bad_length_below_the_recovery_point_in_an_earlier_segment_is_kept(
    tmp_path: Path, file_work: ManualFileWork, caplog: pytest.LogCaptureFixture
) -> None:
    """The recovery point in the middle of a segment that rolled before the crash (its
    flush was still queued): a bad length before the point cuts nothing; the bytes from
    there on stay, unindexed, reads reaching them are refused, the later segments stay."""
    clock = ManualClock(START_MS)
    directory = tmp_path / "t-0"
    log = Log(directory, _config(clock), clock=clock, file_work=file_work)
    _fill(log, clock, 2)  # segments 0..19, 20..39, active 40..44
    file_work.run()
    log.append_as_leader(_batch(clock, 45), 0)
    log.flush()
    log.write_recovery_point_checkpoint()
    assert _checkpointed(directory) == 50
    _fill(log, clock, 3)  # 40..59 rolls; its flush is queued, then lost
    _let_go(log)
    file_work.drop()
    third = sorted(directory.glob("*.log"))[2]
    position, base, _ = _batch_positions(third)[1]  # offsets 45..49
    _damage(third, position + 8, (10**6).to_bytes(4, "big"))
    size = third.stat().st_size
    with caplog.at_level(logging.WARNING):
        reopened = Log(directory, _config(clock), clock=clock)
    assert [s.base_offset for s in reopened.segments] == [0, 20, 40, 60]
    assert third.stat().st_size == size  # nothing cut
    (line,) = [r.getMessage() for r in caplog.records if "recovery point" in r.getMessage()]
    assert f"{third} position {position}: batchLength 1000000" in line
    with pytest.raises(CorruptRecordException):
        reopened.read(base, 100)
    assert _values(reopened, 40, base) == _expected(40, base)
    assert _values(reopened, 60, 65) == _expected(60, 65)
    reopened.close()


def test_compaction_never_cleans_past_a_bad_batch_head(tmp_path: Path) -> None:
    """The cleaner copies a segment batch by batch; a bad length would have ended its
    walk as the end of the segment, and the cleaned copy would have lost the rest."""
    from support.cleaner import cleaner_for, key_values, kv_batch, open_log

    clock = ManualClock()
    log = open_log(tmp_path / "t-0", clock)
    for i in range(40):
        log.append_as_leader(kv_batch([(b"k%d" % (i % 3), b"v%d" % i)], clock), 0)
    log.roll()
    first = log.segments[0]
    position, _, _ = _batch_positions(first.log.path)[2]
    os.pwrite(first.log.fileno(), (10**6).to_bytes(4, "big"), position + 8)
    before = first.log.path.read_bytes()
    cleaner = cleaner_for(log, clock)
    with pytest.raises(CorruptRecordException, match=f"position {position}: batchLength"):
        cleaner.clean_log(log)
    assert cleaner.passes_failed == 1
    assert log.segments[0] is first and first.log.path.read_bytes() == before
    assert key_values(log)[:2] == [(0, b"k0", b"v0"), (1, b"k1", b"v1")]
    log.close()
