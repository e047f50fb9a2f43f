"""Purgatory tests in the style of Kafka's DelayedOperationTest, on a manual clock."""

from __future__ import annotations

import random
import threading
import time

import pytest

from sluice.base.clock import ManualClock
from sluice.purgatory import DelayedOperation, DelayedOperationPurgatory, TopicPartition


class MockDelayedOperation(DelayedOperation):
    """Completes when ``completable`` is set; counts its callbacks."""

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.completable = False
        self.completions = 0
        self.expirations = 0
        self.completed_by_try = 0

    def try_complete(self) -> bool:
        if self.completable and self.force_complete():
            self.completed_by_try += 1
            return True
        return False

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(0)


@pytest.fixture
def purgatory(clock: ManualClock) -> DelayedOperationPurgatory[MockDelayedOperation]:
    p: DelayedOperationPurgatory[MockDelayedOperation] = DelayedOperationPurgatory(
        "mock", purge_interval=1000, reaper_enabled=False, clock=clock
    )
    yield p
    p.shutdown()


Purgatory = DelayedOperationPurgatory[MockDelayedOperation]


def test_request_satisfaction(purgatory: Purgatory) -> None:
    r1, r2 = MockDelayedOperation(100_000), MockDelayedOperation(100_000)
    assert purgatory.check_and_complete("test1") == 0
    assert not purgatory.try_complete_else_watch(r1, ["test1"])
    assert purgatory.check_and_complete("test1") == 0
    assert not purgatory.try_complete_else_watch(r2, ["test2"])
    assert purgatory.check_and_complete("test2") == 0
    r1.completable = True
    assert purgatory.check_and_complete("test1") == 1
    assert purgatory.check_and_complete("test1") == 0
    r2.completable = True
    assert purgatory.check_and_complete("test2") == 1
    assert purgatory.check_and_complete("test2") == 0
    assert (r1.completions, r1.expirations, r2.completions) == (1, 0, 1)
    assert purgatory.delayed == 0 and purgatory.watched == 0


def test_operation_completable_at_once_is_not_watched(purgatory: Purgatory) -> None:
    op = MockDelayedOperation(500)
    op.completable = True
    assert purgatory.try_complete_else_watch(op, ["k"])
    assert op.completions == 1 and purgatory.watched == 0 and purgatory.delayed == 0


def test_watch_without_a_try_is_completed_by_its_keys_or_its_timeout(
    purgatory: Purgatory, clock: ManualClock
) -> None:
    """``watch`` never calls try_complete itself (the caller has looked): even an
    operation that could complete waits for a check on one of its keys."""
    op, timed = MockDelayedOperation(100_000), MockDelayedOperation(30)
    op.completable = True
    purgatory.watch(op, ["a", "b"])
    purgatory.watch(timed, ["a"])
    assert (op.completions, op.completed_by_try) == (0, 0)
    assert purgatory.watched == 3 and purgatory.delayed == 2
    assert purgatory.check_and_complete("b") == 1
    assert (op.completions, op.completed_by_try) == (1, 1)
    assert purgatory.check_and_complete("a") == 0  # timed is not completable
    clock.advance(30)
    purgatory.advance_clock(0)
    assert (timed.completions, timed.expirations) == (1, 1)
    assert purgatory.delayed == 0
    with pytest.raises(ValueError):
        purgatory.watch(MockDelayedOperation(1), [])


def test_request_expiry(purgatory: Purgatory, clock: ManualClock) -> None:
    r1, r2 = MockDelayedOperation(20), MockDelayedOperation(200)
    assert not purgatory.try_complete_else_watch(r1, ["test1"])
    assert not purgatory.try_complete_else_watch(r2, ["test2"])
    assert purgatory.delayed == 2
    clock.advance(19)
    purgatory.advance_clock(0)
    assert not r1.is_completed
    clock.advance(1)
    purgatory.advance_clock(0)
    assert r1.is_completed and (r1.completions, r1.expirations) == (1, 1)
    assert not r2.is_completed
    while purgatory.advance_clock(500) == 0 and not r2.is_completed:
        pass
    assert clock.hi_res_clock_ms() == 200 and r2.expirations == 1
    assert purgatory.delayed == 0


