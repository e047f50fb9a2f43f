"""ReplicaManager with DelayedProduce, DelayedFetch and DelayedDeleteRecords, sans-I/O:
real logs in a temp dir, purgatories on a manual clock, no reaper threads, no sleeps."""

from __future__ import annotations

import gc
import io
import logging
import os
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import i8, i16, i32, i64

from sluice.base import TopicPartition
from sluice.base.clock import ManualClock
from sluice.log import Log, LogConfig
from sluice.log.append import AppendOrigin
from sluice.log.group_flush import GroupFlusher
from sluice.protocol import ErrorCode
from sluice.purgatory import DelayedOperationPurgatory
from sluice.replication.partition import FetchIsolation
from sluice.replication.replica_manager import (
    FetchParams,
    PartitionFetch,
    ReadErrorLog,
    ReplicaManager,
)

TP = TopicPartition("t", 0)


def batch(*values: bytes) -> bytes:
    import datetime

    now = datetime.datetime.now(datetime.UTC)
    records = tuple(
        Record(attributes=i8(0), timestamp=now, offset=i64(i), key=None, value=v, headers=())
        for i, v in enumerate(values)
    )
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=i64(-1), producer_epoch=i16(-1),
                                        base_sequence=i32(-1), records=records,
                                        attributes=i16(0)))  # fmt: skip
    return buf.getvalue()


class Harness:
    def __init__(self, tmp_path: Path, config: LogConfig | None = None) -> None:
        self.clock = ManualClock(0)
        self.purgatories: list[Any] = []

        def make(name: str, purge_interval: int) -> Any:
            p = DelayedOperationPurgatory(
                name, purge_interval=purge_interval, reaper_enabled=False, clock=self.clock
            )
            self.purgatories.append(p)
            return p

        self.rm = ReplicaManager(0, make, min_isr=lambda tp: self.min_isr)
        self.min_isr = 1
        self.log = Log(tmp_path / "t-0", config or LogConfig())
        self.partition = self.rm.add_partition(TP, self.log, [0])

    def expire(self, ms: int) -> None:
        self.clock.advance(ms)
        for p in self.purgatories:
            while p.timer.advance_clock(0):
                pass


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    yield harness
    harness.rm.shutdown()
    harness.log.close()


def test_acks_one_answers_at_once(h: Harness) -> None:
    out: list[Any] = []
    h.rm.append_records(1000, 1, {TP: batch(b"a", b"b")}, out.append)
    assert len(out) == 1 and out[0][TP].error == ErrorCode.none and out[0][TP].base_offset == 0
    assert h.partition.high_watermark == 2


class Rounds:
    """A group flusher (sluice.log.group_flush) whose loop turns and flush thread the test
    runs: ``step()`` starts the due round and finishes it."""

    def __init__(self, h: Harness) -> None:
        self.soon: list[Any] = []
        self.jobs: list[Any] = []
        h.log.flush_group = GroupFlusher(
            self.soon.append, lambda job, done: self.jobs.append((job, done)), h.rm.flushed
        )

    def step(self) -> None:
        while self.soon:
            self.soon.pop(0)()
        while self.jobs:
            job, done = self.jobs.pop(0)
            job()
            done()


@pytest.mark.parametrize("acks", [1, -1])
def test_an_append_that_makes_a_flush_due_is_answered_once_flushed(
    tmp_path: Path, acks: int
) -> None:
    h = Harness(tmp_path, LogConfig(flush_messages=2))
    rounds = Rounds(h)
    out: list[Any] = []
    h.rm.append_records(1000, acks, {TP: batch(b"a")}, out.append)
    assert len(out) == 1  # 1 of 2 messages: no flush due, answered at once
    h.rm.append_records(1000, acks, {TP: batch(b"b")}, out.append)
    assert len(out) == 1 and h.log.recovery_point == 0 and h.rm.produce_purgatory.delayed == 1
    h.rm.append_records(1000, acks, {TP: batch(b"c")}, out.append)
    assert len(out) == 2  # after the due one: answered at once, not flushed
    rounds.step()
    assert h.log.recovery_point == 3 and len(out) == 3  # the round took the log end
    assert out[2][TP].error == ErrorCode.none and out[2][TP].base_offset == 1
    h.rm.shutdown()
    h.log.close()


