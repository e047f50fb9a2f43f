"""Millisecond clocks: the monotonic one used in production and a manual one for tests.

Every component that reads time takes a ``Clock`` so that timing behaviour can be
tested deterministically, without sleeps (Kafka's ``Time``/``MockTime``).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "MonotonicClock", "wall_clock_ms"]


class Clock(Protocol):
    """A source of milliseconds that can also wait on a condition until a deadline."""

    def now_ms(self) -> int:
        """The current time in whole milliseconds."""
        ...

    def wait_until(self, cond: threading.Condition, deadline_ms: int) -> None:
        """Wait on ``cond`` (held by the caller) until ``deadline_ms`` or a notification."""
        ...


class MonotonicClock:
    """The production clock: ``time.monotonic_ns`` in milliseconds."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def wait_until(self, cond: threading.Condition, deadline_ms: int) -> None:
        remaining_s = (deadline_ms * 1_000_000 - time.monotonic_ns()) / 1e9
        if remaining_s > 0:
            cond.wait(remaining_s)


class ManualClock:
    """A clock that only moves when told to, for deterministic tests (Kafka's MockTime).

    Waiting on it does not block: like ``MockTime.sleep`` it advances the clock to
    the deadline, so a timer polled with a timeout jumps straight to the next due
    bucket.
    """

    __slots__ = ("_lock", "_now_ms")

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> int:
        """Move the clock forward by ``ms`` and return the new time."""
        if ms < 0:
            raise ValueError(f"cannot move a clock backwards by {ms} ms")
        with self._lock:
            self._now_ms += ms
            return self._now_ms

    def set(self, now_ms: int) -> None:
        """Move the clock forward to ``now_ms`` (never backwards)."""
        with self._lock:
            if now_ms < self._now_ms:
                raise ValueError(f"cannot move a clock back from {self._now_ms} to {now_ms}")
            self._now_ms = now_ms

    def wait_until(self, cond: threading.Condition, deadline_ms: int) -> None:
        with self._lock:
            if deadline_ms > self._now_ms:
                self._now_ms = deadline_ms


def wall_clock_ms() -> int:
    """Wall-clock time in epoch milliseconds: the timestamps Kafka writes (commits, segment
    times, ZooKeeper registrations), as opposed to the monotonic time of timeouts."""
    return time.time_ns() // 1_000_000
