"""BufferPool: free list, non-pooled memory, FIFO waiters, timeouts (Kafka's BufferPoolTest)."""

from __future__ import annotations

import threading

import pytest

from sluice.base.clock import SYSTEM_CLOCK, ManualClock
from sluice.client.errors import BufferExhaustedException, KafkaException
from sluice.client.producer.buffer_pool import BufferPool
from support.waiting import wait_until

BLOCK_MS = 30_000  # real-thread tests: long enough never to expire


def test_simple_allocation_reuses_pooled_buffers() -> None:
    pool = BufferPool(2048, 512, ManualClock())
    buffer = pool.allocate(512, 0)
    assert len(buffer) == 512
    assert pool.available_memory() == 1536
    buffer[:3] = b"abc"
    pool.deallocate(buffer)
    assert pool.free_size() == 1
    assert pool.available_memory() == 2048
    again = pool.allocate(512, 0)
    assert again is buffer  # the free list hands the same buffer back
    assert pool.free_size() == 0


def test_non_poolable_sizes_come_from_and_return_to_non_pooled_memory() -> None:
    pool = BufferPool(2048, 512, ManualClock())
    big = pool.allocate(1000, 0)
    assert pool.unallocated_memory() == 1048
    pool.deallocate(big)
    assert pool.free_size() == 0
    assert pool.unallocated_memory() == 2048


def test_free_list_is_released_into_non_pooled_memory_when_needed() -> None:
    pool = BufferPool(1024, 512, ManualClock())
    a, b = pool.allocate(512, 0), pool.allocate(512, 0)
    pool.deallocate(a)
    pool.deallocate(b)
    assert pool.free_size() == 2
    whole = pool.allocate(1024, 0)
    assert len(whole) == 1024
    assert pool.free_size() == 0
    assert pool.available_memory() == 0


def test_allocation_larger_than_the_pool_fails_immediately() -> None:
    clock = ManualClock(100)
    pool = BufferPool(1024, 512, clock)
    with pytest.raises(ValueError, match="hard limit of 1024"):
        pool.allocate(1025, 60_000)
    assert clock.hi_res_clock_ms() == 100  # no waiting
    assert pool.queued() == 0


def test_exhausted_pool_times_out_after_max_block_ms() -> None:
    clock = ManualClock(1_000)
    pool = BufferPool(1024, 512, clock)
    pool.allocate(512, 0)
    pool.allocate(512, 0)
    with pytest.raises(BufferExhaustedException, match="max blocking time 300 ms"):
        pool.allocate(512, 300)
    assert clock.hi_res_clock_ms() == 1_300  # it waited exactly max.block.ms
    assert pool.queued() == 0
    assert pool.available_memory() == 0
    assert pool.wait_time_ms_total == 300


def test_memory_gathered_by_a_waiter_that_times_out_is_returned() -> None:
    clock = ManualClock()
    pool = BufferPool(1024, 256, clock)
    held = pool.allocate(768, 0)
    # 256 bytes are free, the waiter needs 512: it gathers 256, then gives up.
    with pytest.raises(BufferExhaustedException):
        pool.allocate(512, 50)
    assert pool.available_memory() == 256
    pool.deallocate(held)
    assert pool.available_memory() == 1024


def test_blocked_allocation_is_woken_by_deallocate() -> None:
    pool = BufferPool(1024, 512, SYSTEM_CLOCK)
    first, second = pool.allocate(512, 0), pool.allocate(512, 0)
    got: list[bytearray] = []
    waiter = threading.Thread(target=lambda: got.append(pool.allocate(512, BLOCK_MS)))
    waiter.start()
    wait_until(lambda: pool.queued() == 1, message="the appender to block")
    assert not got
    pool.deallocate(first)
    waiter.join(10)
    assert got == [first]  # the freed buffer went straight to the waiter
    assert pool.queued() == 0
    pool.deallocate(second)


def test_waiters_are_served_first_in_first_out() -> None:
    pool = BufferPool(1024, 256, SYSTEM_CLOCK)
    held = [pool.allocate(256, 0) for _ in range(4)]
    done: list[str] = []

    def allocate(name: str, size: int) -> None:
        pool.allocate(size, BLOCK_MS)
        done.append(name)

    big = threading.Thread(target=allocate, args=("big", 512))
    big.start()
    wait_until(lambda: pool.queued() == 1, message="the first waiter")
    small = threading.Thread(target=allocate, args=("small", 256))
    small.start()
    wait_until(lambda: pool.queued() == 2, message="the second waiter")

    # 256 bytes would satisfy the small waiter, but the big one is first in line.
    pool.deallocate(held.pop())
    wait_until(lambda: pool.available_memory() == 0, message="the first waiter to take memory")
    assert done == [] and pool.queued() == 2

    pool.deallocate(held.pop())
    wait_until(lambda: done == ["big"], message="the first waiter to complete")
    assert pool.queued() == 1

    pool.deallocate(held.pop())
    big.join(10)
    small.join(10)
    assert done == ["big", "small"]


def test_close_fails_blocked_and_later_allocations() -> None:
    pool = BufferPool(512, 512, SYSTEM_CLOCK)
    pool.allocate(512, 0)
    errors: list[BaseException] = []

    def blocked() -> None:
        try:
            pool.allocate(512, BLOCK_MS)
        except KafkaException as exc:
            errors.append(exc)

    thread = threading.Thread(target=blocked)
    thread.start()
    wait_until(lambda: pool.queued() == 1, message="the appender to block")
    pool.close()
    thread.join(10)
    assert len(errors) == 1 and "closed" in str(errors[0])
    with pytest.raises(KafkaException, match="closed"):
        pool.allocate(1, 0)


def test_deallocating_without_a_buffer_returns_memory_only() -> None:
    pool = BufferPool(1024, 512, ManualClock())
    buffer = pool.allocate(512, 0)
    pool.deallocate(None, len(buffer))  # a buffer still referenced elsewhere
    assert pool.free_size() == 0
    assert pool.available_memory() == 1024
