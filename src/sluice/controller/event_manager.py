"""The controller's single event thread and FIFO queue (Kafka's ``ControllerEventManager``).

Everything the controller does happens in :meth:`ControllerEventProcessor.process`,
called for one event at a time on one thread, in the order the events were put:
there are no locks around the controller's state. Delayed events (the auto leader
rebalance) wait in a small timer list on the manager's clock.

Tests with a :class:`~sluice.base.clock.ManualClock` do not start the thread: they call
:meth:`ControllerEventManager.process_pending` to run the queue on their own thread.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections import deque
from typing import Protocol

from sluice.base.clock import Clock

from .events import ControllerEvent, ShutdownEventThread

__all__ = ["ControllerEventManager", "ControllerEventProcessor", "QueuedEvent"]

log = logging.getLogger(__name__)


class ControllerEventProcessor(Protocol):
    """What the event thread drives: the controller."""

    def process(self, event: ControllerEvent) -> None:
        """Handle one event (on the event thread)."""
        ...

    def preempt(self, event: ControllerEvent) -> None:
        """Answer an event that will never be processed (cleared by an Expire)."""
        ...


class QueuedEvent:
    """An event in the queue; processed or preempted exactly once."""

    __slots__ = ("_done", "_lock", "_spent", "enqueue_time_ms", "event")

    def __init__(self, event: ControllerEvent, enqueue_time_ms: int) -> None:
        self.event = event
        self.enqueue_time_ms = enqueue_time_ms
        self._lock = threading.Lock()
        self._spent = False
        self._done = threading.Event()

    def _claim(self) -> bool:
        with self._lock:
            if self._spent:
                return False
            self._spent = True
            return True

    def process(self, processor: ControllerEventProcessor) -> None:
        if not self._claim():
            return
        try:
            processor.process(self.event)
        finally:
            self._done.set()

    def preempt(self, processor: ControllerEventProcessor) -> None:
        if not self._claim():
            return
        try:
            processor.preempt(self.event)
        finally:
            self._done.set()

    def await_processing(self, timeout_s: float | None = None) -> bool:
        """Wait until processed or preempted; False on timeout."""
        return self._done.wait(timeout_s)


class ControllerEventManager:
    """A FIFO queue of controller events and the one thread that processes them."""

    def __init__(
        self,
        controller_id: int,
        processor: ControllerEventProcessor,
        clock: Clock,
        *,
        thread_name: str = "controller-event-thread",
    ) -> None:
        self.controller_id = controller_id
        self.processor = processor
        self.clock = clock
        self.thread_name = thread_name
        self._cond = threading.Condition()
        self._queue: deque[QueuedEvent] = deque()
        self._timers: list[tuple[int, int, str, ControllerEvent]] = []
        self._timer_seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._processing = False

    # -- the queue ------------------------------------------------------------------
    def put(self, event: ControllerEvent) -> QueuedEvent:
        """Append ``event`` to the queue."""
        queued = QueuedEvent(event, self.clock.hi_res_clock_ms())
        with self._cond:
            self._queue.append(queued)
            self._cond.notify_all()
        return queued

    def clear_and_put(self, event: ControllerEvent) -> QueuedEvent:
        """Preempt every queued event, then put ``event`` (used for Expire)."""
        with self._cond:
            cleared = list(self._queue)
            self._queue.clear()
        for queued in cleared:
            queued.preempt(self.processor)
        return self.put(event)

    def queue_size(self) -> int:
        with self._cond:
            return len(self._queue)

    def is_empty(self) -> bool:
        """True when nothing is queued and nothing is being processed."""
        with self._cond:
            return not self._queue and not self._processing

    # -- delayed events -------------------------------------------------------------
    def schedule(self, name: str, event: ControllerEvent, delay_ms: int) -> None:
        """Put ``event`` after ``delay_ms``; a timer of the same name is replaced."""
        with self._cond:
            self._timers = [t for t in self._timers if t[2] != name]
            heapq.heapify(self._timers)
            deadline = self.clock.hi_res_clock_ms() + delay_ms
            heapq.heappush(self._timers, (deadline, next(self._timer_seq), name, event))
            self._cond.notify_all()

    def cancel(self, name: str) -> None:
        with self._cond:
            self._timers = [t for t in self._timers if t[2] != name]
            heapq.heapify(self._timers)

    def scheduled(self) -> list[tuple[int, str]]:
        """(deadline, name) of the pending timers, soonest first."""
        with self._cond:
            return sorted((t[0], t[2]) for t in self._timers)

    def _move_due_timers(self) -> None:
        now = self.clock.hi_res_clock_ms()
        while self._timers and self._timers[0][0] <= now:
            _, _, _, event = heapq.heappop(self._timers)
            self._queue.append(QueuedEvent(event, now))

    # -- running --------------------------------------------------------------------
    def process_pending(self, max_events: int = 100_000) -> int:
        """Process queued (and due delayed) events on the calling thread until the queue
        is empty; returns how many ran. Only for use without :meth:`start`."""
        if self._thread is not None:
            raise RuntimeError("the event thread is running")
        count = 0
        while count < max_events:
            with self._cond:
                self._move_due_timers()
                if not self._queue:
                    return count
                queued = self._queue.popleft()
                self._processing = True
            try:
                self._run(queued)
            finally:
                with self._cond:
                    self._processing = False
            count += 1
        raise RuntimeError(f"more than {max_events} controller events: a loop?")

    @property
    def is_running(self) -> bool:
        """Whether the event thread is running."""
        return self._thread is not None

    def start(self) -> None:
        """Start the event thread."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
        self._thread.start()

    def close(self, timeout_s: float = 30.0) -> None:
        """Preempt queued events, stop the thread after the current event, and join it."""
        thread = self._thread
        if thread is None:
            return
        self.clear_and_put(ShutdownEventThread())
        thread.join(timeout_s)
        self._thread = None

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    self._move_due_timers()
                    if self._queue:
                        break
                    if self._timers:
                        self.clock.wait_until(self._cond, self._timers[0][0])
                    else:
                        self._cond.wait()
                queued = self._queue.popleft()
                self._processing = True
            try:
                if isinstance(queued.event, ShutdownEventThread):
                    queued.process(_NoOp())
                    return
                self._run(queued)
            finally:
                with self._cond:
                    self._processing = False
                    self._cond.notify_all()

    def _run(self, queued: QueuedEvent) -> None:
        try:
            queued.process(self.processor)
        except Exception:
            log.exception("controller %d failed to process %r", self.controller_id, queued.event)


class _NoOp:
    def process(self, event: ControllerEvent) -> None:
        pass

    def preempt(self, event: ControllerEvent) -> None:
        pass
