"""``BufferPool``: the producer's bounded batch memory (Kafka's ``BufferPool``).

``buffer.memory`` bytes are split, at any moment, into buffers handed out to
batches, a free list of ``batch.size`` buffers kept for reuse (``poolable_size``),
and non-pooled available memory. Allocating the poolable size takes a buffer from
the free list when there is one; any other size is carved out of the non-pooled
memory, releasing free-list buffers into it when needed. When memory is short the
caller blocks, up to ``max.block.ms``, in a FIFO queue of waiters (one condition
each): memory returned by ``deallocate`` goes to the first waiter, which keeps
accumulating it until it has enough, so a large request is not starved by small
ones behind it.

Buffers are ``bytearray`` objects. The producer never resizes a pooled buffer
(it may still be exported to a socket write); a batch that needs more room moves
to a fresh buffer, which is not pooled when returned.
"""

from __future__ import annotations

import threading
from collections import deque

from sluice.base.clock import Clock
from sluice.client.errors import BufferExhaustedException, KafkaException

__all__ = ["BufferPool"]


class BufferPool:
    """A pool of ``bytearray`` batch buffers bounded by ``total_memory`` bytes."""

    def __init__(self, total_memory: int, poolable_size: int, clock: Clock) -> None:
        if poolable_size <= 0 or total_memory < 0:
            raise ValueError("total_memory must be >= 0 and poolable_size > 0")
        self._total_memory = total_memory
        self._poolable_size = poolable_size
        self._clock = clock
        self._lock = threading.Lock()
        self._free: deque[bytearray] = deque()
        self._waiters: deque[threading.Condition] = deque()
        self._non_pooled_available_memory = total_memory
        self._closed = False
        self.wait_time_ms_total = 0
        """Total time appenders spent blocked here (Kafka's bufferpool-wait-time-total)."""

    @property
    def total_memory(self) -> int:
        """``buffer.memory``: the hard limit on memory handed out."""
        return self._total_memory

    @property
    def poolable_size(self) -> int:
        """The buffer size kept on the free list (``batch.size``)."""
        return self._poolable_size

    def allocate(self, size: int, max_time_to_block_ms: int) -> bytearray:
        """A buffer of ``size`` bytes, blocking up to ``max_time_to_block_ms`` for memory.

        :raises ValueError: ``size`` exceeds the pool's total memory (immediately).
        :raises BufferExhaustedException: no memory within ``max_time_to_block_ms``.
        :raises KafkaException: the producer was closed while waiting.
        """
        if size > self._total_memory:
            raise ValueError(
                f"Attempt to allocate {size} bytes, but there is a hard limit of "
                f"{self._total_memory} on memory allocations."
            )
        buffer: bytearray | None = None
        with self._lock:
            if self._closed:
                raise KafkaException("Producer closed while allocating memory")
            try:
                if size == self._poolable_size and self._free:
                    return self._free.popleft()
                free_list_size = len(self._free) * self._poolable_size
                if self._non_pooled_available_memory + free_list_size >= size:
                    # Enough unallocated or pooled memory: take it without blocking.
                    self._free_up(size)
                    self._non_pooled_available_memory -= size
                else:
                    buffer = self._wait_for_memory(size, max_time_to_block_ms)
            finally:
                # Signal the next waiter if there is memory left over for it.
                if (self._non_pooled_available_memory > 0 or self._free) and self._waiters:
                    self._waiters[0].notify()
        return bytearray(size) if buffer is None else buffer

    def _wait_for_memory(self, size: int, max_time_to_block_ms: int) -> bytearray | None:
        """Queue as a waiter and gather memory as it is freed (lock held)."""
        accumulated = 0
        more_memory = threading.Condition(self._lock)
        self._waiters.append(more_memory)
        start_ms = self._clock.hi_res_clock_ms()
        deadline_ms = start_ms + max_time_to_block_ms
        buffer: bytearray | None = None
        try:
            while accumulated < size:
                self._clock.wait_until(more_memory, deadline_ms)
                if self._closed:
                    raise KafkaException("Producer closed while allocating memory")
                # Only the first waiter may take memory; the others wait their turn.
                if self._waiters[0] is not more_memory:
                    if self._clock.hi_res_clock_ms() >= deadline_ms:
                        raise self._exhausted(max_time_to_block_ms)
                    continue
                if accumulated == 0 and size == self._poolable_size and self._free:
                    buffer = self._free.popleft()
                    accumulated = size
                else:
                    self._free_up(size - accumulated)
                    got = min(size - accumulated, self._non_pooled_available_memory)
                    self._non_pooled_available_memory -= got
                    accumulated += got
                if accumulated < size and self._clock.hi_res_clock_ms() >= deadline_ms:
                    raise self._exhausted(max_time_to_block_ms)
            accumulated = 0  # handed to the caller: nothing to give back
            return buffer
        finally:
            # On failure, return what was gathered so it is not lost.
            self._non_pooled_available_memory += accumulated
            self._waiters.remove(more_memory)
            self.wait_time_ms_total += self._clock.hi_res_clock_ms() - start_ms

    @staticmethod
    def _exhausted(max_time_to_block_ms: int) -> BufferExhaustedException:
        return BufferExhaustedException(
            "Failed to allocate memory within the configured max blocking time "
            f"{max_time_to_block_ms} ms (buffer.memory is exhausted; raise it, or "
            "max.block.ms, or produce more slowly)."
        )

    def _free_up(self, size: int) -> None:
        """Move free-list buffers into non-pooled memory until ``size`` is available."""
        while self._free and self._non_pooled_available_memory < size:
            self._free.pop()
            self._non_pooled_available_memory += self._poolable_size

    def deallocate(self, buffer: bytearray | None, size: int | None = None) -> None:
        """Return ``size`` bytes (default: the buffer's length) and wake the first waiter.

        A buffer of exactly the poolable size goes back on the free list; otherwise
        only its memory is returned. ``buffer`` may be None to return memory whose
        buffer must not be reused (for example, still referenced by a socket write).
        """
        if size is None:
            if buffer is None:
                return
            size = len(buffer)
        with self._lock:
            if (
                buffer is not None
                and size == self._poolable_size
                and len(buffer) == self._poolable_size
            ):
                self._free.append(buffer)
            else:
                self._non_pooled_available_memory += size
            if self._waiters:
                self._waiters[0].notify()

    def close(self) -> None:
        """Fail every blocked and future allocation (the producer is closing)."""
        with self._lock:
            self._closed = True
            for waiter in self._waiters:
                waiter.notify()

    def available_memory(self) -> int:
        """Unallocated memory: non-pooled plus the free list."""
        with self._lock:
            return self._non_pooled_available_memory + len(self._free) * self._poolable_size

    def unallocated_memory(self) -> int:
        """Non-pooled available memory only."""
        with self._lock:
            return self._non_pooled_available_memory

    def free_size(self) -> int:
        """Buffers on the free list."""
        with self._lock:
            return len(self._free)

    def queued(self) -> int:
        """Appenders blocked waiting for memory."""
        with self._lock:
            return len(self._waiters)
