"""``DelayedOperation``: a request that waits for a condition or a timeout."""

from __future__ import annotations

import threading
from collections.abc import Callable

from sluice.timer import TimerTask

__all__ = ["DelayedOperation"]


class DelayedOperation(TimerTask):
    """An operation completed exactly once: by ``try_complete`` when its condition holds,
    by ``force_complete``, or by expiry after ``delay_ms``.

    Subclasses implement ``try_complete`` (check the condition; when met call
    ``force_complete`` and return its result), ``on_complete`` (send the
    response) and ``on_expiration``. Following Kafka after KAFKA-8334 and
    KAFKA-19312, every completion attempt, including expiry, runs under the
    operation's re-entrant lock, so ``on_complete`` never races ``try_complete``.
    The lock can be shared with related state (a group's lock, say).
    """

    __slots__ = ("_completed", "lock")

    def __init__(self, delay_ms: int, lock: threading.RLock | None = None) -> None:
        super().__init__(delay_ms)
        self._completed = False
        self.lock = lock if lock is not None else threading.RLock()

    # -- to implement ---------------------------------------------------------
    def try_complete(self) -> bool:
        """Check the completion condition; if met, return ``self.force_complete()``."""
        raise NotImplementedError

    def on_complete(self) -> None:
        """Do the completion work (build and send the response). Runs exactly once."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after ``on_complete`` when the operation completed by timing out."""
        raise NotImplementedError

    # -- completion -----------------------------------------------------------
    @property
    def is_completed(self) -> bool:
        return self._completed

    def force_complete(self) -> bool:
        """Complete now. Exactly one caller wins: it cancels the timeout and runs
        ``on_complete``, and gets True; every other caller gets False."""
        with self.lock:
            if self._completed:
                return False
            self._completed = True
            self.cancel()
            self.on_complete()
            return True

    def safe_try_complete(self) -> bool:
        """``try_complete`` under the operation's lock, for triggers racing each other."""
        with self.lock:
            if self._completed:
                return False
            return self.try_complete()

    def safe_try_complete_or_else(self, fn: Callable[[], None]) -> bool:
        """Try to complete; if that fails run ``fn`` (start watching) and try once more,
        all under the lock so a trigger between the two tries is not lost."""
        with self.lock:
            if self.try_complete():
                return True
            fn()
            if self._completed:
                return False
            return self.try_complete()

    def run(self) -> None:
        """The expiry path, called by the timer: complete and report the expiration."""
        with self.lock:
            if self.force_complete():
                self.on_expiration()
