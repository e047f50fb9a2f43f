"""Log compaction on ``Log`` directly: what a cleaning pass keeps, when it may run, and how."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sluice.base.clock import ManualClock
from sluice.log import AppendOrigin, InvalidRecordException, Log
from sluice.log.cleaner.files import read_cleaner_checkpoint
from sluice.log.cleaner.log_cleaner import CLEANER_CHECKPOINT, CompactionConfig, LogCleaner
from support.cleaner import (
    cleaner_for,
    compact_config,
    key_values,
    kv_batch,
    latest_view,
    open_log,
    read_batches,
)
from support.logs import START_MS
from support.records import Rec, build_batch, decode_batches

SECOND = 1000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


def _fill(
    log: Log, clock: ManualClock, rounds: int, keys: int = 7, per_batch: int = 3, codec: int = 0
) -> dict[int, tuple[bytes, bytes]]:
    """Append ``rounds`` batches cycling over ``keys`` keys; returns offset -> (key, value)."""
    written: dict[int, tuple[bytes, bytes]] = {}
    for i in range(rounds):
        pairs = [
            (f"k{(i * per_batch + j) % keys}".encode(), f"v{i}-{j}".encode())
            for j in range(per_batch)
        ]
        info = log.append_as_leader(kv_batch(list(pairs), clock, codec), leader_epoch=0)
        for j, (key, value) in enumerate(pairs):
            written[info.first_offset + j] = (key, value)
    return written


def _check_original(log: Log, written: dict[int, tuple[bytes, bytes]]) -> None:
    records = key_values(log)
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    for offset, key, value in records:
        assert written[offset] == (key, value), f"offset {offset} changed"


def _dirty_files(log: Log) -> list[str]:
    suffixes = (".cleaned", ".swap", ".swapend")
    return sorted(p.name for p in log.dir.iterdir() if p.name.endswith(suffixes))


# -- what a pass keeps ------------------------------------------------------------------------
def test_only_the_latest_value_per_key_survives(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    written = _fill(log, clock, 80)
    log.roll()  # everything becomes cleanable
    start, end = log.log_start_offset, log.log_end_offset
    before = key_values(log)
    cleaner = cleaner_for(log, clock)
    cleaning = cleaner.clean_filthiest_log()
    assert cleaning is not None and cleaning.completed
    after = key_values(log)
    assert len(after) == 7 and {key for _, key, _ in after} == {f"k{i}".encode() for i in range(7)}
    assert latest_view(after) == latest_view(before)
    _check_original(log, written)
    assert (log.log_start_offset, log.log_end_offset) == (start, end)
    assert read_cleaner_checkpoint(log.dir) == log.active_segment.base_offset
    assert (log.dir / CLEANER_CHECKPOINT).exists() and not _dirty_files(log)
    assert cleaner.passes_completed == 1 and cleaning.stats.records_removed == 240 - 7
    # A second pass merges the now small segments; the contents stay the same.
    segments = log.number_of_segments
    cleaner.clean_log(log)
    assert log.number_of_segments < segments and key_values(log) == after
    log.close()
    reopened = open_log(tmp_path / "t-0", clock)
    assert key_values(reopened) == after and reopened.log_end_offset == end


def test_the_active_segment_is_never_touched(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    written = _fill(log, clock, 50)
    active = log.active_segment
    active_bytes = active.log.read(0, active.size)
    active_records = [r for r in key_values(log) if r[0] >= active.base_offset]
    assert len(active_records) > 1
    cleaner_for(log, clock).clean_filthiest_log()
    assert log.active_segment is active
    assert active.log.read(0, active.size) == active_bytes
    assert [r for r in key_values(log) if r[0] >= active.base_offset] == active_records
    # Below the active segment each key appears at most once.
    below = [key for offset, key, _ in key_values(log) if offset < active.base_offset]
    assert len(below) == len(set(below))
    _check_original(log, written)


def test_cleaning_stops_at_the_high_watermark(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    _fill(log, clock, 60)
    log.roll()
    bases = [s.base_offset for s in log.segments]
    hw = bases[3] + 1  # inside the fourth segment
    cleaner = LogCleaner(
        lambda: [log], config_for=lambda _: CompactionConfig(min_cleanable_dirty_ratio=0),
        high_watermark=lambda _: hw, clock=clock,
    )  # fmt: skip
    before = key_values(log)
    cleaner.clean_filthiest_log()
    assert read_cleaner_checkpoint(log.dir) == bases[3]
    assert [r for r in key_values(log) if r[0] >= bases[3]] == [
        r for r in before if r[0] >= bases[3]
    ]


def test_tombstones_survive_delete_retention_after_the_first_cleaning(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_leader(kv_batch([(b"a", b"1"), (b"b", b"1")], clock), 0)
    log.append_as_leader(kv_batch([(b"a", None), (b"c", b"1")], clock), 0)
    stamp = clock.milliseconds()
    log.roll()
    cleaner = cleaner_for(log, clock, delete_retention_ms=10 * SECOND)
    clock.advance(SECOND)
    cleaner.clean_log(log)  # first sight of the tombstone: horizon = now + 10 s
    assert key_values(log) == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")]
    (fields, records), *_ = [b for b in read_batches(log) if b[0][0] == 2]
    assert (
        fields[5] & 0x40 and fields[7] == clock.milliseconds() + 10 * SECOND
    )  # delete horizon flag, base
    assert [r.timestamp for r in records] == [stamp, stamp]  # record timestamps unchanged
    clock.advance(9 * SECOND)
    assert cleaner.cleanable_logs() == []  # nothing dirty, horizon not reached
    cleaner.clean_log(log)
    assert (2, b"a", None) in key_values(log)
    clock.advance(SECOND)
    due = cleaner.cleanable_logs()
    assert len(due) == 1 and due[0].delete_horizon_due and due[0].cleanable_bytes == 0
    cleaning = cleaner.clean_filthiest_log()
    assert cleaning is not None and cleaning.stats.tombstones_removed == 1
    assert key_values(log) == [(1, b"b", b"1"), (3, b"c", b"1")]
    (fields, _), *_ = [b for b in read_batches(log) if b[0][0] == 2]
    assert not fields[5] & 0x40  # the spent horizon is dropped with the tombstone
    assert cleaner.cleanable_logs() == []


def test_a_tombstone_in_the_dirty_part_removes_older_values_at_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_log(tmp_path / "t-0", clock)
    for i in range(20):
        log.append_as_leader(kv_batch([(b"a", f"v{i}".encode())], clock), 0)
    log.append_as_leader(kv_batch([(b"a", None)], clock), 0)
    log.roll()
    cleaner_for(log, clock, delete_retention_ms=0).clean_log(log)
    assert key_values(log) == [(20, b"a", None)]  # kept for one pass even with retention 0
    cleaner_for(log, clock, delete_retention_ms=0).clean_log(log)
    assert key_values(log) == []
    assert log.log_end_offset == 21 and log.log_start_offset == 0


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_filtered_and_recompressed(
    tmp_path: Path, clock: ManualClock, codec: int
) -> None:
    log = open_log(tmp_path / "t-0", clock, segment_bytes=2048)
    written = _fill(log, clock, 40, keys=11, per_batch=8, codec=codec)
    log.append_as_leader(kv_batch([(b"k3", None)], clock, codec), 0)
    log.roll()
    before = key_values(log)
    cleaner_for(log, clock).clean_log(log)
    after = key_values(log)
    assert latest_view(after) == latest_view(before)
    assert len(after) == 11  # ten latest values and the tombstone
    written[log.log_end_offset - 1] = (b"k3", None)  # type: ignore[assignment]
    _check_original(log, written)
    batches = read_batches(log)
    assert batches and all(fields[5] & 0x07 == codec for fields, _ in batches)
    # Rebuilt batches keep their original lastOffsetDelta (Kafka's overrideLastOffset).
    assert any(fields[6] + 1 > fields[12] for fields, _ in batches)
    log.close()
    assert key_values(open_log(tmp_path / "t-0", clock, segment_bytes=2048)) == after


def test_records_without_a_key_are_dropped_when_cleaning(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_log(tmp_path / "t-0", clock, cleanup_policy="delete")
    log.append_as_leader(kv_batch([(None, b"keyless"), (b"a", b"1")], clock), 0)
    log.roll()
    log.update_config(compact_config())  # the topic became compacted
    cleaning = cleaner_for(log, clock).clean_log(log)
    assert key_values(log) == [(1, b"a", b"1")]
    assert cleaning.stats.invalid_records_removed == 1


# -- when a pass may run --------------------------------------------------------------------
def test_min_cleanable_dirty_ratio(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    for i in range(30):  # distinct keys: cleaning keeps all of it
        log.append_as_leader(kv_batch([(f"key{i}".encode(), b"v" * 100)], clock), 0)
    log.roll()
    cleaner = cleaner_for(log, clock, min_cleanable_dirty_ratio=0.5)
    (candidate,) = cleaner.cleanable_logs()
    assert candidate.cleanable_ratio == 1.0 and candidate.clean_bytes == 0
    cleaner.clean_filthiest_log()
    assert cleaner.cleanable_logs() == []
    for _ in range(4):  # some dirty data, but less than half of the log
        log.append_as_leader(kv_batch([(b"key1", b"x" * 200)], clock), 0)
        log.roll()
    candidate = cleaner.log_to_clean(log)
    assert 0 < candidate.cleanable_ratio < 0.5
    assert cleaner.cleanable_logs() == []
    for _ in range(20):
        log.append_as_leader(kv_batch([(b"key2", b"y" * 200)], clock), 0)
        log.roll()
    (candidate,) = cleaner.cleanable_logs()
    assert candidate.cleanable_ratio >= 0.5
    assert candidate.first_dirty_offset == read_cleaner_checkpoint(log.dir) == 30
    assert candidate.clean_bytes + candidate.cleanable_bytes == log.size


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    _fill(log, clock, 40)
    log.roll()
    boundary = log.log_end_offset
    clock.advance(60 * SECOND)
    _fill(log, clock, 40)
    log.roll()
    clock.advance(10 * SECOND)
    before = key_values(log)
    cleaner = cleaner_for(log, clock, min_compaction_lag_ms=30 * SECOND)
    (candidate,) = cleaner.cleanable_logs()
    assert candidate.first_uncleanable_offset == boundary
    cleaner.clean_filthiest_log()
    assert read_cleaner_checkpoint(log.dir) == boundary
    recent = [r for r in before if r[0] >= boundary]
    assert [r for r in key_values(log) if r[0] >= boundary] == recent  # untouched
    old = [key for offset, key, _ in key_values(log) if offset < boundary]
    assert len(old) == len(set(old))
    assert cleaner.cleanable_logs() == []
    clock.advance(30 * SECOND)
    cleaner.clean_filthiest_log()
    assert len(key_values(log)) == 7


def test_max_compaction_lag_forces_cleaning_below_the_ratio(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_log(tmp_path / "t-0", clock)
    _fill(log, clock, 60)
    log.roll()
    lazy = cleaner_for(log, clock, min_cleanable_dirty_ratio=1.0)
    lazy.clean_log(log)
    log.append_as_leader(kv_batch([(b"k1", b"new")], clock), 0)
    log.roll()
    assert lazy.cleanable_logs() == []  # ratio far below 1.0
    overdue = cleaner_for(
        log, clock, min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=5 * SECOND
    )
    assert overdue.cleanable_logs() == []
    clock.advance(6 * SECOND)
    (candidate,) = overdue.cleanable_logs()
    assert candidate.max_compaction_delay_ms == SECOND
    overdue.clean_filthiest_log()
    assert (b"k1", b"new") in [(k, v) for _, k, v in key_values(log)]
    assert [k for _, k, _ in key_values(log)].count(b"k1") == 1


def test_compact_delete_also_applies_time_retention(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(
        tmp_path / "t-0", clock, cleanup_policy="compact,delete", retention_ms=3600 * SECOND
    )
    _fill(log, clock, 30, keys=3)  # old data
    log.roll()
    clock.advance(7200 * SECOND)
    _fill(log, clock, 30, keys=3)
    log.roll()
    assert log.delete_old_segments() > 0
    start = log.log_start_offset
    assert start > 0 and all(offset >= start for offset, _, _ in key_values(log))
    cleaner_for(log, clock).clean_filthiest_log()
    assert len(key_values(log)) == 3 and log.log_start_offset == start


def test_only_compacted_logs_are_cleaned(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, cleanup_policy="delete")
    _fill(log, clock, 40)
    log.roll()
    assert cleaner_for(log, clock).cleanable_logs() == []


def test_a_full_offset_map_cleans_in_several_passes(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, segment_bytes=600)
    written = _fill(log, clock, 60, keys=30, per_batch=2)  # every segment brings new keys
    log.roll()
    before = key_values(log)
    cleaner = LogCleaner(
        lambda: [log], config_for=lambda _: CompactionConfig(min_cleanable_dirty_ratio=0),
        clock=clock, max_map_entries=8,
    )  # fmt: skip
    cleaning = cleaner.clean_filthiest_log()
    assert cleaning is not None and cleaning.end_offset < log.active_segment.base_offset
    assert read_cleaner_checkpoint(log.dir) == cleaning.end_offset
    while cleaner.clean_filthiest_log() is not None:
        pass
    assert read_cleaner_checkpoint(log.dir) == log.active_segment.base_offset
    assert latest_view(key_values(log)) == latest_view(before)
    _check_original(log, written)


# -- producers, transactions, the produce path ------------------------------------------------
def test_compacted_topics_reject_records_without_a_key(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    for codec in (0, 1, 4):
        with pytest.raises(InvalidRecordException, match="without key"):
            log.append_as_leader(kv_batch([(b"a", b"1"), (None, b"2")], clock, codec), 0)
    assert log.log_end_offset == 0
    assert InvalidRecordException.code.name == "invalid_record"
    log.append_as_leader(kv_batch([(b"a", None)], clock), 0)  # a keyed tombstone is fine
    plain = open_log(tmp_path / "p-0", clock, cleanup_policy="delete")
    plain.append_as_leader(kv_batch([(None, b"2")], clock), 0)
    assert plain.log_end_offset == 1


def test_the_last_batch_of_a_producer_is_kept_empty(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_leader(
        kv_batch([(b"a", b"p0"), (b"b", b"p1")], clock, producer_id=7, producer_epoch=0,
                 base_sequence=0), 0,
    )  # fmt: skip
    log.append_as_leader(kv_batch([(b"a", b"x"), (b"b", b"y")], clock), 0)
    log.roll()
    cleaner_for(log, clock).clean_log(log)
    batches = read_batches(log)
    fields, records = batches[0]
    assert records == [] and fields[0] == 0 and fields[6] == 1  # offsets 0..1, no records
    assert (fields[9], fields[10], fields[11], fields[12]) == (7, 0, 0, 0)  # pid, epoch, seq
    assert key_values(log) == [(2, b"a", b"x"), (3, b"b", b"y")]
    log.close()
    reopened = open_log(tmp_path / "t-0", clock)
    reopened.append_as_leader(  # sequence 2 follows: the producer state survived
        kv_batch([(b"c", b"p2")], clock, producer_id=7, producer_epoch=0, base_sequence=2), 0
    )
    assert reopened.log_end_offset == 5


def test_transactional_and_control_batches_are_kept_intact(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_log(tmp_path / "t-0", clock)
    txn = kv_batch(
        [(b"a", b"txn")], clock, producer_id=3, producer_epoch=0, base_sequence=0,
        transactional=True,
    )  # fmt: skip
    log.append_as_leader(txn, 0)
    commit = build_batch(
        [Rec(b"\x00\x00\x00\x00\x00\x00", key=b"\x00\x00\x00\x01", timestamp=clock.milliseconds())],
        producer_id=3, producer_epoch=0, transactional=True, control=True,
    )  # fmt: skip
    log.append_as_leader(commit, 0, origin=AppendOrigin.COORDINATOR)
    log.append_as_leader(kv_batch([(b"a", b"later")], clock), 0)
    log.roll()
    raw = log.read(0, 1 << 20).read()
    cleaner_for(log, clock).clean_log(log)
    batches = decode_batches(log.read(0, 1 << 20).read())
    assert [fields[0] for fields, _ in batches][:2] == [0, 1]
    assert log.read(0, 1 << 20).read()[: len(txn) + len(commit)] == raw[: len(txn) + len(commit)]


# -- the log while a pass runs ----------------------------------------------------------------
def test_reads_and_appends_interleave_with_a_pass(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, file_delete_delay_ms=60 * SECOND)
    written = _fill(log, clock, 80)
    log.roll()
    before = key_values(log)
    held = log.read(0, 1 << 20)  # a fetch response still being sent from the old files
    held_bytes = held.read()
    cleaner = LogCleaner(
        lambda: [log], config_for=lambda _: CompactionConfig(min_cleanable_dirty_ratio=0),
        clock=clock, slice_bytes=200,
    )  # fmt: skip
    expected = latest_view(before)
    steps = 0
    while cleaner.step():
        steps += 1
        assert latest_view(key_values(log)) == expected  # readable at every step
        if steps % 5 == 0:
            value = str(steps).encode()
            info = log.append_as_leader(kv_batch([(b"new", value)], clock), 0)
            written[info.first_offset] = (b"new", value)
            expected[b"new"] = value
    assert steps > 10 and cleaner.passes_completed >= 1
    assert held.read() == held_bytes  # the replaced files stay readable until deleted
    assert log.delete_pending_files() == 0
    clock.advance(60 * SECOND)
    assert log.delete_pending_files() > 0
    _check_original(log, written)
    assert not _dirty_files(log)


def test_a_pass_aborts_when_its_segments_go_away(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    _fill(log, clock, 80)
    log.roll()
    cleaner = LogCleaner(
        lambda: [log], config_for=lambda _: CompactionConfig(min_cleanable_dirty_ratio=0),
        clock=clock, slice_bytes=100,
    )  # fmt: skip
    for _ in range(3):
        assert cleaner.step()
    assert cleaner.in_progress is not None
    log.delete_records_before(log.segments[2].base_offset)  # DeleteRecords drops segments
    before = key_values(log)
    assert cleaner.step()
    assert cleaner.in_progress is None and cleaner.passes_aborted == 1
    assert key_values(log) == before and not _dirty_files(log)
    assert read_cleaner_checkpoint(log.dir) is None
    while cleaner.step():
        pass
    assert cleaner.passes_completed == 1 and len(key_values(log)) == 7


def test_an_abort_mid_group_removes_the_partial_files(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, segment_bytes=4096)
    _fill(log, clock, 200)
    log.roll()
    cleaner = LogCleaner(
        lambda: [log], config_for=lambda _: CompactionConfig(min_cleanable_dirty_ratio=0),
        clock=clock, slice_bytes=100,
    )  # fmt: skip
    while not _dirty_files(log):
        assert cleaner.step()
    cleaner.abort()
    assert not _dirty_files(log) and cleaner.passes_aborted == 1


def test_truncation_lowers_the_cleaner_checkpoint(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    _fill(log, clock, 60)
    log.roll()
    cleaner_for(log, clock).clean_log(log)
    checkpoint = read_cleaner_checkpoint(log.dir)
    assert checkpoint is not None and checkpoint > 20
    log.truncate_to(20)
    assert read_cleaner_checkpoint(log.dir) == 20
    log.truncate_fully_and_start_at(5)
    assert read_cleaner_checkpoint(log.dir) == 5


def test_compaction_config_from_topic_configs() -> None:
    config = CompactionConfig.from_topic_configs(
        {"delete.retention.ms": 5, "min.cleanable.dirty.ratio": 0.25, "segment.bytes": 1,
         "min.compaction.lag.ms": None, "max.compaction.lag.ms": "7"}
    )  # fmt: skip
    assert config == CompactionConfig(5, 0.25, 0, 7)


def test_a_corrupt_batch_fails_the_pass_and_the_log_is_retried_later(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_log(tmp_path / "t-0", clock)
    _fill(log, clock, 60)
    log.roll()
    segment = log.segments[2]
    corrupted = bytearray(segment.log.read(0, segment.size))
    corrupted[70] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    os.pwrite(segment.log.fileno(), bytes(corrupted), 0)
    cleaner = cleaner_for(log, clock)
    cleaner.retry_failed_after_ms = 10 * SECOND
    while cleaner.step():
        pass
    assert cleaner.passes_failed == 1 and cleaner.passes_completed == 0
    assert not _dirty_files(log) and read_cleaner_checkpoint(log.dir) is None
    assert cleaner.cleanable_logs() == []  # skipped until the retry time
    clock.advance(10 * SECOND)
    assert len(cleaner.cleanable_logs()) == 1


def test_a_malformed_checkpoint_skips_only_that_log(tmp_path: Path, clock: ManualClock) -> None:
    bad, good = open_log(tmp_path / "bad-0", clock), open_log(tmp_path / "good-0", clock)
    for log in (bad, good):
        _fill(log, clock, 30)
        log.roll()
    (bad.dir / CLEANER_CHECKPOINT).write_text("garbage")
    cleaner = LogCleaner(
        lambda: [bad, good], config_for=lambda _: CompactionConfig(min_cleanable_dirty_ratio=0),
        clock=clock,
    )  # fmt: skip
    assert [c.log for c in cleaner.cleanable_logs()] == [good]
