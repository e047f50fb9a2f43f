"""The seeds' worked examples and Kafka's own timer tests, on a manual clock."""

from __future__ import annotations

import pytest

from sluice.base.clock import ManualClock
from sluice.timer import FunctionTask, SystemTimer, TimerTask, TimerTaskEntry


class Recorder:
    """Collects (task id, fire time) pairs."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.fired: list[tuple[int, int]] = []

    def task(self, task_id: int, delay_ms: int) -> FunctionTask:
        return FunctionTask(
            delay_ms, lambda: self.fired.append((task_id, self.clock.hi_res_clock_ms()))
        )

    @property
    def ids(self) -> list[int]:
        return [i for i, _ in self.fired]


def location(timer: SystemTimer, task: TimerTask) -> tuple[int, int, int]:
    """(wheel level, bucket index, bucket expiration) of a scheduled task."""
    entry = task._entry
    assert isinstance(entry, TimerTaskEntry) and entry.list is not None
    wheel, level = timer.wheel, 0
    while wheel is not None:
        for i in range(wheel.wheel_size):
            if wheel.bucket(i) is entry.list:
                return level, i, entry.list.expiration_ms
        wheel, level = wheel.overflow_wheel, level + 1
    raise AssertionError("entry is in no bucket of this timer")


def drive(timer: SystemTimer, clock: ManualClock, until_ms: int) -> list[int]:
    """Advance the timer bucket by bucket up to ``until_ms``; return the wheel times seen."""
    times = []
    while clock.hi_res_clock_ms() < until_ms:
        if not timer.advance_clock(until_ms - clock.hi_res_clock_ms()):
            break
        times.append(timer.wheel.current_time)
    return times


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(0)


def test_defaults_are_kafkas(clock: ManualClock) -> None:
    timer = SystemTimer(clock=clock)
    assert (timer.wheel.tick_ms, timer.wheel.wheel_size, timer.wheel.interval) == (1, 20, 20)


def test_seed_example_first_wheel_buckets(clock: ManualClock) -> None:
    rec = Recorder(clock)
    timer = SystemTimer(clock=clock)
    t2 = rec.task(2, 2)
    timer.add(t2)
    assert location(timer, t2) == (0, 2, 2)
    assert timer.advance_clock(10) and rec.fired == [(2, 2)]
    assert timer.wheel.current_time == 2  # the clock jumped to the bucket, no ticking
    t8 = rec.task(8, 8)
    timer.add(t8)
    assert location(timer, t8) == (0, 10, 10)
    # 2 + 19 = 21 lands in bucket 1, whose earlier span has already expired: reused.
    t19 = rec.task(19, 19)
    timer.add(t19)
    assert location(timer, t19) == (0, 1, 21)
    drive(timer, clock, 100)
    assert rec.fired == [(2, 2), (8, 10), (19, 21)]


def test_seed_example_350_ms_goes_to_second_wheel_bucket_17(clock: ManualClock) -> None:
    rec = Recorder(clock)
    timer = SystemTimer(clock=clock)
    t = rec.task(350, 350)
    timer.add(t)
    assert location(timer, t) == (1, 17, 340)
    overflow = timer.wheel.overflow_wheel
    assert overflow is not None and (overflow.tick_ms, overflow.interval) == (20, 400)
    drive(timer, clock, 1000)
    assert rec.fired == [(350, 350)]


def test_seed_example_450_ms_is_demoted_twice(clock: ManualClock) -> None:
    rec = Recorder(clock)
    timer = SystemTimer(clock=clock)
    t = rec.task(450, 450)
    timer.add(t)
    assert location(timer, t) == (2, 1, 400)
    third = timer.wheel.overflow_wheel.overflow_wheel  # type: ignore[union-attr]
    assert third is not None and third.tick_ms == 400

    assert timer.advance_clock(1000) and clock.hi_res_clock_ms() == 400 and not rec.fired
    assert location(timer, t) == (1, 2, 440)  # second wheel, span [440, 460)
    assert timer.advance_clock(1000) and clock.hi_res_clock_ms() == 440 and not rec.fired
    assert location(timer, t) == (0, 10, 450)  # first wheel, span [450, 451)
    assert timer.advance_clock(1000) and rec.fired == [(450, 450)]
    assert timer.size() == 0


def test_clock_only_jumps_to_bucket_expirations(clock: ManualClock) -> None:
    timer = SystemTimer(clock=clock)
    rec = Recorder(clock)
    for delay in (5, 300, 7000):
        timer.add(rec.task(delay, delay))
    seen = drive(timer, clock, 10_000)
    # Each advance lands on a bucket expiration: 5; 300 (second wheel); 6800
    # (third wheel, where 7000 is demoted to the second wheel) and 7000.
    assert seen == [5, 300, 6800, 7000]
    assert rec.fired == [(5, 5), (300, 300), (7000, 7000)]


def test_advance_clock_without_due_bucket_returns_false(clock: ManualClock) -> None:
    timer = SystemTimer(clock=clock)
    assert timer.advance_clock(0) is False
    timer.add(FunctionTask(50, lambda: None))
    assert timer.advance_clock(0) is False
    assert clock.hi_res_clock_ms() == 0
    # A manual clock "waits" by jumping to the deadline or the next bucket.
    assert timer.advance_clock(30) is False and clock.hi_res_clock_ms() == 30
    # 50 sits in the second wheel's span [40, 60): demoted at 40, fired at 50.
    assert timer.advance_clock(100) is True and clock.hi_res_clock_ms() == 40
    assert timer.advance_clock(100) is True and clock.hi_res_clock_ms() == 50 and timer.size() == 0


def test_small_wheel_forces_many_overflow_levels(clock: ManualClock) -> None:
    rec = Recorder(clock)
    timer = SystemTimer(tick_ms=1, wheel_size=3, clock=clock)
    delays = [0, 1, 2, 3, 5, 8, 9, 26, 27, 80, 81, 242, 243, 1000]
    for d in delays:
        timer.add(rec.task(d, d))
    # A 0 ms task is already expired: it runs on add.
    assert rec.fired == [(0, 0)]
    levels, wheel = 0, timer.wheel
    while wheel.overflow_wheel is not None:
        wheel, levels = wheel.overflow_wheel, levels + 1
    assert levels >= 5 and wheel.tick_ms == 3**levels
    assert timer.size() == len(delays) - 1
    drive(timer, clock, 2000)
    assert rec.fired == [(d, d) for d in delays]
    assert timer.size() == 0


def test_bucket_reuse_and_readding_a_task(clock: ManualClock) -> None:
    rec = Recorder(clock)
    timer = SystemTimer(tick_ms=1, wheel_size=3, clock=clock)
    t = rec.task(1, 2)
    timer.add(t)
    old_entry = t._entry
    t.delay_ms = 5
    timer.add(t)  # moves the task: the old entry counts as cancelled
    assert old_entry is not None and old_entry.cancelled and old_entry.list is None
    assert timer.size() == 1
    drive(timer, clock, 3)
    assert rec.fired == []
    # The bucket used for the first round is reused for a later expiration.
    t2 = rec.task(2, 1)
    timer.add(t2)
    drive(timer, clock, 10)
    assert rec.fired == [(2, 4), (1, 5)]


def test_cancel_before_expiry_prevents_running(clock: ManualClock) -> None:
    rec = Recorder(clock)
    timer = SystemTimer(clock=clock)
    tasks = [rec.task(i, 10 + i) for i in range(10)]
    for task in tasks:
        timer.add(task)
    for task in tasks[::2]:
        task.cancel()
    assert timer.size() == 5
    drive(timer, clock, 100)
    assert rec.ids == [1, 3, 5, 7, 9]
    assert timer.size() == 0


def test_cancel_after_expiry_is_harmless(clock: ManualClock) -> None:
    rec = Recorder(clock)
    timer = SystemTimer(clock=clock)
    t = rec.task(1, 3)
    timer.add(t)
    drive(timer, clock, 10)
    t.cancel()
    t.cancel()
    assert rec.fired == [(1, 3)] and timer.size() == 0


def test_cancelled_task_can_be_added_again(clock: ManualClock) -> None:
    rec = Recorder(clock)
    timer = SystemTimer(clock=clock)
    t = rec.task(1, 3)
    timer.add(t)
    t.cancel()
    timer.add(t)
    drive(timer, clock, 10)
    assert rec.fired == [(1, 3)]


def test_already_expired_tasks_run_on_add(clock: ManualClock) -> None:
    rec = Recorder(clock)
    timer = SystemTimer(clock=clock)
    timer.add(rec.task(1, 0))
    timer.add(rec.task(2, -5))
    assert rec.ids == [1, 2] and timer.size() == 0


def test_tick_larger_than_one_fires_within_a_tick(clock: ManualClock) -> None:
    # Kafka's semantics: a bucket's expiration is the start of its span, so with
    # tick_ms > 1 a task fires somewhere in [expiration - tick + 1, expiration].
    rec = Recorder(clock)
    timer = SystemTimer(tick_ms=10, wheel_size=4, clock=clock)
    for d in (10, 15, 19, 20, 95):
        timer.add(rec.task(d, d))
    drive(timer, clock, 200)
    assert rec.fired == [(10, 10), (15, 10), (19, 10), (20, 20), (95, 90)]


def test_executor_receives_expired_tasks(clock: ManualClock) -> None:
    handed: list[object] = []
    timer = SystemTimer(clock=clock, executor=handed.append)
    t = FunctionTask(3, lambda: None)
    timer.add(t)
    drive(timer, clock, 5)
    assert handed == [t.run]


def test_failing_task_does_not_stop_the_timer(clock: ManualClock) -> None:
    rec = Recorder(clock)
    timer = SystemTimer(clock=clock)

    def boom() -> None:
        raise RuntimeError("task failure")

    timer.add(FunctionTask(1, boom))
    timer.add(rec.task(2, 2))
    drive(timer, clock, 5)
    assert rec.ids == [2]


def test_shutdown_rejects_adds_and_wakes(clock: ManualClock) -> None:
    timer = SystemTimer(clock=clock)
    timer.add(FunctionTask(10, lambda: None))
    timer.shutdown()
    assert timer.is_shutdown
    assert timer.advance_clock(100) is False
    with pytest.raises(RuntimeError):
        timer.add(FunctionTask(1, lambda: None))