def test_expired_operation_is_not_completed_again(purgatory: Purgatory, clock: ManualClock) -> None:
    op = MockDelayedOperation(10)
    purgatory.try_complete_else_watch(op, ["k"])
    clock.advance(10)
    purgatory.advance_clock(0)
    op.completable = True
    assert purgatory.check_and_complete("k") == 0
    assert (op.completions, op.expirations, op.completed_by_try) == (1, 1, 0)


def test_purge_counts_across_keys(clock: ManualClock) -> None:
    purgatory: Purgatory = DelayedOperationPurgatory(
        "mock", purge_interval=0, reaper_enabled=False, clock=clock
    )
    keys = ["a", "b", "c"]
    ops = [MockDelayedOperation(100_000) for _ in range(3)]
    purgatory.try_complete_else_watch(ops[0], keys)  # watched on three keys
    purgatory.try_complete_else_watch(ops[1], keys[:2])
    purgatory.try_complete_else_watch(ops[2], keys[1:])
    assert purgatory.watched == 7 and purgatory.delayed == 3 and purgatory.watched_keys() == 3
    # Complete ops[0] through key "a": it leaves "a" but is still watched on b and c.
    ops[0].completable = True
    assert purgatory.check_and_complete("a") == 1
    assert purgatory.watched == 6 and purgatory.delayed == 2
    # The reaper purges it from every other key: estimated 3 - delayed 2 > 0.
    assert purgatory.advance_clock(0) == 2
    assert purgatory.watched == 4 and purgatory.delayed == 2
    # Completed through force_complete without any key event: purged too.
    ops[1].force_complete()
    assert purgatory.advance_clock(0) == 2
    assert purgatory.watched == 2 and purgatory.watched_keys() == 2
    purgatory.shutdown()


def test_no_purge_below_the_interval(clock: ManualClock) -> None:
    purgatory: Purgatory = DelayedOperationPurgatory(
        "mock", purge_interval=5, reaper_enabled=False, clock=clock
    )
    ops = [MockDelayedOperation(100_000) for _ in range(10)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["x", "y"])
    for op in ops[:5]:
        op.force_complete()
    assert purgatory.advance_clock(0) == 0 and purgatory.watched == 20
    ops[5].force_complete()
    assert purgatory.advance_clock(0) == 12 and purgatory.watched == 8
    purgatory.shutdown()


def test_cancel_for_key(purgatory: Purgatory) -> None:
    ops = [MockDelayedOperation(100_000) for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, [TopicPartition("t", 0)])
    other = MockDelayedOperation(100_000)
    purgatory.try_complete_else_watch(other, [TopicPartition("t", 1)])
    cancelled = purgatory.cancel_for_key(TopicPartition("t", 0))
    assert cancelled == ops
    assert purgatory.delayed == 1 and purgatory.watched == 1
    assert all(op.completions == 0 for op in ops)
    assert purgatory.cancel_for_key(TopicPartition("t", 0)) == []


def test_complete_all_answers_every_watched_operation_once(
    purgatory: Purgatory, clock: ManualClock
) -> None:
    a, b, done = (MockDelayedOperation(100_000) for _ in range(3))
    purgatory.try_complete_else_watch(a, ["k1", "k2"])  # one operation under two keys
    purgatory.try_complete_else_watch(b, ["k2"])
    purgatory.try_complete_else_watch(done, ["k3"])
    done.completable = True
    assert purgatory.check_and_complete("k3") == 1
    assert purgatory.complete_all() == 2
    assert [(op.completions, op.expirations) for op in (a, b, done)] == [(1, 0)] * 3
    assert purgatory.watched == 0 and purgatory.delayed == 0 and purgatory.watched_keys() == 0
    clock.advance(100_000)  # their timeouts were cancelled: nothing expires later
    purgatory.advance_clock(0)
    assert (a.expirations, b.expirations) == (0, 0)
    assert purgatory.complete_all() == 0


def test_topic_partition_key_is_hashable_value() -> None:
    assert TopicPartition("t", 1) == TopicPartition("t", 1)
    assert len({TopicPartition("t", 1), TopicPartition("t", 1), TopicPartition("t", 2)}) == 2
    assert str(TopicPartition("orders", 3)) == "orders-3"


