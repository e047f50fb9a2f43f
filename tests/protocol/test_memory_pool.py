"""MemoryPool: Kafka's non-strict SimpleMemoryPool accounting and the line of waiters."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.protocol.memory_pool import UNBOUNDED, MemoryPool


def test_an_allocation_succeeds_while_any_memory_is_available() -> None:
    pool = MemoryPool(100)
    assert pool.bounded and pool.available == 100
    assert pool.try_allocate(60)
    assert pool.try_allocate(60)  # non-strict: 40 were available, it goes to -20
    assert pool.available == -20 and pool.used == 120 and pool.out_of_memory
    assert not pool.try_allocate(1)  # refused: nothing taken
    assert pool.used == 120
    pool.release(20)
    assert pool.available == 0 and pool.out_of_memory  # zero is spent too
    pool.release(1)
    assert not pool.out_of_memory and pool.try_allocate(1_000)


def test_allocate_takes_whatever_is_available() -> None:
    pool = MemoryPool(10)
    pool.allocate(25)
    assert pool.available == -15 and pool.out_of_memory


def test_an_unbounded_pool_counts_but_never_refuses() -> None:
    for size in (UNBOUNDED, 0):
        pool = MemoryPool(size)
        assert not pool.bounded
        assert pool.try_allocate(1 << 40)
        assert pool.used == 1 << 40 and not pool.out_of_memory
        pool.release(1 << 40)
        assert pool.used == 0


def test_waiters_are_called_oldest_first_once_memory_is_available() -> None:
    pool = MemoryPool(100)
    pool.allocate(100)
    calls: list[str] = []

    def waiter(name: str, need: int) -> bool:
        calls.append(name)
        return pool.try_allocate(need)

    pool.wait(lambda: waiter("a", 30))
    pool.wait(lambda: waiter("b", 30))
    assert pool.waiting == 2
    pool.release(10)  # memory again: a takes 30 (-> -20), b is not called (spent)
    assert calls == ["a"] and pool.waiting == 1
    pool.release(30)  # available 10: b takes 30
    assert calls == ["a", "b"] and pool.waiting == 0 and pool.available == -20


def test_a_waiter_refused_again_stays_first_in_line() -> None:
    pool = MemoryPool(100)
    pool.allocate(100)
    calls: list[str] = []
    answers = iter([False, True])

    def first() -> bool:
        calls.append("first")
        return next(answers)

    def second() -> bool:
        calls.append("second")
        return True

    pool.wait(first)
    pool.wait(second)
    pool.release(1)
    assert calls == ["first"] and pool.waiting == 2
    pool.release(1)
    assert calls == ["first", "first", "second"] and pool.waiting == 0


def test_a_cancelled_waiter_is_not_called_and_a_waiter_waits_once() -> None:
    pool = MemoryPool(10)
    pool.allocate(10)
    calls: list[int] = []

    def waiter() -> bool:
        calls.append(1)
        return True

    pool.wait(waiter)
    pool.wait(waiter)
    assert pool.waiting == 1
    pool.cancel_wait(waiter)
    pool.release(5)
    assert calls == [] and pool.waiting == 0


def test_a_release_inside_a_waiter_does_not_call_the_waiters_again() -> None:
    pool = MemoryPool(10)
    pool.allocate(10)
    calls: list[str] = []

    def releasing() -> bool:
        calls.append("releasing")
        pool.release(5)  # a waiter giving memory back: the loop in progress goes on
        return True

    def other() -> bool:
        calls.append("other")
        return True

    pool.wait(releasing)
    pool.wait(other)
    pool.release(1)
    assert calls == ["releasing", "other"]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 1000), st.lists(st.tuples(st.booleans(), st.integers(1, 400)), max_size=60))
def test_the_pool_is_overdrawn_by_at_most_one_allocation(
    size: int, steps: list[tuple[bool, int]]
) -> None:
    """Kafka's non-strict bound: in use never exceeds size + the largest allocation."""
    pool = MemoryPool(size)
    held: list[int] = []
    largest = 0
    for allocate, amount in steps:
        if allocate:
            if pool.try_allocate(amount):
                held.append(amount)
                largest = max(largest, amount)
        elif held:
            pool.release(held.pop(0))
        assert pool.used == sum(held)
        assert pool.used <= size + largest
