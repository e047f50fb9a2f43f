"""The hierarchical timing wheel (Kafka's ``TimingWheel``).

A wheel has ``wheel_size`` buckets, each spanning ``tick_ms``; together they cover
``interval = tick_ms * wheel_size``. An entry due beyond that goes to an overflow
wheel whose tick is this wheel's interval, created on demand. Buckets are put on
the delay queue when their expiration changes, so the clock only ever jumps to a
bucket's expiration: there is no empty ticking.
"""

from __future__ import annotations

import threading
from typing import Protocol

from sluice.timer.task import TaskCounter, TimerTaskEntry, TimerTaskList

__all__ = ["BucketQueue", "TimingWheel"]


class BucketQueue(Protocol):
    """Where a wheel offers buckets whose expiration changed (the timer's delay queue)."""

    def offer(self, bucket: TimerTaskList) -> None: ...


class TimingWheel:
    """One level of the hierarchical timing wheel; callers hold the timer lock."""

    __slots__ = (
        "_buckets",
        "_lock",
        "_overflow_wheel",
        "_queue",
        "_task_counter",
        "current_time",
        "interval",
        "tick_ms",
        "wheel_size",
    )

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        task_counter: TaskCounter,
        queue: BucketQueue,
        lock: threading.RLock | None = None,
    ) -> None:
        if tick_ms < 1 or wheel_size < 1:
            raise ValueError(f"tick_ms and wheel_size must be >= 1, got {tick_ms}, {wheel_size}")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval = tick_ms * wheel_size
        self._task_counter = task_counter
        self._queue = queue
        self._lock = lock if lock is not None else threading.RLock()
        self._buckets = [TimerTaskList(task_counter, self._lock) for _ in range(wheel_size)]
        # Rounded down to a multiple of tick_ms.
        self.current_time = start_ms - (start_ms % tick_ms)
        self._overflow_wheel: TimingWheel | None = None

    @property
    def overflow_wheel(self) -> TimingWheel | None:
        return self._overflow_wheel

    def bucket(self, index: int) -> TimerTaskList:
        return self._buckets[index]

    def _add_overflow_wheel(self) -> TimingWheel:
        if self._overflow_wheel is None:
            self._overflow_wheel = TimingWheel(
                tick_ms=self.interval,
                wheel_size=self.wheel_size,
                start_ms=self.current_time,
                task_counter=self._task_counter,
                queue=self._queue,
                lock=self._lock,
            )
        return self._overflow_wheel

    def add(self, entry: TimerTaskEntry) -> bool:
        """Place ``entry`` in this wheel or an overflow wheel.

        Returns False when the entry is cancelled or already expired (the caller
        then runs it, unless cancelled). This is the timer's hot path: the walk
        up the overflow wheels is a loop and the bucket insert is inlined.
        """
        task = entry.timer_task
        if task is None or task._entry is not entry:
            return False  # cancelled: the task has moved on to another entry
        expiration = entry.expiration_ms
        wheel = self
        while True:
            tick_ms = wheel.tick_ms
            current_time = wheel.current_time
            if expiration < current_time + tick_ms:
                return False
            if expiration < current_time + wheel.interval:
                virtual_id = expiration // tick_ms
                bucket = wheel._buckets[virtual_id % wheel.wheel_size]
                if entry.list is not None:
                    entry.remove()
                root = bucket._root
                tail = root.prev
                entry.next = root
                entry.prev = tail
                entry.list = bucket
                tail.next = entry
                root.prev = entry
                wheel._task_counter.value += 1
                # Only a bucket whose expiration changed needs queuing: a bucket
                # is reused for a later round only after it has been flushed.
                bucket_expiration = virtual_id * tick_ms
                if bucket._expiration_ms != bucket_expiration:
                    bucket._expiration_ms = bucket_expiration
                    wheel._queue.offer(bucket)
                return True
            overflow = wheel._overflow_wheel
            wheel = overflow if overflow is not None else wheel._add_overflow_wheel()

    def advance_clock(self, time_ms: int) -> None:
        """Move this wheel (and the overflow wheels above it) forward to ``time_ms``."""
        if time_ms >= self.current_time + self.tick_ms:
            self.current_time = time_ms - (time_ms % self.tick_ms)
            if self._overflow_wheel is not None:
                self._overflow_wheel.advance_clock(self.current_time)
