"""Transactions in the log: the first unstable offset, the per-segment transaction index
(``.txnindex``) of aborted transactions, their recovery, and read_committed reads."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.base import TopicPartition
from sluice.base.clock import ManualClock
from sluice.log import AppendOrigin, Log, LogConfig
from sluice.log.transaction_index import AbortedTxn, TransactionIndex
from sluice.replication.partition import FetchIsolation, Partition
from support.logs import START_MS
from support.records import Rec, build_batch


def _cfg(**kw: object) -> LogConfig:
    base: dict[str, object] = {"index_interval_bytes": 256, "file_delete_delay_ms": 0}
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def data(clock: ManualClock, pid: int, seq: int, n: int = 2, txn: bool = True) -> bytes:
    records = [Rec(f"{pid}-{seq}-{i}".encode(), timestamp=clock.milliseconds()) for i in range(n)]
    return build_batch(
        records, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=txn
    )


def marker(clock: ManualClock, pid: int, commit: bool) -> bytes:
    rec = Rec(
        struct.pack(">hi", 0, 0),
        key=struct.pack(">hh", 0, int(commit)),
        timestamp=clock.milliseconds(),
    )
    return build_batch([rec], producer_id=pid, producer_epoch=0, control=True, transactional=True)


def end(log: Log, clock: ManualClock, pid: int, commit: bool) -> int:
    info = log.append_as_leader(marker(clock, pid, commit), 0, AppendOrigin.COORDINATOR)
    return info.first_offset


def test_first_unstable_offset_follows_the_earliest_open_transaction(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    log = Log(tmp_path / "t-0", _cfg(), clock=clock)
    assert log.first_unstable_offset is None
    log.append_as_leader(data(clock, 1, 0), 0)  # 0-1, producer 1 opens at 0
    log.append_as_leader(data(clock, 2, 0), 0)  # 2-3, producer 2 opens at 2
    assert log.first_unstable_offset == 0
    assert end(log, clock, 1, commit=True) == 4
    assert log.first_unstable_offset == 2
    assert end(log, clock, 2, commit=False) == 5
    assert log.first_unstable_offset is None
    assert log.collect_aborted_transactions(0, 6) == [AbortedTxn(2, 2, 5, 6)]
    assert log.collect_aborted_transactions(6, 10) == []


def test_aborted_transactions_are_indexed_per_segment_and_survive_restart(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    log = Log(tmp_path / "t-0", _cfg(), clock=clock)
    log.append_as_leader(data(clock, 7, 0), 0)
    end(log, clock, 7, commit=False)  # aborted 0..2
    log.roll()
    log.append_as_leader(data(clock, 7, 2), 0)  # 3-4
    end(log, clock, 7, commit=True)  # 5
    log.append_as_leader(data(clock, 7, 4), 0)  # 6-7
    end(log, clock, 7, commit=False)  # 8
    files = sorted(p.name for p in (tmp_path / "t-0").glob("*.txnindex"))
    assert files == ["00000000000000000000.txnindex", "00000000000000000003.txnindex"]
    expected = [AbortedTxn(7, 0, 2, 3), AbortedTxn(7, 6, 8, 9)]
    assert log.collect_aborted_transactions(0, 9) == expected
    log.close()
    reopened = Log(tmp_path / "t-0", _cfg(), clock=clock, had_clean_shutdown=True)
    assert reopened.collect_aborted_transactions(0, 9) == expected
    assert reopened.collect_aborted_transactions(3, 9) == expected[1:]
    reopened.close()


def test_lost_index_entries_are_rebuilt_by_the_producer_state_replay(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    log = Log(tmp_path / "t-0", _cfg(), clock=clock)
    log.append_as_leader(data(clock, 3, 0), 0)
    log.append_as_leader(data(clock, 4, 0), 0)  # producer 4 stays open
    end(log, clock, 3, commit=False)  # aborted 0..4, LSO then 2 (producer 4 open)
    log.flush()
    # A crash that kept the data but not the index entry nor any snapshot.
    for path in (tmp_path / "t-0").glob("*.txnindex"):
        path.unlink()
    for path in (tmp_path / "t-0").glob("*.snapshot"):
        path.unlink()
    recovered = Log(tmp_path / "t-0", _cfg(), clock=clock)
    assert recovered.collect_aborted_transactions(0, 5) == [AbortedTxn(3, 0, 4, 2)]
    assert recovered.first_unstable_offset == 2
    recovered.close()


def test_truncation_drops_index_entries_above_the_target(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    log = Log(tmp_path / "t-0", _cfg(), clock=clock)
    log.append_as_leader(data(clock, 1, 0), 0)
    end(log, clock, 1, commit=False)  # 2
    log.append_as_leader(data(clock, 1, 2), 0)  # 3-4
    end(log, clock, 1, commit=False)  # 5
    log.truncate_to(3)
    assert log.collect_aborted_transactions(0, 10) == [AbortedTxn(1, 0, 2, 3)]
    assert log.first_unstable_offset is None
    log.close()


def test_partition_lso_and_read_committed_reads(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    log = Log(tmp_path / "t-0", _cfg(), clock=clock)
    partition = Partition(TopicPartition("t", 0), log, 0, [0], 0)
    log.append_as_leader(data(clock, 9, 0, txn=False), 0)  # 0-1 plain idempotent
    log.append_as_leader(data(clock, 10, 0), 0)  # 2-3 open transaction
    log.append_as_leader(data(clock, 11, 0, txn=False), 0)  # 4-5 after it
    partition.maybe_increment_high_watermark()
    assert partition.high_watermark == 6 and partition.last_stable_offset == 2
    committed = partition.read_records(0, 1 << 20, FetchIsolation.TXN_COMMITTED, True)
    uncommitted = partition.read_records(0, 1 << 20, FetchIsolation.HIGH_WATERMARK, True)
    assert committed.data.records.size < uncommitted.data.records.size
    assert committed.aborted_transactions == [] and uncommitted.aborted_transactions is None
    held = partition.read_records(2, 1 << 20, FetchIsolation.TXN_COMMITTED, True)
    assert held.data.records.size == 0
    end(log, clock, 10, commit=False)  # 6
    partition.maybe_increment_high_watermark()
    assert partition.last_stable_offset == 7
    after = partition.read_records(0, 1 << 20, FetchIsolation.TXN_COMMITTED, True)
    assert after.aborted_transactions == [AbortedTxn(10, 2, 6, 7)]
    log.close()


def test_transaction_index_file_format_and_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path)
    index.append(AbortedTxn(5, 10, 20, 21))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(5, 11, 20, 21))
    index.close()
    assert path.read_bytes() == struct.pack(">hqqqq", 0, 5, 10, 20, 21)
    with path.open("ab") as f:
        f.write(b"\x00\x00\x01")  # a torn second entry
    assert TransactionIndex(path).entries == [AbortedTxn(5, 10, 20, 21)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["data", "commit", "abort"])),
                max_size=30))  # fmt: skip
def test_lso_and_aborted_list_match_a_reference_model(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[int, str]]
) -> None:
    """Random interleavings of four transactional producers against a model that tracks
    each producer's open transaction and every aborted range."""
    clock = ManualClock(START_MS)
    log = Log(tmp_path_factory.mktemp("txn") / "m-0", _cfg(segment_bytes=600), clock=clock)
    seqs = dict.fromkeys(range(4), 0)
    open_first: dict[int, int] = {}
    aborted: list[tuple[int, int, int]] = []
    for pid, action in steps:
        if action == "data":
            first = log.append_as_leader(data(clock, pid, seqs[pid]), 0).first_offset
            seqs[pid] += 2
            open_first.setdefault(pid, first)
        elif pid in open_first:
            offset = end(log, clock, pid, commit=action == "commit")
            first = open_first.pop(pid)
            if action == "abort":
                aborted.append((pid, first, offset))
        assert log.first_unstable_offset == min(open_first.values(), default=None)
    got = [(t.producer_id, t.first_offset, t.last_offset)
           for t in log.collect_aborted_transactions(0, log.log_end_offset)]  # fmt: skip
    assert got == aborted
    log.close()


