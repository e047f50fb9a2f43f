"""The clock: wall-clock and monotonic time from one object, as Kafka's ``Time``.

Every component that reads time takes a :class:`Clock`, so that timing behaviour can be
tested deterministically, without sleeps. A clock has both of Kafka's readings:

* :meth:`Clock.milliseconds`: wall-clock epoch milliseconds (``Time.milliseconds()``),
  for what is written down: record and segment timestamps, commit and expiry times in
  ``__consumer_offsets`` and ``__transaction_state``, ZooKeeper registrations;
* :meth:`Clock.hi_res_clock_ms` and :meth:`Clock.nanoseconds`: monotonic time
  (``Time.hiResClockMs()``, ``Time.nanoseconds()``), for timeouts, deadlines and the
  timer, which must not jump when the wall clock is set.

:data:`SYSTEM_CLOCK` (a :class:`SystemClock`, Kafka's ``Time.SYSTEM``) reads the
system; :class:`ManualClock` (Kafka's ``MockTime``) only moves when a test moves it, both
readings together.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """Wall-clock and monotonic time, and waiting on a condition until a deadline."""

    def milliseconds(self) -> int:
        """Wall-clock time in epoch milliseconds."""
        ...

    def hi_res_clock_ms(self) -> int:
        """Monotonic time in whole milliseconds (only differences mean anything)."""
        ...

    def nanoseconds(self) -> int:
        """Monotonic time in nanoseconds."""
        ...

    def sleep(self, ms: int) -> None:
        """Block for ``ms`` milliseconds (a manual clock moves forward instead)."""
        ...

    def wait_until(self, cond: threading.Condition, deadline_ms: int) -> None:
        """Wait on ``cond`` (held by the caller) until the monotonic ``deadline_ms``
        (:meth:`hi_res_clock_ms`) or a notification."""
        ...


class SystemClock:
    """The system's clocks: ``time.time_ns`` for wall time, ``time.monotonic_ns`` for the
    rest. Stateless; use :data:`SYSTEM_CLOCK`."""

    __slots__ = ()

    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000

    def hi_res_clock_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def nanoseconds(self) -> int:
        return time.monotonic_ns()

    def sleep(self, ms: int) -> None:
        time.sleep(ms / 1000)

    def wait_until(self, cond: threading.Condition, deadline_ms: int) -> None:
        remaining_s = (deadline_ms * 1_000_000 - time.monotonic_ns()) / 1e9
        if remaining_s > 0:
            cond.wait(remaining_s)


SYSTEM_CLOCK = SystemClock()
"""The production clock (Kafka's ``Time.SYSTEM``)."""


class ManualClock:
    """A clock that only moves when told to, for deterministic tests (Kafka's MockTime).

    Its wall-clock and monotonic readings are the same number of milliseconds, from
    ``start_ms``, and move together. Sleeping or waiting on it does not block: like
    ``MockTime.sleep`` it advances the clock (to the deadline, for a wait), so a timer
    polled with a timeout jumps straight to the next due bucket.
    """

    __slots__ = ("_lock", "_now_ms")

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms
        self._lock = threading.Lock()

    def milliseconds(self) -> int:
        return self._now_ms

    def hi_res_clock_ms(self) -> int:
        return self._now_ms

    def nanoseconds(self) -> int:
        return self._now_ms * 1_000_000

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

    def sleep(self, ms: int) -> None:
        self.advance(max(ms, 0))

    def wait_until(self, cond: threading.Condition, deadline_ms: int) -> None:
        with self._lock:
            if deadline_ms > self._now_ms:
                self._now_ms = deadline_ms