def test_watch_requires_a_key(purgatory: Purgatory) -> None:
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(MockDelayedOperation(1), [])


def test_force_complete_has_exactly_one_winner() -> None:
    op = MockDelayedOperation(1000)
    results: list[bool] = []
    barrier = threading.Barrier(20)

    def race() -> None:
        barrier.wait()
        results.append(op.force_complete())

    threads = [threading.Thread(target=race) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1 and op.completions == 1


def test_racing_checks_and_expiry_complete_each_operation_once(clock: ManualClock) -> None:
    purgatory: Purgatory = DelayedOperationPurgatory(
        "race", purge_interval=50, reaper_enabled=False, clock=clock
    )
    keys = [f"key-{i}" for i in range(16)]
    rng = random.Random(7)
    ops = []
    for _ in range(2000):
        op = MockDelayedOperation(rng.randint(1, 60))
        ops.append(op)
        purgatory.try_complete_else_watch(op, rng.sample(keys, rng.randint(1, 3)))
    stop = threading.Event()
    # The checkers make only the first half completable: the second half can only expire,
    # so both ends are reached however the threads are scheduled.
    completable = ops[: len(ops) // 2]

    def checker(seed: int) -> None:
        r = random.Random(seed)
        while not stop.is_set():
            victim = completable[r.randrange(len(completable))]
            victim.completable = True
            purgatory.check_and_complete(r.choice(keys))

    def reaper() -> None:
        # The clock moves once the checkers are under way (on a loaded machine they may
        # not have run yet), and then races them.
        deadline = time.monotonic() + 30
        while not any(op.completed_by_try for op in completable) and time.monotonic() < deadline:
            time.sleep(0.001)
        for _ in range(80):
            clock.advance(1)
            purgatory.advance_clock(0)

    checkers = [threading.Thread(target=checker, args=(s,)) for s in range(20)]
    reaper_thread = threading.Thread(target=reaper)
    for t in checkers:
        t.start()
    reaper_thread.start()
    reaper_thread.join(timeout=120)
    stop.set()
    for t in checkers:
        t.join(timeout=120)
    assert all(op.is_completed for op in ops)
    for op in ops:
        assert op.completions == 1
        assert op.completed_by_try + op.expirations == 1
    assert any(op.expirations for op in ops) and any(op.completed_by_try for op in ops)
    assert purgatory.delayed == 0
    purgatory.purge_completed()
    assert purgatory.watched == 0 and purgatory.watched_keys() == 0
    purgatory.shutdown()


def test_reaper_thread_expires_on_the_real_clock() -> None:
    purgatory: Purgatory = DelayedOperationPurgatory("real", purge_interval=10)
    op = MockDelayedOperation(5)
    done = threading.Event()
    op.on_expiration = done.set  # type: ignore[method-assign]
    purgatory.try_complete_else_watch(op, ["k"])
    assert done.wait(timeout=10), "the reaper never expired the operation"
    assert op.completions == 1
    purgatory.shutdown()


def test_completed_and_expired_operations_are_freed_without_the_cyclic_gc(
    purgatory: Purgatory, clock: ManualClock
) -> None:
    """A finished operation must not sit in a reference cycle (its timer entry used to
    link to itself once removed): refcounting alone frees it, request and all, so the
    broker's hot path feeds no garbage to the cyclic collector."""
    import gc
    import weakref

    gc.collect()
    gc.disable()
    try:
        completed, expired = MockDelayedOperation(100_000), MockDelayedOperation(10)
        assert not purgatory.try_complete_else_watch(completed, ["k"])
        assert not purgatory.try_complete_else_watch(expired, ["j"])
        refs = [weakref.ref(completed), weakref.ref(expired)]
        completed.completable = True
        assert purgatory.check_and_complete("k") == 1
        clock.advance(20)
        purgatory.advance_clock(0)
        assert expired.expirations == 1
        purgatory.purge_completed()
        del completed, expired
        assert [ref() for ref in refs] == [None, None]
    finally:
        gc.enable()
