"""RecordAccumulator on a manual clock: the seed's cases (Kafka's RecordAccumulatorTest)."""

from __future__ import annotations

import itertools
import threading

import pytest

from sluice.base import TopicPartition
from sluice.base.clock import SYSTEM_CLOCK, Clock, ManualClock
from sluice.client.errors import KafkaException
from sluice.client.producer.accumulator import AccumulatorConfig, RecordAccumulator
from sluice.client.producer.buffer_pool import BufferPool
from sluice.client.producer.producer_batch import ProducerBatch, RecordMetadata
from sluice.client.producer.transaction_manager import ProducerIdAndEpoch, TransactionManager
from support.mock_client import NODE1, NODE2, cluster
from support.records import read_batches
from support.waiting import wait_until

T0 = 1_700_000_000_000
TP0, TP1, TP2 = (TopicPartition("t", p) for p in range(3))
CLUSTER = cluster(("t", 0, NODE1), ("t", 1, NODE1), ("t", 2, NODE1), ("u", 0, NODE2))
VALUE = b"v" * 100
MAX_REQUEST = 1 << 20


def make(
    clock: Clock,
    *,
    batch_size: int = 1024,
    total_memory: int = 64 * 1024,
    linger_ms: int = 10,
    retry_backoff_ms: int = 100,
    delivery_timeout_ms: int = 120_000,
    tm: TransactionManager | None = None,
) -> RecordAccumulator:
    config = AccumulatorConfig(
        batch_size=batch_size,
        linger_ms=linger_ms,
        retry_backoff_ms=retry_backoff_ms,
        retry_backoff_max_ms=retry_backoff_ms,
        delivery_timeout_ms=delivery_timeout_ms,
        adaptive_partitioning=False,
        backoff_jitter=0,
    )
    return RecordAccumulator(config, BufferPool(total_memory, batch_size, clock), clock, tm)


def append(acc: RecordAccumulator, clock: Clock, tp: TopicPartition = TP0, value: bytes = VALUE,
           callback=None, max_block_ms: int = 0):  # type: ignore[no-untyped-def]  # fmt: skip
    return acc.append(tp.topic, tp.partition, T0, None, value, b"\x00", callback,
                      max_block_ms, clock.hi_res_clock_ms(), CLUSTER)  # fmt: skip


def fill_batches(acc: RecordAccumulator, clock: Clock, tp: TopicPartition, batches: int) -> int:
    """Append until ``batches`` batches are full (and one more has started); records per batch."""
    created = 0
    count = 0
    while True:
        result = append(acc, clock, tp)
        if result.new_batch_created:
            created += 1
            if created == batches + 1:
                return count // batches
        count += 1


def test_appends_fill_a_batch_then_roll_to_a_new_one() -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=10_000)
    first = append(acc, clock)
    assert first.new_batch_created and not first.batch_is_full
    appended = 1
    while True:
        result = append(acc, clock)
        if result.new_batch_created:
            break
        assert not result.batch_is_full
        appended += 1
    assert result.batch_is_full  # the deque now holds two batches: wake the Sender
    assert appended == (1024 - 61) // 108  # 108-byte records in a 1 KiB batch
    ready = acc.ready(CLUSTER, clock.hi_res_clock_ms())
    assert ready.ready_nodes == {NODE1}
    drained = acc.drain(CLUSTER, ready.ready_nodes, MAX_REQUEST, clock.hi_res_clock_ms())
    (batch,) = drained[NODE1.id]
    assert batch.record_count == appended
    (parsed,) = read_batches(batch.records())
    assert [r[0] for r in parsed["records"]] == list(range(appended))
    assert all(r[3] == VALUE for r in parsed["records"])
    assert len(acc.get_deque(TP0) or ()) == 1


def test_a_record_larger_than_batch_size_gets_a_batch_of_its_own() -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=0)
    result = append(acc, clock, value=b"x" * 5000)
    assert result.new_batch_created
    batches = acc.drain(CLUSTER, acc.ready(CLUSTER, 0).ready_nodes, MAX_REQUEST, 0)[NODE1.id]
    (parsed,) = read_batches(batches[0].records())
    assert parsed["records"][0][3] == b"x" * 5000


def test_linger_expiry_makes_a_partition_ready() -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=10)
    append(acc, clock)
    result = acc.ready(CLUSTER, clock.hi_res_clock_ms())
    assert result.ready_nodes == set()
    assert result.next_ready_check_delay_ms == 10
    clock.advance(9)
    assert acc.ready(CLUSTER, clock.hi_res_clock_ms()).next_ready_check_delay_ms == 1
    clock.advance(1)
    assert acc.ready(CLUSTER, clock.hi_res_clock_ms()).ready_nodes == {NODE1}


