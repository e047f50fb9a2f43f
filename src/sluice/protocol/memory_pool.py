"""``MemoryPool``: the broker-wide budget of bytes for requests received and not answered.

Kafka's ``queued.max.request.bytes`` (KIP-72) bounds the memory of the requests a broker
has read and not yet handled: its socket server takes each request's buffer from a
``SimpleMemoryPool`` and stops reading a socket that needs a buffer while the pool is
spent. This is the same pool, without I/O, as Kafka's in its non-strict mode: an
allocation succeeds while *any* memory is available, so the pool can be overdrawn by at
most one allocation, and a single request as large as ``socket.request.max.bytes`` is
always possible; once the available bytes are at or below zero, allocations are
refused until enough is released.

A size of -1 (Kafka's default, or any size of 0 or less) makes the pool unbounded: it
still counts the bytes in use but never refuses.

Who is refused waits: :meth:`MemoryPool.wait` registers a callback, and when released
bytes make memory available again the waiters are called oldest first, each trying
again; one that is refused again (the callback returns False) stays first in line and
the rest wait behind it. Callbacks run inside :meth:`MemoryPool.release`, so they must
only take memory and change reading decisions, never handle requests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

__all__ = ["UNBOUNDED", "MemoryPool", "MemoryWaiter"]

UNBOUNDED: Final = -1
"""Kafka's default ``queued.max.request.bytes``: no bound."""

MemoryWaiter = Callable[[], bool]
"""Called when memory is available again: tries again, returns whether it got it."""


class MemoryPool:
    """A budget of ``size`` bytes (0 or less: unbounded), allocated and released by count;
    the memory itself is the caller's."""

    __slots__ = ("_available", "_size", "_waiters", "_waking")

    def __init__(self, size: int = UNBOUNDED) -> None:
        self._size = size
        self._available = size
        self._waiters: dict[MemoryWaiter, None] = {}  # insertion-ordered: oldest first
        self._waking = False

    @property
    def size(self) -> int:
        """The budget in bytes; 0 or less: unbounded."""
        return self._size

    @property
    def bounded(self) -> bool:
        return self._size > 0

    @property
    def used(self) -> int:
        """Bytes allocated and not released."""
        return self._size - self._available

    @property
    def available(self) -> int:
        """Bytes that may still be allocated (negative when overdrawn); meaningless when
        unbounded."""
        return self._available

    @property
    def out_of_memory(self) -> bool:
        """Whether allocations are refused now."""
        return self._size > 0 and self._available <= 0

    @property
    def waiting(self) -> int:
        """Waiters registered and not yet satisfied."""
        return len(self._waiters)

    def try_allocate(self, nbytes: int) -> bool:
        """Take ``nbytes`` if any memory is available (non-strict: the pool may go below
        zero by this allocation); False, taking nothing, if it is spent."""
        if self._size > 0 and self._available <= 0:
            return False
        self._available -= nbytes
        return True

    def allocate(self, nbytes: int) -> None:
        """Take ``nbytes`` whatever is available: for memory already in hand (a small
        frame copied out of a receive buffer); the pool then refuses the next
        :meth:`try_allocate` if it is spent."""
        self._available -= nbytes

    def release(self, nbytes: int) -> None:
        """Give back ``nbytes``; if that makes memory available, call the waiters."""
        self._available += nbytes
        if self._waiters and not self._waking and not self.out_of_memory:
            self._wake()

    def wait(self, waiter: MemoryWaiter) -> None:
        """Call ``waiter`` once memory is available again, until it returns True."""
        self._waiters.setdefault(waiter, None)

    def cancel_wait(self, waiter: MemoryWaiter) -> None:
        self._waiters.pop(waiter, None)

    def _wake(self) -> None:
        self._waking = True
        try:
            waiters = self._waiters
            while waiters and not self.out_of_memory:
                waiter = next(iter(waiters))
                if not waiter():
                    break  # refused again: it stays first in line
                waiters.pop(waiter, None)
        finally:
            self._waking = False

    def __repr__(self) -> str:
        if self._size <= 0:
            return f"MemoryPool(unbounded, {self.used} bytes used)"
        return f"MemoryPool({self.used}/{self._size} bytes used, {len(self._waiters)} waiting)"