def test_a_produce_waiting_for_a_flush_that_fails_gets_a_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = Harness(tmp_path, LogConfig(flush_messages=1))
    rounds = Rounds(h)
    out: list[Any] = []
    h.rm.append_records(1000, 1, {TP: batch(b"a")}, out.append)
    assert out == []

    def fail(fd: int) -> None:
        raise OSError(5, "injected I/O error")

    monkeypatch.setattr(os, "fsync", fail)
    rounds.step()
    monkeypatch.undo()
    assert out[0][TP].error == ErrorCode.kafka_storage_error
    h.rm.shutdown()
    h.log.close()


def test_a_produce_waiting_for_a_flush_times_out(tmp_path: Path) -> None:
    h = Harness(tmp_path, LogConfig(flush_messages=1))
    Rounds(h)  # its rounds never run
    out: list[Any] = []
    h.rm.append_records(500, 1, {TP: batch(b"a")}, out.append)
    h.expire(500)
    assert out[0][TP].error == ErrorCode.request_timed_out
    h.rm.shutdown()
    h.log.close()


def test_acks_all_on_single_replica_completes_without_waiting(h: Harness) -> None:
    out: list[Any] = []
    h.rm.append_records(1000, -1, {TP: batch(b"a")}, out.append)
    assert len(out) == 1 and out[0][TP].error == ErrorCode.none
    assert h.rm.produce_purgatory.delayed == 0


def test_acks_all_waits_for_follower_then_times_out(h: Harness) -> None:
    # Pretend a follower is in the ISR and has not fetched: the HW cannot move.
    h.partition.isr = {0, 1}
    h.partition.replica_leos[1] = 0
    out: list[Any] = []
    h.rm.append_records(1000, -1, {TP: batch(b"a")}, out.append)
    assert out == [] and h.rm.produce_purgatory.delayed == 1
    h.expire(999)
    assert out == []
    h.expire(1)
    assert out[0][TP].error == ErrorCode.request_timed_out


def test_acks_all_completes_when_hw_catches_up(h: Harness) -> None:
    h.partition.isr = {0, 1}
    h.partition.replica_leos[1] = 0
    out: list[Any] = []
    h.rm.append_records(30_000, -1, {TP: batch(b"a", b"b")}, out.append)
    assert out == []
    h.partition.replica_leos[1] = 2  # the follower fetched up to the LEO
    assert h.partition.maybe_increment_high_watermark()
    h.rm.produce_purgatory.check_and_complete(TP)
    assert out[0][TP].error == ErrorCode.none and h.rm.produce_purgatory.delayed == 0


def test_an_answered_produce_lets_go_of_its_request(h: Harness, tmp_path: Path) -> None:
    """A completed DelayedProduce stays in the watcher lists of its other partitions
    until a purge; what its callback holds (the request, whose records are views of a
    reused receive buffer) must not stay with it."""

    class Request:
        pass

    request = Request()
    held = weakref.ref(request)
    out: list[Any] = []

    def answer(statuses: Any, request: Request = request) -> None:
        out.append(statuses)

    other = TopicPartition("t", 1)
    other_log = Log(tmp_path / "t-1", LogConfig())
    try:
        h.rm.add_partition(other, other_log, [0])
        h.partition.isr = {0, 1}
        h.partition.replica_leos[1] = 0
        h.rm.append_records(30_000, -1, {TP: batch(b"a"), other: batch(b"b")}, answer)
        del request, answer
        assert out == [] and h.rm.produce_purgatory.watched == 2
        h.partition.replica_leos[1] = 1
        assert h.partition.maybe_increment_high_watermark()
        h.rm.produce_purgatory.check_and_complete(TP)
        assert out and out[0][TP].error == ErrorCode.none
        assert h.rm.produce_purgatory.watched == 1  # still listed under the other partition
        gc.collect()
        assert held() is None
    finally:
        other_log.close()


def test_acks_all_below_min_isr_is_rejected(h: Harness) -> None:
    h.min_isr = 2
    out: list[Any] = []
    h.rm.append_records(1000, -1, {TP: batch(b"a")}, out.append)
    assert out[0][TP].error == ErrorCode.not_enough_replicas
    assert h.log.log_end_offset == 0  # nothing appended


