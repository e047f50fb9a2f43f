"""Timer tasks, their entries, and the bucket lists of the timing wheel.

A ``TimerTaskList`` is a circular doubly linked list with a sentinel root, so
adding and removing an entry are O(1). A task points at its current entry; an
entry whose task points elsewhere counts as cancelled (re-adding a task moves it).
All lists of one timer share that timer's lock; callers of the underscore
methods hold it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["FunctionTask", "TaskCounter", "TimerTask", "TimerTaskEntry", "TimerTaskList"]


class TimerTask:
    """Something to run ``delay_ms`` after it is added to a timer; subclasses define ``run``."""

    __slots__ = ("_entry", "delay_ms")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self._entry: TimerTaskEntry | None = None

    def run(self) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        """Cancel the task: it will not run unless it is added again."""
        entry = self._entry
        if entry is not None:
            self._entry = None
            lst = entry.list
            if lst is not None:
                lock = lst.lock
                lock.acquire()
                try:
                    if entry.list is lst:
                        lst._remove(entry)
                        return
                finally:
                    lock.release()
                entry.remove()


class FunctionTask(TimerTask):
    """A timer task that calls a function."""

    __slots__ = ("fn",)

    def __init__(self, delay_ms: int, fn: Callable[[], object]) -> None:
        self.delay_ms = delay_ms
        self._entry = None
        self.fn = fn

    def run(self) -> None:
        self.fn()


class TaskCounter:
    """The count of entries in all buckets of one timer (shared by its wheels)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


class TimerTaskEntry:
    """One scheduling of a task at ``expiration_ms``: a node of a bucket's linked list."""

    __slots__ = ("expiration_ms", "list", "next", "prev", "timer_task")

    def __init__(self, timer_task: TimerTask | None, expiration_ms: int) -> None:
        self.timer_task = timer_task
        self.expiration_ms = expiration_ms
        self.list: TimerTaskList | None = None
        # next/prev are set when the entry is linked into a list (or below, for a root).
        if timer_task is None:
            self.next: TimerTaskEntry = self
            self.prev: TimerTaskEntry = self
        else:
            # A task lives in one entry at a time: re-adding moves it.
            old = timer_task._entry
            if old is not None:
                old.remove()
            timer_task._entry = self

    @property
    def cancelled(self) -> bool:
        task = self.timer_task
        return task is None or task._entry is not self

    def remove(self) -> None:
        """Remove this entry from whichever list holds it (it may move while we look)."""
        lst = self.list
        while lst is not None:
            with lst.lock:
                if self.list is lst:
                    lst._remove(self)
                    return
            lst = self.list


_DETACHED = TimerTaskEntry(None, -1)
"""Where the links of an entry out of any list point (a shared sentinel, not itself)."""


class TimerTaskList:
    """A bucket: entries due in one tick span of a wheel, with the span's start as expiration."""

    __slots__ = ("_counter", "_expiration_ms", "_root", "lock")

    def __init__(self, counter: TaskCounter, lock: threading.RLock | None = None) -> None:
        self._counter = counter
        self._root = TimerTaskEntry(None, -1)
        self._expiration_ms = -1
        self.lock = lock if lock is not None else threading.RLock()

    @property
    def expiration_ms(self) -> int:
        return self._expiration_ms

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the bucket's expiration; True when it changed (the bucket must be queued)."""
        changed = self._expiration_ms != expiration_ms
        self._expiration_ms = expiration_ms
        return changed

    def add(self, entry: TimerTaskEntry) -> None:
        with self.lock:
            self._add(entry)

    def remove(self, entry: TimerTaskEntry) -> None:
        with self.lock:
            self._remove(entry)

    def _add(self, entry: TimerTaskEntry) -> None:
        if entry.list is not None:
            entry.remove()
        root = self._root
        tail = root.prev
        entry.next = root
        entry.prev = tail
        entry.list = self
        tail.next = entry
        root.prev = entry
        self._counter.value += 1

    def _remove(self, entry: TimerTaskEntry) -> None:
        if entry.list is self:
            entry.next.prev = entry.prev
            entry.prev.next = entry.next
            # Not back to itself: a self-loop would be a reference cycle, leaving the
            # entry and its whole operation (request, response, future) to the cyclic GC.
            entry.next = entry.prev = _DETACHED
            entry.list = None
            self._counter.value -= 1

    def flush(self, fn: Callable[[TimerTaskEntry], None]) -> None:
        """Empty the bucket, handing each entry to ``fn``; then mark the bucket unused."""
        with self.lock:
            root = self._root
            head = root.next
            while head is not root:
                self._remove(head)
                fn(head)
                head = root.next
            self._expiration_ms = -1

    def foreach(self, fn: Callable[[TimerTask], None]) -> None:
        """Apply ``fn`` to every task whose entry is live."""
        with self.lock:
            entry = self._root.next
            while entry is not self._root:
                nxt = entry.next
                task = entry.timer_task
                if task is not None and not entry.cancelled:
                    fn(task)
                entry = nxt

    def __len__(self) -> int:
        with self.lock:
            n = 0
            entry = self._root.next
            while entry is not self._root:
                n += 1
                entry = entry.next
            return n
