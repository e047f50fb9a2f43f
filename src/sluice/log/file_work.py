"""Where a log's background file work runs: inline, or on one file thread.

The file work of a log is what may wait for the disk or the file system's metadata and
need not be done before the log operation that causes it returns: removing the files of
removed segments once ``file.delete.delay.ms`` has passed (unlinking a large file frees
its page-cache pages, which can take tens of milliseconds), dropping the pages of
removed segments (writing dirty ones back first), creating the next segment's files
ahead of a roll and giving them their final names (next_segment.py), fsyncing the
segments a roll leaves (``LocalLog.flush_in_background``; the recovery point moves once
that is done) and writing recovery-point checkpoints
(``LogManager.checkpoint_recovery_points``). Kafka deletes segment files, flushes rolled
segments and checkpoints recovery points on a scheduler thread too.

The policy is chosen by whoever owns the logs and handed to each of them: the
:class:`~sluice.log.manager.LogManager` passes the one it is given to every log it opens
or creates. A broker (the ``sluice broker`` process and ``EmbeddedBroker`` alike) gives
it a :class:`FileThread`, which it starts before it loads the logs and stops (joining the
thread) after it has closed them. A log on its own, and most tests, use
:class:`InlineFileWork`. A piece of work still queued when the process ends leaves
``*.deleted`` or ``.next`` files, which the loader removes or settles at the next start,
as after a crash.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Protocol

from sluice.log.errors import KafkaStorageException

__all__ = ["FileThread", "FileWork", "InlineFileWork"]

logger = logging.getLogger(__name__)

Work = Callable[[], None]


class FileWork(Protocol):
    """Runs a log's background file work, in submission order."""

    @property
    def in_background(self) -> bool:
        """Whether work runs off the submitting thread, so that it may wait for the disk
        (write dirty pages back before dropping them) and work that only pays off off the
        event loop (creating the next segment's files ahead) is worth asking for."""
        ...

    def submit(self, work: Work) -> None:
        """Run ``work`` now or later; an exception it raises is logged, not raised (a
        ``KafkaStorageException`` at debug only: the log directory failure channel
        logged its I/O error)."""
        ...


def _run_logged(work: Work) -> None:
    try:
        work()
    except KafkaStorageException as exc:  # its log dir was reported where it was raised
        logger.debug("background file work failed: %s", exc)
    except Exception:
        logger.exception("background file work failed")


class InlineFileWork:
    """Runs file work at once, on the submitting thread."""

    __slots__ = ()

    @property
    def in_background(self) -> bool:
        return False

    def submit(self, work: Work) -> None:
        _run_logged(work)


class FileThread:
    """One thread running file work in submission order. Its owner calls :meth:`start`
    before handing it to logs and :meth:`stop` once they are closed; work submitted
    before :meth:`start` waits for it, work submitted after :meth:`stop` runs inline."""

    __slots__ = ("_lock", "_queue", "_stopped", "_thread")

    def __init__(self, name: str = "sluice-file-work") -> None:
        self._queue: queue.SimpleQueue[Work | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def in_background(self) -> bool:
        return True

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def submit(self, work: Work) -> None:
        with self._lock:
            if not self._stopped:
                self._queue.put(work)
                return
        _run_logged(work)

    def stop(self, timeout_s: float) -> bool:
        """Run what is queued, then end the thread; waits at most ``timeout_s``. True
        when the thread has ended. Never started: the queued work runs here."""
        with self._lock:
            first = not self._stopped
            if first:
                self._stopped = True
                self._queue.put(None)
        if self._thread.ident is None:
            if first:
                self._run()
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        work_queue = self._queue
        while True:
            work = work_queue.get()
            if work is None:
                return
            _run_logged(work)