def test_compaction_keeps_the_aborted_transactions_of_cleaned_segments(tmp_path: Path) -> None:
    """The cleaner copies transactional batches and markers unchanged; the cleaned segment
    takes over the old segments' .txnindex entries, so read_committed still skips them."""
    from sluice.log.cleaner.log_cleaner import CompactionConfig, LogCleaner

    clock = ManualClock(START_MS)
    log = Log(tmp_path / "c-0", _cfg(segment_bytes=400, cleanup_policy="compact"), clock=clock)
    for seq in range(0, 12, 2):
        records = [Rec(f"v{seq}-{i}".encode(), key=f"k{i}".encode(), timestamp=clock.milliseconds())
                   for i in range(2)]  # fmt: skip
        log.append_as_leader(
            build_batch(records, producer_id=5, producer_epoch=0, base_sequence=seq,
                        transactional=True), 0,
        )  # fmt: skip
        end(log, clock, 5, commit=seq % 4 == 0)
    log.roll()
    before = log.collect_aborted_transactions(0, log.log_end_offset)
    assert len(before) == 3 and log.number_of_segments > 2
    old_segments = log.segments
    cleaner = LogCleaner(
        lambda: [log], config_for=lambda _: CompactionConfig(min_cleanable_dirty_ratio=0),
        high_watermark=lambda _: log.log_end_offset, clock=clock,
    )  # fmt: skip
    cleaner.clean_log(log)
    assert cleaner.passes_completed == 1
    assert log.segments[0] is not old_segments[0]  # swapped for a cleaned segment
    assert log.collect_aborted_transactions(0, log.log_end_offset) == before
    log.close()
    reopened = Log(tmp_path / "c-0", _cfg(segment_bytes=400, cleanup_policy="compact"),
                   clock=clock, had_clean_shutdown=True)  # fmt: skip
    assert reopened.collect_aborted_transactions(0, reopened.log_end_offset) == before
    reopened.close()
