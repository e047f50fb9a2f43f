"""``SystemTimer``: the timing wheel driven by a delay queue of buckets (Kafka's SystemTimer)."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable

from sluice.base.clock import SYSTEM_CLOCK, Clock
from sluice.timer.task import TaskCounter, TimerTask, TimerTaskEntry, TimerTaskList
from sluice.timer.wheel import TimingWheel

__all__ = ["DelayQueue", "Executor", "SystemTimer", "run_inline"]

log = logging.getLogger(__name__)

Executor = Callable[[Callable[[], None]], object]
"""Runs an expired task's ``run``: inline in tests, ``loop.call_soon_threadsafe`` in the broker."""


def run_inline(fn: Callable[[], None]) -> None:
    """The default executor: run the task now, logging (not raising) its failure."""
    try:
        fn()
    except Exception:
        log.exception("timer task failed")


class DelayQueue:
    """Buckets ordered by expiration; ``poll`` hands out those that are due.

    Guarded by the timer's condition (whose lock the caller holds). A bucket is
    only offered again after it was flushed, so it is queued at most once; an
    entry whose bucket expiration has since changed is skipped as stale.
    """

    __slots__ = ("_clock", "_cond", "_heap", "_seq")

    def __init__(self, cond: threading.Condition, clock: Clock) -> None:
        self._cond = cond
        self._clock = clock
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._seq = itertools.count()

    def offer(self, bucket: TimerTaskList) -> None:
        expiration = bucket.expiration_ms
        heap = self._heap
        heapq.heappush(heap, (expiration, next(self._seq), bucket))
        if heap[0][2] is bucket:
            self._cond.notify_all()

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and heap[0][2].expiration_ms != heap[0][0]:
            heapq.heappop(heap)

    def head_expiration(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def poll(self) -> TimerTaskList | None:
        """The earliest bucket if it is due now, else None; never waits."""
        head = self.head_expiration()
        if head is not None and head <= self._clock.hi_res_clock_ms():
            return heapq.heappop(self._heap)[2]
        return None

    def poll_wait(self, timeout_ms: int, is_closed: Callable[[], bool]) -> TimerTaskList | None:
        """Wait up to ``timeout_ms`` for the earliest bucket to fall due."""
        deadline = self._clock.hi_res_clock_ms() + max(timeout_ms, 0)
        while True:
            bucket = self.poll()
            if bucket is not None or is_closed():
                return bucket
            now = self._clock.hi_res_clock_ms()
            if now >= deadline:
                return None
            head = self.head_expiration()
            target = deadline if head is None else min(deadline, head)
            self._clock.wait_until(self._cond, target)

    def __len__(self) -> int:
        return len(self._heap)


class SystemTimer:
    """A hierarchical timing wheel timer: O(1) add and cancel, expiry by ``advance_clock``.

    Safe for concurrent ``add`` and ``TimerTask.cancel`` from several threads while
    one reaper thread calls ``advance_clock``. Expired tasks are handed to the
    executor outside the timer's lock.
    """

    def __init__(
        self,
        executor_name: str = "timer",
        tick_ms: int = 1,
        wheel_size: int = 20,
        start_ms: int | None = None,
        clock: Clock | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.name = executor_name
        self._clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self._now_ms = self._clock.hi_res_clock_ms
        self._executor: Executor = executor if executor is not None else run_inline
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._queue = DelayQueue(self._cond, self._clock)
        self._counter = TaskCounter()
        self._wheel = TimingWheel(
            tick_ms=tick_ms,
            wheel_size=wheel_size,
            start_ms=self._clock.hi_res_clock_ms() if start_ms is None else start_ms,
            task_counter=self._counter,
            queue=self._queue,
            lock=self._lock,
        )
        self._expired: list[TimerTask] = []
        self._closed = False

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def wheel(self) -> TimingWheel:
        """The lowest wheel (for inspection in tests)."""
        return self._wheel

    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` to run ``task.delay_ms`` from now; re-adding moves it."""
        lock = self._lock
        lock.acquire()  # explicit acquire/release: half the cost of `with` on this hot path
        try:
            if self._closed:
                raise RuntimeError(f"timer {self.name} is shut down")
            entry = TimerTaskEntry(task, task.delay_ms + self._now_ms())
            if self._wheel.add(entry) or task._entry is not entry:
                return  # scheduled, or cancelled meanwhile
            task._entry = None  # due already: it runs now and is no longer scheduled
        finally:
            lock.release()
        self._executor(task.run)

    def _reinsert(self, entry: TimerTaskEntry) -> None:
        # Called while flushing a bucket: demote to a lower wheel, or collect if due.
        if not self._wheel.add(entry) and not entry.cancelled:
            task = entry.timer_task
            if task is not None:
                task._entry = None  # it has fired: no longer scheduled
                self._expired.append(task)

    def advance_clock(self, timeout_ms: int) -> bool:
        """Wait up to ``timeout_ms`` for a bucket to fall due, then expire what is due.

        The wheel's time jumps to each due bucket's expiration; entries of the
        bucket are re-inserted, which demotes them to lower wheels or, when due,
        hands them to the executor. Returns True when a bucket was processed.
        """
        with self._lock:
            bucket = self._queue.poll_wait(timeout_ms, lambda: self._closed)
            if bucket is None:
                return False
            while bucket is not None:
                self._wheel.advance_clock(bucket.expiration_ms)
                bucket.flush(self._reinsert)
                bucket = self._queue.poll()
            expired, self._expired = self._expired, []
        for task in expired:
            self._executor(task.run)
        return True

    def size(self) -> int:
        """The number of tasks scheduled and not yet expired or cancelled."""
        return self._counter.value

    def shutdown(self) -> None:
        """Stop the timer: pending tasks never run and waiting reapers return."""
        with self._lock:
            self._closed = True
            self._cond.notify_all()

    @property
    def is_shutdown(self) -> bool:
        return self._closed
