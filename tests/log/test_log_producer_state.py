"""Producer state of a partition log: sequence and epoch checks, duplicates, transactions'
bookkeeping, expiration, snapshots, and rebuilding after clean and unclean shutdowns."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from sluice.base.clock import ManualClock
from sluice.log import AppendOrigin, Log, LogConfig
from sluice.log.producer_state import (
    INT32_MAX,
    InvalidProducerEpochException,
    InvalidTxnStateException,
    OutOfOrderSequenceException,
    ProducerStateEntry,
    TransactionCoordinatorFencedException,
    decrement_sequence,
    increment_sequence,
)
from sluice.log.producer_state_manager import (
    CorruptSnapshotException,
    read_snapshot,
    write_snapshot,
)
from support.logs import START_MS
from support.records import Rec, build_batch

PID = 4000
DAY = 24 * 3600 * 1000


def _cfg(**kw: object) -> LogConfig:
    base: dict[str, object] = {"index_interval_bytes": 256, "file_delete_delay_ms": 0}
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def pbatch(
    clock: ManualClock,
    seq: int,
    n: int = 2,
    *,
    pid: int = PID,
    epoch: int = 0,
    transactional: bool = False,
    size: int = 20,
) -> bytes:
    """A batch of ``n`` records from producer ``pid``/``epoch`` starting at sequence ``seq``."""
    records = [
        Rec(f"p{pid}e{epoch}s{seq}-{i}".encode().ljust(size, b"."), timestamp=clock.milliseconds())
        for i in range(n)
    ]
    return build_batch(
        records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
        transactional=transactional,
    )  # fmt: skip


def marker(
    clock: ManualClock, commit: bool, *, pid: int = PID, epoch: int = 0, coord: int = 0
) -> bytes:
    """A transaction marker (control) batch: key (version, type), value (version, epoch)."""
    rec = Rec(
        struct.pack(">hi", 0, coord),
        key=struct.pack(">hh", 0, int(commit)),
        timestamp=clock.milliseconds(),
    )
    return build_batch([rec], producer_id=pid, producer_epoch=epoch, control=True)


def snapshot_offsets(directory: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in directory.glob("*.snapshot"))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def log(tmp_path: Path, clock: ManualClock) -> Log:
    return Log(tmp_path / "idem-0", _cfg(), clock=clock)


# -- sequences -------------------------------------------------------------------------------
def test_in_order_sequences_get_consecutive_offsets(log: Log, clock: ManualClock) -> None:
    offsets = [log.append_as_leader(pbatch(clock, seq, 2), 0).first_offset for seq in (0, 2, 4)]
    assert offsets == [0, 2, 4]
    entry = log.producer_state_manager.last_entry(PID)
    assert entry is not None
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (0, 0, 5)
    ranges = [
        (b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batch_metadata
    ]
    assert ranges == [(0, 1, 0, 1), (2, 3, 2, 3), (4, 5, 4, 5)]
    assert log.producer_state_manager.map_end_offset == 6


def test_non_idempotent_batches_are_untouched(log: Log, clock: ManualClock) -> None:
    log.append_as_leader(build_batch([b"a", b"b"]), 0)
    log.append_as_leader(build_batch([b"a", b"b"]), 0)
    assert log.log_end_offset == 4
    assert dict(log.producer_state_manager.producers) == {}


def test_duplicates_of_each_of_the_last_five_batches_get_original_offsets(
    log: Log, clock: ManualClock
) -> None:
    batches = [pbatch(clock, 3 * i, 3) for i in range(7)]
    firsts = [log.append_as_leader(b, 0).first_offset for b in batches]
    assert firsts == [0, 3, 6, 9, 12, 15, 18]
    for batch, first in zip(batches[2:], firsts[2:], strict=True):
        info = log.append_as_leader(batch, 0)
        assert (info.first_offset, info.last_offset) == (first, first + 2)
        assert (info.record_count, info.batch_count) == (0, 0)
    assert log.log_end_offset == 21  # nothing appended
    # A batch older than the five cached ones is out of order, not a duplicate.
    for old in batches[:2]:
        with pytest.raises(OutOfOrderSequenceException) as exc:
            log.append_as_leader(old, 0)
        assert exc.value.error_name == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert log.log_end_offset == 21
    assert log.append_as_leader(pbatch(clock, 21, 1), 0).first_offset == 21


def test_duplicate_of_a_log_append_time_topic_reports_the_append_time(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = Log(tmp_path / "lat-0", _cfg(message_timestamp_type="LogAppendTime"), clock=clock)
    batch = pbatch(clock, 0)
    first = log.append_as_leader(batch, 0)
    clock.advance(5000)
    again = log.append_as_leader(batch, 0)
    assert again.first_offset == first.first_offset == 0
    assert again.log_append_time == first.log_append_time == clock.milliseconds() - 5000


def test_gap_is_out_of_order_and_appends_nothing(log: Log, clock: ManualClock) -> None:
    log.append_as_leader(pbatch(clock, 0, 2), 0)
    with pytest.raises(OutOfOrderSequenceException):
        log.append_as_leader(pbatch(clock, 3, 2), 0)
    # Several batches of one producer in one append are checked as a chain, all or nothing.
    with pytest.raises(OutOfOrderSequenceException):
        log.append_as_leader(pbatch(clock, 2, 2) + pbatch(clock, 5, 2), 0)
    assert log.log_end_offset == 2
    info = log.append_as_leader(pbatch(clock, 2, 2) + pbatch(clock, 4, 2), 0)
    assert (info.first_offset, info.last_offset, info.batch_count) == (2, 5, 2)
    entry = log.producer_state_manager.last_entry(PID)
    assert entry is not None and entry.last_seq == 5


def test_unknown_producer_may_start_at_any_sequence(log: Log, clock: ManualClock) -> None:
    # Kafka 3.x: state may have expired or been deleted with its data (KIP-360).
    assert log.append_as_leader(pbatch(clock, 17, 2, pid=7), 0).first_offset == 0
    assert log.append_as_leader(pbatch(clock, 19, 1, pid=7), 0).first_offset == 2
    with pytest.raises(OutOfOrderSequenceException):
        log.append_as_leader(pbatch(clock, 30, 1, pid=7), 0)


def test_stale_epoch_is_fenced(log: Log, clock: ManualClock) -> None:
    log.append_as_leader(pbatch(clock, 0, epoch=3), 0)
    with pytest.raises(InvalidProducerEpochException) as exc:
        log.append_as_leader(pbatch(clock, 2, epoch=2), 0)
    assert exc.value.error_name == "INVALID_PRODUCER_EPOCH"
    # Even a batch that was appended before under the old epoch: the epoch check comes first.
    with pytest.raises(InvalidProducerEpochException):
        log.append_as_leader(pbatch(clock, 0, epoch=2), 0)
    assert log.log_end_offset == 2


def test_new_epoch_must_start_at_sequence_zero(log: Log, clock: ManualClock) -> None:
    old = pbatch(clock, 0, epoch=0)
    log.append_as_leader(old, 0)
    log.append_as_leader(pbatch(clock, 2, epoch=0), 0)
    with pytest.raises(OutOfOrderSequenceException):
        log.append_as_leader(pbatch(clock, 4, epoch=1), 0)
    assert log.append_as_leader(pbatch(clock, 0, epoch=1), 0).first_offset == 4
    entry = log.producer_state_manager.last_entry(PID)
    assert entry is not None
    assert entry.producer_epoch == 1 and len(entry.batch_metadata) == 1  # old batches dropped
    with pytest.raises(InvalidProducerEpochException):
        log.append_as_leader(old, 0)
    assert log.append_as_leader(pbatch(clock, 2, epoch=1), 0).first_offset == 6


def test_sequence_numbers_wrap_at_int32_max(log: Log, clock: ManualClock) -> None:
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    log.append_as_leader(pbatch(clock, INT32_MAX - 5, 4, pid=9), 0)  # ..INT32_MAX-2
    spanning = pbatch(clock, INT32_MAX - 1, 4, pid=9)  # INT32_MAX-1, INT32_MAX, 0, 1
    assert log.append_as_leader(spanning, 0).first_offset == 4
    entry = log.producer_state_manager.last_entry(9)
    assert entry is not None and (entry.batch_metadata[-1].first_seq, entry.last_seq) == (
        INT32_MAX - 1,
        1,
    )
    assert log.append_as_leader(spanning, 0).first_offset == 4  # duplicate across the wrap
    assert log.append_as_leader(pbatch(clock, 2, 1, pid=9), 0).first_offset == 8
    # Ending exactly at INT32_MAX, the next batch starts at 0.
    log.append_as_leader(pbatch(clock, INT32_MAX - 1, 2, pid=10), 0)
    assert log.append_as_leader(pbatch(clock, 0, 1, pid=10), 0).first_offset == 11
    with pytest.raises(OutOfOrderSequenceException):
        log.append_as_leader(pbatch(clock, 5, 1, pid=10), 0)


def test_producers_are_independent(log: Log, clock: ManualClock) -> None:
    a = pbatch(clock, 0, pid=1)
    log.append_as_leader(a, 0)
    log.append_as_leader(pbatch(clock, 0, pid=2), 0)
    log.append_as_leader(pbatch(clock, 2, pid=1), 0)
    assert log.append_as_leader(a, 0).first_offset == 0
    assert sorted(log.producer_state_manager.producers) == [1, 2]


# -- transactions bookkeeping ----------------------------------------------------------------
def test_transaction_fields_track_open_transactions(log: Log, clock: ManualClock) -> None:
    state = log.producer_state_manager
    log.append_as_leader(pbatch(clock, 0, transactional=True), 0)
    log.append_as_leader(pbatch(clock, 2, transactional=True), 0)
    entry = state.last_entry(PID)
    assert entry is not None and entry.current_txn_first_offset == 0
    assert list(state.ongoing_transactions) == [0] and state.first_unstable_offset() == 0
    with pytest.raises(InvalidTxnStateException):
        log.append_as_leader(pbatch(clock, 4), 0)
    info = log.append_as_leader(marker(clock, commit=True, coord=3), 0, AppendOrigin.COORDINATOR)
    assert info.first_offset == 4
    assert entry.current_txn_first_offset is None and entry.coordinator_epoch == 3
    assert state.first_unstable_offset() is None
    with pytest.raises(TransactionCoordinatorFencedException):
        log.append_as_leader(marker(clock, commit=False, coord=2), 0, AppendOrigin.COORDINATOR)
    assert log.append_as_leader(pbatch(clock, 4), 0).first_offset == 5


def test_follower_appends_update_state_without_sequence_checks(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = Log(tmp_path / "f-0", _cfg(), clock=clock)
    replicated = build_batch(
        [Rec(b"x", timestamp=clock.milliseconds())], base_offset=0, producer_id=PID,
        producer_epoch=1, base_sequence=40,
    ) + build_batch(
        [Rec(b"y", timestamp=clock.milliseconds())], base_offset=1, producer_id=PID,
        producer_epoch=0, base_sequence=99,
    )  # fmt: skip
    log.append_as_follower(replicated)  # a lower epoch only warns when replicating
    entry = log.producer_state_manager.last_entry(PID)
    assert entry is not None and (entry.producer_epoch, entry.last_seq) == (0, 99)
    assert log.producer_state_manager.map_end_offset == 2


# -- expiration ------------------------------------------------------------------------------
def test_idle_producers_expire(log: Log, clock: ManualClock) -> None:
    state = log.producer_state_manager
    log.append_as_leader(pbatch(clock, 0, pid=1), 0)
    clock.advance(1000)
    log.append_as_leader(pbatch(clock, 0, pid=2), 0)
    log.append_as_leader(pbatch(clock, 0, pid=3, transactional=True), 0)
    clock.advance(DAY - 1001)
    assert log.remove_expired_producers(DAY) == 0
    clock.advance(1)
    assert log.remove_expired_producers(DAY) == 1
    assert sorted(state.producers) == [2, 3]
    clock.advance(10 * DAY)
    assert log.remove_expired_producers(DAY) == 1  # 3 has a transaction open
    assert sorted(state.producers) == [3]
    # An expired producer continues with whatever sequence it is at.
    assert log.append_as_leader(pbatch(clock, 2, pid=1), 0).first_offset == 6


# -- snapshots -------------------------------------------------------------------------------
def test_snapshot_file_is_kafkas_version_1_format(tmp_path: Path) -> None:
    entry = ProducerStateEntry(PID, producer_epoch=2, coordinator_epoch=7, last_timestamp=99)
    entry.add_batch(2, 4, 10, 4, 50)
    entry.add_batch(2, 9, 15, 4, 99)
    empty = ProducerStateEntry(5, producer_epoch=0, last_timestamp=7, current_txn_first_offset=3)
    path = tmp_path / "00000000000000000016.snapshot"
    write_snapshot(path, [entry, empty])
    data = path.read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count, len(data)) == (1, 3, 10 + 3 * 46)
    assert crc == crc32c(data[6:])
    rows = [struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i) for i in range(count)]
    assert rows == [
        (PID, 2, 4, 10, 4, 50, 7, -1),
        (PID, 2, 9, 15, 4, 99, 7, -1),  # Kafka keeps the last row per producer id
        (5, 0, -1, -1, 0, 7, -1, 3),
    ]
    loaded = {e.producer_id: e for e in read_snapshot(path)}
    assert list(loaded[PID].batch_metadata) == list(entry.batch_metadata)
    assert (loaded[PID].producer_epoch, loaded[PID].coordinator_epoch) == (2, 7)
    assert loaded[5].is_empty and loaded[5].current_txn_first_offset == 3
    flipped = data[:20] + bytes([data[20] ^ 1]) + data[21:]
    for bad in (data[:-1], flipped, b"\x00\x02" + data[2:], b"\x00"):
        path.write_bytes(bad)
        with pytest.raises(CorruptSnapshotException):
            read_snapshot(path)


def test_snapshots_on_roll_and_close_and_all_five_batches_survive_restart(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "snap-0"
    log = Log(directory, _cfg(segment_bytes=400), clock=clock)
    batches = [pbatch(clock, 2 * i) for i in range(8)]
    firsts = [log.append_as_leader(b, 0).first_offset for b in batches]
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 2
    assert snapshot_offsets(directory) == bases[1:]  # one per roll
    log.close()
    assert snapshot_offsets(directory) == [*bases[1:], 16]
    reopened = Log(directory, _cfg(segment_bytes=400), clock=clock, had_clean_shutdown=True)
    state = reopened.producer_state_manager
    assert state.map_end_offset == 16
    for batch, first in zip(batches[3:], firsts[3:], strict=True):
        assert reopened.append_as_leader(batch, 0).first_offset == first
    assert reopened.log_end_offset == 16
    assert reopened.append_as_leader(pbatch(clock, 16), 0).first_offset == 16
    reopened.close()


def test_logs_without_producers_write_no_snapshots(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "plain-0"
    log = Log(directory, _cfg(segment_bytes=300), clock=clock)
    for _ in range(10):
        log.append_as_leader(build_batch([Rec(b"x" * 40, timestamp=clock.milliseconds())]), 0)
    assert log.number_of_segments > 1
    log.close()
    assert snapshot_offsets(directory) == []
    Log(directory, _cfg(), clock=clock, had_clean_shutdown=True).close()
    assert snapshot_offsets(directory) == []


def test_replay_after_unclean_shutdown_from_last_snapshot(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "crash-0"
    log = Log(directory, _cfg(segment_bytes=400), clock=clock)
    batches = [pbatch(clock, 2 * i) for i in range(8)]
    batches.append(pbatch(clock, 0, pid=77))
    firsts = [log.append_as_leader(b, 0).first_offset for b in batches]
    last_roll = log.active_segment.base_offset
    assert snapshot_offsets(directory)[-1] == last_roll < 16
    # kill -9: the old object is simply abandoned (no close, no snapshot at the end).
    crashed = Log(directory, _cfg(segment_bytes=400), clock=clock)
    state = crashed.producer_state_manager
    assert state.map_end_offset == 18
    assert snapshot_offsets(directory)[-1] == 18  # written after the replay
    for batch, first in zip(batches[3:], firsts[3:], strict=True):
        assert crashed.append_as_leader(batch, 0).first_offset == first
    assert crashed.log_end_offset == 18
    assert crashed.append_as_leader(pbatch(clock, 16), 0).first_offset == 18
    del log


def test_replay_without_any_snapshot_scans_every_segment(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "nosnap-0"
    log = Log(directory, _cfg(segment_bytes=400), clock=clock)
    batches = [pbatch(clock, 2 * i) for i in range(6)]
    for b in batches:
        log.append_as_leader(b, 0)
    log.flush()
    for path in directory.glob("*.snapshot"):
        path.unlink()
    crashed = Log(directory, _cfg(segment_bytes=400), clock=clock)
    assert crashed.append_as_leader(batches[-1], 0).first_offset == 10
    assert crashed.append_as_leader(batches[1], 0).first_offset == 2
    with pytest.raises(OutOfOrderSequenceException):
        crashed.append_as_leader(batches[0], 0)


def test_corrupt_and_out_of_range_snapshots_are_skipped(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "bad-0"
    log = Log(directory, _cfg(segment_bytes=400), clock=clock)
    batches = [pbatch(clock, 2 * i) for i in range(8)]
    for b in batches:
        log.append_as_leader(b, 0)
    log.close()
    latest = directory / f"{16:020d}.snapshot"
    latest.write_bytes(latest.read_bytes()[:-3])  # torn
    beyond = directory / f"{500:020d}.snapshot"
    beyond.write_bytes(b"junk")
    reopened = Log(directory, _cfg(segment_bytes=400), clock=clock, had_clean_shutdown=True)
    assert not beyond.exists()
    assert reopened.producer_state_manager.map_end_offset == 16
    assert reopened.append_as_leader(batches[-1], 0).first_offset == 14
    assert reopened.append_as_leader(pbatch(clock, 16), 0).first_offset == 16


# -- truncation, retention, DeleteRecords ----------------------------------------------------
def test_truncation_reloads_the_state_below_the_target(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "trunc-0"
    log = Log(directory, _cfg(segment_bytes=400), clock=clock)
    batches = [pbatch(clock, 2 * i) for i in range(8)]
    for b in batches:
        log.append_as_leader(b, 0)
    log.roll()
    assert snapshot_offsets(directory)[-1] == 16
    log.truncate_to(7)  # inside batch 3 (offsets 6..7): it goes too
    assert log.log_end_offset == 6
    assert all(offset <= 6 for offset in snapshot_offsets(directory))
    state = log.producer_state_manager
    entry = state.last_entry(PID)
    assert entry is not None and entry.last_seq == 5 and state.map_end_offset == 6
    assert log.append_as_leader(batches[2], 0).first_offset == 4  # still a duplicate
    assert log.append_as_leader(batches[3], 0).first_offset == 6  # appended again
    log.truncate_fully_and_start_at(100)
    assert snapshot_offsets(directory) == [] and dict(state.producers) == {}
    assert log.append_as_leader(pbatch(clock, 9), 0).first_offset == 100


def test_retention_and_delete_records_drop_stale_snapshots_but_keep_state(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "ret-0"
    log = Log(directory, _cfg(segment_bytes=400), clock=clock)
    batches = [pbatch(clock, 2 * i) for i in range(12)]
    batches.insert(1, pbatch(clock, 0, pid=55))  # a producer that only wrote early
    for b in batches:
        log.append_as_leader(b, 0)
    bases = [s.base_offset for s in log.segments]
    assert snapshot_offsets(directory) == bases[1:]
    log.delete_records_before(bases[2] + 1)
    assert log.segments[0].base_offset == bases[2]
    assert snapshot_offsets(directory) == bases[2:]
    assert 55 in log.producer_state_manager.producers
    # After a crash the state still comes back: snapshot at the first segment, then replay.
    crashed = Log(directory, _cfg(segment_bytes=400), clock=clock)
    assert crashed.log_start_offset == bases[2] + 1
    assert 55 in crashed.producer_state_manager.producers
    assert crashed.append_as_leader(pbatch(clock, 2, pid=55), 0).first_offset == 26
    crashed.update_config(_cfg(segment_bytes=400, retention_bytes=0))
    assert crashed.delete_old_segments() > 0
    first_base = crashed.segments[0].base_offset
    assert first_base > bases[2]
    assert snapshot_offsets(directory)[0] == first_base
    assert 55 in crashed.producer_state_manager.producers