def test_hw_holds_while_the_isr_is_below_min_isr(h: Harness) -> None:
    h.rm.append_records(1000, 1, {TP: batch(b"a")}, lambda _: None)
    assert h.partition.high_watermark == 1
    h.min_isr = 2  # ISR {0} is below it now: acks=1 appends are not committed
    h.rm.append_records(1000, 1, {TP: batch(b"b", b"c")}, lambda _: None)
    assert h.log.log_end_offset == 3 and h.partition.high_watermark == 1
    h.partition.isr = {0, 1}
    h.partition.replica_leos[1] = 3  # a follower caught up and rejoined
    assert h.partition.maybe_increment_high_watermark()
    assert h.partition.high_watermark == 3


def test_high_watermarks_survive_a_restart(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    checkpoint = tmp_path / "replication-offset-checkpoint"
    h.rm.load_high_watermarks([tmp_path])
    h.partition.isr = {0, 1}
    h.partition.replica_leos[1] = 2
    h.rm.append_records(1000, 1, {TP: batch(b"a", b"b", b"c")}, lambda _: None)
    assert h.partition.high_watermark == 2  # the follower has two of the three
    h.rm.checkpoint_high_watermarks()
    h.rm.shutdown()
    h.log.close()
    assert checkpoint.read_text().split() == ["0", "1", "t", "0", "2"]

    again = Harness.__new__(Harness)
    Harness.__init__(again, tmp_path / "unused")  # a fresh manager and clock
    again.rm.load_high_watermarks([tmp_path])
    log = Log(tmp_path / "t-0", LogConfig())
    partition = again.rm.add_partition(TP, log, [0, 1])  # a replicated partition
    assert log.log_end_offset == 3 and partition.high_watermark == 2
    again.rm.shutdown()
    again.log.close()
    log.close()


def test_periodic_high_watermark_checkpoint_takes_only_moved_marks(tmp_path: Path) -> None:
    """The periodic write (the broker runs write_high_watermarks on a worker thread) gets
    the HWs only when one moved since the last write: no fsync for nothing."""
    h = Harness(tmp_path)
    checkpoint = tmp_path / "replication-offset-checkpoint"
    h.rm.load_high_watermarks([tmp_path])
    h.rm.append_records(1000, 1, {TP: batch(b"a", b"b")}, lambda _: None)
    hws = h.rm.high_watermarks_to_checkpoint()
    assert hws == {tmp_path: {("t", 0): 2}}
    h.rm.write_high_watermarks(hws)
    assert checkpoint.read_text().split() == ["0", "1", "t", "0", "2"]
    assert h.rm.high_watermarks_to_checkpoint() is None  # nothing moved since
    h.rm.append_records(1000, 1, {TP: batch(b"c")}, lambda _: None)
    assert h.rm.high_watermarks_to_checkpoint() == {tmp_path: {("t", 0): 3}}
    h.rm.shutdown()
    h.log.close()


def fetch_params(
    min_bytes: int = 1,
    max_wait_ms: int = 500,
    isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
) -> FetchParams:
    return FetchParams(-1, max_wait_ms, min_bytes, 1 << 20, isolation)


def test_fetch_with_data_answers_at_once(h: Harness) -> None:
    h.rm.append_records(1000, 1, {TP: batch(b"x" * 10)}, lambda s: None)
    out: list[Any] = []
    h.rm.fetch_messages(fetch_params(), [PartitionFetch(TP, 0, 1 << 20)], out.append)
    assert out and out[0][0][1].records.size > 0


def test_empty_fetch_waits_and_expires(h: Harness) -> None:
    out: list[Any] = []
    h.rm.fetch_messages(fetch_params(), [PartitionFetch(TP, 0, 1 << 20)], out.append)
    assert out == [] and h.rm.fetch_purgatory.delayed == 1
    h.expire(499)
    assert out == []
    h.expire(1)
    assert out[0][0][1].error == ErrorCode.none and out[0][0][1].records.size == 0


def test_waiting_fetch_is_woken_by_an_append(h: Harness) -> None:
    out: list[Any] = []
    h.rm.fetch_messages(fetch_params(), [PartitionFetch(TP, 0, 1 << 20)], out.append)
    assert out == []
    h.rm.append_records(1000, 1, {TP: batch(b"hello")}, lambda s: None)
    assert out and out[0][0][1].records.size > 0 and h.rm.fetch_purgatory.delayed == 0


def test_fetch_min_bytes_accumulates_across_appends(h: Harness) -> None:
    out: list[Any] = []
    one = batch(b"x" * 50)
    h.rm.fetch_messages(fetch_params(min_bytes=len(one) * 3), [PartitionFetch(TP, 0, 1 << 20)],
                        out.append)  # fmt: skip
    h.rm.append_records(1000, 1, {TP: one}, lambda s: None)
    h.rm.append_records(1000, 1, {TP: batch(b"x" * 50)}, lambda s: None)
    assert out == []
    h.rm.append_records(1000, 1, {TP: batch(b"x" * 50)}, lambda s: None)
    assert out and out[0][0][1].records.size == 3 * len(one)


def test_fetch_errors(h: Harness) -> None:
    out: list[Any] = []
    missing = PartitionFetch(TopicPartition("nope", 0), 0, 100)
    h.rm.fetch_messages(fetch_params(), [missing], out.append)
    assert out[0][0][1].error == ErrorCode.unknown_topic_or_partition
    out.clear()
    h.rm.fetch_messages(fetch_params(), [PartitionFetch(TP, 99, 100)], out.append)
    assert out[0][0][1].error == ErrorCode.offset_out_of_range
    out.clear()
    h.rm.fetch_messages(fetch_params(), [PartitionFetch(TP, 0, 100, current_leader_epoch=7)],
                        out.append)  # fmt: skip
    assert out[0][0][1].error == ErrorCode.unknown_leader_epoch


def test_a_fetch_that_meets_a_corrupt_batch_answers_corrupt_message(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """As Kafka's readFromLocalLog: CORRUPT_MESSAGE for the partition, not the next
    readable batch; one operator line per partition and interval however often a
    client asks again; an offline log answers KAFKA_STORAGE_ERROR."""
    for value in (b"a", b"b", b"c"):
        h.rm.append_records(1000, 1, {TP: batch(value)}, lambda s: None)
    segment = h.log.active_segment
    second = list(segment.batches())[1]
    os.pwrite(segment.log.fileno(), (10**6).to_bytes(4, "big"), second.position + 8)
    out: list[Any] = []
    h.rm.fetch_messages(fetch_params(), [PartitionFetch(TP, 0, 1)], out.append)
    assert out[0][0][1].error == ErrorCode.none and out[0][0][1].records.size == second.position
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            out.clear()
            h.rm.fetch_messages(fetch_params(), [PartitionFetch(TP, 1, 1 << 20)], out.append)
            data = out[0][0][1]
            assert data.error == ErrorCode.corrupt_message and data.records is None
            assert data.high_watermark == 3
    (line,) = [r.getMessage() for r in caplog.records]
    assert f"{segment.log.path} position {second.position}: batchLength 1000000" in line
    h.log.close()
    out.clear()
    h.rm.fetch_messages(fetch_params(), [PartitionFetch(TP, 0, 1 << 20)], out.append)
    assert out[0][0][1].error == ErrorCode.kafka_storage_error


def test_read_errors_are_logged_once_per_partition_and_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(0)
    errors = ReadErrorLog(clock, 60_000)
    other = TopicPartition("t", 1)
    with caplog.at_level(logging.ERROR):
        assert errors.report(TP, 5, OSError("bad"))
        assert not errors.report(TP, 5, OSError("bad"))
        assert errors.report(other, 5, OSError("bad"))
        clock.advance(59_999)
        assert not errors.report(TP, 5, OSError("bad"))
        clock.advance(1)
        assert errors.report(TP, 5, OSError("bad"))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and lines[-1].endswith("(2 more since the last report)")


def test_removed_partition_answers_waiting_fetch(h: Harness) -> None:
    out: list[Any] = []
    h.rm.fetch_messages(fetch_params(), [PartitionFetch(TP, 0, 1 << 20)], out.append)
    h.rm.remove_partition(TP)
    assert out and out[0][0][1].error == ErrorCode.unknown_topic_or_partition


def test_delete_records(h: Harness) -> None:
    for _ in range(3):
        h.rm.append_records(1000, 1, {TP: batch(b"a", b"b")}, lambda s: None)
    out: list[Any] = []
    h.rm.delete_records(1000, {TP: 4}, out.append)
    assert out[0][TP] == (4, ErrorCode.none) and h.log.log_start_offset == 4
    out.clear()
    h.rm.delete_records(1000, {TP: 99}, out.append)
    assert out[0][TP][1] == ErrorCode.offset_out_of_range
    out.clear()
    h.rm.delete_records(1000, {TP: -1}, out.append)  # -1: up to the high watermark
    assert out[0][TP] == (6, ErrorCode.none)


def _txn_batch(producer_id: int, value: bytes) -> bytes:
    import datetime

    now = datetime.datetime.now(datetime.UTC)
    record = Record(attributes=i8(0), timestamp=now, offset=i64(0), key=None, value=value,
                    headers=())  # fmt: skip
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=i64(producer_id), producer_epoch=i16(0),
                                        base_sequence=i32(0), records=(record,),
                                        attributes=i16(0x10)))  # fmt: skip
    return buf.getvalue()