def test_drain_rotates_its_start_so_no_partition_starves() -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=10_000)
    for tp in (TP0, TP1, TP2):
        fill_batches(acc, clock, tp, 2)
    one_batch = 1024  # each request has room for a single batch
    order = []
    for _ in range(6):
        drained = acc.drain(CLUSTER, {NODE1}, one_batch, clock.hi_res_clock_ms())[NODE1.id]
        assert len(drained) == 1
        order.append(drained[0].topic_partition.partition)
    assert order == [0, 1, 2, 0, 1, 2]


def test_drain_fills_a_request_across_partitions() -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=0)
    for tp in (TP0, TP1, TP2):
        append(acc, clock, tp)
    drained = acc.drain(CLUSTER, {NODE1}, MAX_REQUEST, clock.hi_res_clock_ms())[NODE1.id]
    assert sorted(b.topic_partition.partition for b in drained) == [0, 1, 2]


def test_flush_makes_batches_ready_and_waits_for_them() -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=1_000_000)
    futures = [append(acc, clock, tp).future for tp in (TP0, TP1)]
    assert acc.ready(CLUSTER, clock.hi_res_clock_ms()).ready_nodes == set()
    acc.begin_flush()
    assert acc.flush_in_progress()
    assert acc.ready(CLUSTER, clock.hi_res_clock_ms()).ready_nodes == {NODE1}
    batches = acc.drain(CLUSTER, {NODE1}, MAX_REQUEST, clock.hi_res_clock_ms())[NODE1.id]
    assert acc.await_flush_completion(0) is False  # not completed yet; ends this flush
    acc.begin_flush()
    for offset, batch in enumerate(batches):
        batch.complete(offset * 10, -1)
        acc.deallocate(batch)
    assert acc.await_flush_completion(0) is True
    assert not acc.flush_in_progress()
    assert {f.get(0).offset for f in futures} == {0, 10}


def test_delivery_timeout_expires_queued_batches() -> None:
    clock = ManualClock(5_000)
    acc = make(clock, linger_ms=1_000_000, delivery_timeout_ms=100)
    append(acc, clock, TP0)
    clock.advance(50)
    append(acc, clock, TP1)
    clock.advance(49)
    assert acc.expired_batches(clock.hi_res_clock_ms()) == []
    assert acc.next_batch_expiry_time_ms == 5_100
    clock.advance(1)
    (expired,) = acc.expired_batches(clock.hi_res_clock_ms())
    assert expired.topic_partition == TP0
    assert not acc.get_deque(TP0)
    clock.advance(50)
    assert [b.topic_partition for b in acc.expired_batches(clock.hi_res_clock_ms())] == [TP1]


def test_muted_partitions_are_neither_ready_nor_drained() -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=0)
    append(acc, clock, TP0)
    acc.mute_partition(TP0)
    assert acc.ready(CLUSTER, clock.hi_res_clock_ms()).ready_nodes == set()
    assert acc.drain(CLUSTER, {NODE1}, MAX_REQUEST, clock.hi_res_clock_ms()) == {NODE1.id: []}
    acc.unmute_partition(TP0)
    assert acc.ready(CLUSTER, clock.hi_res_clock_ms()).ready_nodes == {NODE1}
    assert len(acc.drain(CLUSTER, {NODE1}, MAX_REQUEST, clock.hi_res_clock_ms())[NODE1.id]) == 1


def test_a_retried_batch_waits_for_retry_backoff() -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=0, retry_backoff_ms=100)
    append(acc, clock)
    (batch,) = acc.drain(CLUSTER, {NODE1}, MAX_REQUEST, clock.hi_res_clock_ms())[NODE1.id]
    acc.reenqueue(batch, clock.hi_res_clock_ms())
    assert batch.attempts == 1
    result = acc.ready(CLUSTER, clock.hi_res_clock_ms())
    assert result.ready_nodes == set()
    assert result.next_ready_check_delay_ms == 100
    clock.advance(50)
    assert acc.ready(CLUSTER, clock.hi_res_clock_ms()).ready_nodes == set()
    assert acc.drain(CLUSTER, {NODE1}, MAX_REQUEST, clock.hi_res_clock_ms()) == {NODE1.id: []}
    clock.advance(50)
    assert acc.ready(CLUSTER, clock.hi_res_clock_ms()).ready_nodes == {NODE1}
    assert acc.drain(CLUSTER, {NODE1}, MAX_REQUEST, clock.hi_res_clock_ms())[NODE1.id] == [batch]


def test_unknown_leaders_are_reported_by_topic() -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=0)
    acc.append("w", 0, T0, None, VALUE, b"\x00", None, 0, 0, CLUSTER)
    result = acc.ready(CLUSTER, clock.hi_res_clock_ms())
    assert result.unknown_leader_topics == {"w"}
    assert result.ready_nodes == set()


