"""A hierarchical timing wheel whose tasks run on the broker's event loop.

:class:`EventLoopTimer` is a :class:`~sluice.timer.SystemTimer` (O(1) add and cancel)
advanced by one reaper thread, which hands each expired task to the event loop, as the
purgatories' expirations are. The network shell uses it for delays that many connections
may be waiting out at once — the answer and close of a failed authentication
(``connection.failed.authentication.delay.ms``) — rather than a timer handle per
connection on the loop's heap.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from sluice.base.clock import Clock
from sluice.timer import FunctionTask, SystemTimer, TimerTask

__all__ = ["EventLoopTimer"]

log = logging.getLogger(__name__)

REAPER_POLL_MS = 200
"""How long the reaper waits for a bucket to fall due before looking again."""


class EventLoopTimer:
    """Runs functions on ``loop`` after a delay (see the module)."""

    __slots__ = ("_loop", "_reaper", "_running", "_timer", "name")

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop, clock: Clock) -> None:
        self.name = name
        self._loop = loop
        self._timer = SystemTimer(name, clock=clock, executor=self._on_loop)
        self._running = True
        self._reaper = threading.Thread(target=self._reap, name=f"{name}-reaper", daemon=True)
        self._reaper.start()

    def _on_loop(self, fn: Callable[[], None]) -> None:
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn)

    def schedule(self, delay_ms: int, fn: Callable[[], object]) -> TimerTask:
        """Call ``fn`` on the event loop ``delay_ms`` from now; ``cancel()`` the returned
        task to call it off."""
        task = FunctionTask(max(delay_ms, 0), fn)
        self._timer.add(task)
        return task

    @property
    def size(self) -> int:
        """Tasks scheduled and not yet run or cancelled."""
        return self._timer.size()

    def _reap(self) -> None:
        while self._running:
            try:
                self._timer.advance_clock(REAPER_POLL_MS)
            except Exception:
                log.exception("timer %s reaper failed", self.name)

    def shutdown(self) -> None:
        """Stop: tasks not yet run never will."""
        self._running = False
        self._timer.shutdown()
        if self._reaper is not threading.current_thread():
            self._reaper.join()