def test_read_committed_fetch_is_woken_by_the_lso_not_the_hw(h: Harness) -> None:
    """Seed 002, 3.2: a read_committed consumer's delayed fetch waits for the LSO. Appends
    behind an open transaction move the HW but not the LSO and leave it parked; the
    marker that ends the transaction moves the LSO and completes it, with the records."""
    from sluice.coordinator.transaction import build_marker_batch

    h.rm.append_records(1000, 1, {TP: _txn_batch(7, b"in-txn")}, lambda s: None)
    assert (h.partition.high_watermark, h.partition.last_stable_offset) == (1, 0)
    out: list[Any] = []
    params = fetch_params(isolation=FetchIsolation.TXN_COMMITTED)
    h.rm.fetch_messages(params, [PartitionFetch(TP, 0, 1 << 20)], out.append)
    assert out == [] and h.rm.fetch_purgatory.delayed == 1
    h.rm.append_records(1000, 1, {TP: batch(b"after")}, lambda s: None)
    assert out == [] and h.partition.high_watermark == 2  # HW grew, LSO did not
    uncommitted: list[Any] = []
    h.rm.fetch_messages(fetch_params(), [PartitionFetch(TP, 0, 1 << 20)], uncommitted.append)
    assert uncommitted and uncommitted[0][0][1].records.size > 0
    marker = build_marker_batch(7, 0, commit=False, coordinator_epoch=0, timestamp_ms=0)
    h.rm.append_records(1000, -1, {TP: marker}, lambda s: None, AppendOrigin.COORDINATOR)
    assert h.partition.last_stable_offset == 3
    assert out, "the LSO moved: the fetch completes"
    data = out[0][0][1]
    assert data.records.size > 0
    assert [(t.producer_id, t.first_offset) for t in data.aborted_transactions] == [(7, 0)]