def test_abort_incomplete_batches_fails_callbacks_in_order() -> None:
    clock = ManualClock()
    acc = make(clock)
    seen: list[tuple[int, RecordMetadata | None, str]] = []
    for i in range(3):
        append(acc, clock, TP0, callback=lambda md, exc, i=i: seen.append((i, md, str(exc))))
    future = append(acc, clock, TP1).future
    acc.abort_incomplete_batches()
    assert seen == [(i, None, "Producer is closed forcefully.") for i in range(3)]
    with pytest.raises(KafkaException, match="closed forcefully"):
        future.get(0)
    assert not acc.has_incomplete()
    assert acc.free.available_memory() == acc.free.total_memory
    with pytest.raises(KafkaException, match="closed"):
        append(acc, clock)


def test_memory_exhaustion_makes_batches_ready_and_wakes_blocked_appenders_fifo() -> None:
    clock = SYSTEM_CLOCK
    acc = make(clock, batch_size=1024, total_memory=2048, linger_ms=3_600_000)
    append(acc, clock, TP0)
    append(acc, clock, TP1)
    assert acc.ready(CLUSTER, clock.hi_res_clock_ms()).ready_nodes == set()  # lingering
    done: list[str] = []

    def appender(name: str, tp: TopicPartition) -> None:
        append(acc, clock, tp, max_block_ms=30_000)
        done.append(name)

    first = threading.Thread(target=appender, args=("first", TP2), daemon=True)
    first.start()
    wait_until(lambda: acc.free.queued() == 1, message="the first appender to block")
    second = threading.Thread(target=appender, args=("second", TopicPartition("u", 0)), daemon=True)
    second.start()
    wait_until(lambda: acc.free.queued() == 2, message="the second appender to block")
    # Waiting appenders make every batch sendable at once.
    assert acc.ready(CLUSTER, clock.hi_res_clock_ms()).ready_nodes == {NODE1}
    drained = acc.drain(CLUSTER, {NODE1}, 1, clock.hi_res_clock_ms())[NODE1.id]
    assert len(drained) == 1
    drained[0].complete(0, -1)
    acc.deallocate(drained[0])
    wait_until(lambda: done == ["first"], message="the first appender to wake")
    assert acc.free.queued() == 1
    rest = acc.drain(CLUSTER, {NODE1}, 1, clock.hi_res_clock_ms())[NODE1.id]
    rest[0].complete(0, -1)
    acc.deallocate(rest[0])
    first.join(10)
    second.join(10)
    assert done == ["first", "second"]


def test_an_unused_buffer_is_returned_when_another_appender_created_the_batch() -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=10_000)
    fill_batches(acc, clock, TP0, 1)  # the last batch has room again; make it full
    last = acc.get_deque(TP0)[-1]  # type: ignore[index]
    last.close_for_record_appends()
    real_allocate = acc.free.allocate

    def racing_allocate(size: int, max_ms: int) -> bytearray:
        buffer = real_allocate(size, max_ms)
        # Another thread gets in first while this one is outside the deque lock.
        acc.free.allocate = real_allocate  # type: ignore[method-assign]
        append(acc, clock, TP0)
        return buffer

    acc.free.allocate = racing_allocate  # type: ignore[method-assign]
    before = len(acc.get_deque(TP0) or ())
    result = append(acc, clock, TP0)
    assert not result.new_batch_created  # appended to the batch the other thread made
    assert len(acc.get_deque(TP0) or ()) == before + 1
    in_use = sum(b.initial_capacity for b in acc.incomplete_batches())
    assert acc.free.available_memory() == acc.free.total_memory - in_use


def test_unkeyed_records_stick_to_a_partition_then_switch(randoms: list[int]) -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=0)
    randoms.extend([1, 2, 0, 1])
    partitions = []
    for _ in range(60):
        result = acc.append("t", -1, T0, None, VALUE, b"\x00", None, 0, 0, CLUSTER)
        partitions.append(result.future.value().partition)
    runs = [(p, len(list(group))) for p, group in itertools.groupby(partitions)]
    # Nothing is drained here, so the last batch is never full: the switch waits
    # for twice batch.size: 2048 bytes = 18 records of 108 bytes plus two batch
    # headers of 61 bytes, counted as Java counts them.
    assert runs == [(1, 18), (2, 18), (0, 18), (1, 6)]


def test_retried_batches_are_reenqueued_in_sequence_order() -> None:
    clock = ManualClock()
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(ProducerIdAndEpoch(7, 0))
    acc = make(clock, linger_ms=0, tm=tm)
    batches: list[ProducerBatch] = []
    for _ in range(3):
        append(acc, clock, TP0)
        batches += acc.drain(CLUSTER, {NODE1}, MAX_REQUEST, clock.hi_res_clock_ms())[NODE1.id]
    assert [b.base_sequence for b in batches] == [0, 1, 2]
    acc.reenqueue(batches[2], clock.hi_res_clock_ms())
    acc.reenqueue(batches[0], clock.hi_res_clock_ms())
    acc.reenqueue(batches[1], clock.hi_res_clock_ms())
    assert [b.base_sequence for b in acc.get_deque(TP0) or ()] == [0, 1, 2]