# -- a caught-up follower parks without reading: checked against the general path ----


def follower_params(max_wait_ms: int = 500, min_bytes: int = 1) -> FetchParams:
    return FetchParams(1, max_wait_ms, min_bytes, 1 << 20, FetchIsolation.LOG_END)


def test_caught_up_follower_waits_then_gets_the_next_append(h: Harness) -> None:
    h.partition.isr = {0, 1}
    h.rm.append_records(1000, 1, {TP: batch(b"a")}, lambda s: None)
    out: list[Any] = []
    h.rm.fetch_messages(follower_params(), [PartitionFetch(TP, 1, 1 << 20, 0)], out.append)
    assert out == [] and h.rm.fetch_purgatory.delayed == 1
    assert h.partition.replica_leos[1] == 1 and h.partition.high_watermark == 1
    h.rm.append_records(1000, -1, {TP: batch(b"b", b"c")}, lambda s: None)
    ((_fetch, data),) = out[0]
    assert data.error == ErrorCode.none and data.records is not None
    assert data.records.read() == h.log.read(1, 1 << 20).records.read()


def general_path_only(rm: ReplicaManager) -> None:
    rm._park_caught_up_follower = lambda *args: False  # type: ignore[method-assign]


def summary(results: list[Any]) -> list[Any]:
    return [
        [(f.tp, f.fetch_offset, d.error, d.high_watermark, d.log_start_offset,
          None if d.records is None else d.records.read()) for f, d in r]
        for r in results
    ]  # fmt: skip


steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(
            st.just("fetch"),
            st.integers(-1, 4),
            st.sampled_from([-1, 0, 3]),
            st.sampled_from([0, 1, 500]),
        ),
        st.tuples(st.just("expire"), st.sampled_from([1, 499, 500])),
    ),
    max_size=12,
)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(steps=steps)
def test_follower_fast_path_matches_the_general_path(tmp_path_factory: Any, steps: Any) -> None:
    """The same follower fetches, appends and expiries on two replica managers, one
    without the fast path: the same answers at the same moments."""
    harnesses = [Harness(tmp_path_factory.mktemp("fast")), Harness(tmp_path_factory.mktemp("gen"))]
    general_path_only(harnesses[1].rm)
    outs: list[list[Any]] = [[], []]
    batches = [batch(*[b"v"] * step[1]) if step[0] == "append" else b"" for step in steps]
    try:
        for h, out in zip(harnesses, outs, strict=True):
            h.partition.isr = {0, 1}
            fetched = 0
            for step, records in zip(steps, batches, strict=True):
                if step[0] == "append":
                    h.rm.append_records(30_000, -1, {TP: records}, out.append)
                elif step[0] == "fetch":
                    # an offset relative to the LEO: at it, behind it, or beyond it
                    offset = max(0, h.log.log_end_offset - step[1])
                    fetched = offset
                    h.rm.fetch_messages(
                        follower_params(step[3]), [PartitionFetch(TP, offset, 1 << 20, step[2])],
                        out.append,
                    )  # fmt: skip
                else:
                    h.expire(step[1])
            out.append(("end", fetched, h.partition.high_watermark, h.rm.fetch_purgatory.delayed,
                        h.rm.produce_purgatory.delayed))  # fmt: skip
        fast, general = ([summary([o]) if isinstance(o, list) else o for o in out] for out in outs)
        produce = [
            [{tp: (s.error, s.base_offset) for tp, s in o.items()} if isinstance(o, dict) else o
             for o in out]
            for out in (fast, general)
        ]  # fmt: skip
        assert produce[0] == produce[1]
    finally:
        for h in harnesses:
            h.rm.shutdown()
            h.log.close()


def test_the_leader_throttle_holds_back_an_out_of_sync_follower(h: Harness) -> None:
    """KIP-73 on the leader: a follower out of the ISR of a partition the leader throttles
    gets no records while the throttle's rate is over its bound (its fetch waits out
    max_wait instead of spinning), one in the ISR and consumers always get them, and
    what is sent for throttled replicas counts against the bound."""
    from sluice.quota.replication_quota import ReplicationQuotaManager

    configs = {"t": "0:0"}  # partition 0 throttled on broker 0, its leader
    quota = ReplicationQuotaManager(h.clock, 0, lambda topic: configs.get(topic, ""))
    h.rm.leader_quota = quota
    h.partition.replicas = [0, 1]
    h.partition.isr = {0}
    h.rm.append_records(1000, 1, {TP: batch(b"x" * 100)}, lambda s: None)
    follower = FetchParams(1, 500, 1, 1 << 20, FetchIsolation.LOG_END)

    def fetch(params: FetchParams) -> list[Any]:
        out: list[Any] = []
        h.rm.fetch_messages(params, [PartitionFetch(TP, 0, 1 << 20)], out.append)
        return out

    quota.update_bound(1000)
    first = fetch(follower)  # under the bound: sent, and recorded
    assert first and first[0][0][1].records.size > 0
    assert quota.rate() > 0
    quota.record(20_000)  # now well over 1,000 B/s
    held = fetch(follower)
    assert held == [] and h.rm.fetch_purgatory.delayed == 1  # waits, data or not
    h.expire(500)
    assert held and held[0][0][1].records is None and held[0][0][1].error == ErrorCode.none
    assert fetch(fetch_params())[0][0][1].records.size > 0  # a consumer is not throttled
    h.partition.isr = {0, 1}
    assert fetch(follower)[0][0][1].records.size > 0  # in the ISR: never held back
    h.partition.isr = {0}
    configs["t"] = ""  # no longer throttled
    assert fetch(follower)[0][0][1].records.size > 0
