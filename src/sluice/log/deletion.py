"""Where retained-out segment files are removed: inline, or on one background thread.

Removing a segment file frees its page-cache pages, and on the benchmark VM unlinking a
128 MiB segment held the event loop for tens of milliseconds (py-spy during the soak:
``Path.unlink`` under ``Broker.run_retention``), which showed as a step in the
produce and end-to-end p99. Kafka deletes segment files on a scheduler thread too.
The ``sluice broker`` process turns the thread on (:func:`enable_background_deletion`);
an embedded broker, and the log's own tests, keep inline deletion. A deletion still
queued when the process ends leaves ``*.deleted`` files, which the loader removes at
the next start, as after a crash.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

__all__ = [
    "delete_soon",
    "drain_background_deletion",
    "enable_background_deletion",
    "in_background",
]

log = logging.getLogger(__name__)

_queue: queue.Queue[Callable[[], None]] | None = None
_lock = threading.Lock()


def enable_background_deletion() -> None:
    """From now on :func:`delete_soon` runs deletions on one daemon thread (idempotent)."""
    global _queue
    with _lock:
        if _queue is not None:
            return
        work: queue.Queue[Callable[[], None]] = queue.Queue()
        threading.Thread(target=_run, args=(work,), name="segment-deleter", daemon=True).start()
        _queue = work


def _run(work: queue.Queue[Callable[[], None]]) -> None:
    while True:
        delete = work.get()
        try:
            delete()
        except Exception:
            log.exception("deleting segment files failed")


def in_background() -> bool:
    """Whether :func:`delete_soon` runs deletions on the deletion thread (so they may
    wait for the disk without holding the event loop)."""
    return _queue is not None


def delete_soon(delete: Callable[[], None]) -> None:
    """Run ``delete`` on the deletion thread when it is on, else now."""
    work = _queue
    if work is None:
        delete()
    else:
        work.put(delete)


def drain_background_deletion(timeout_s: float) -> bool:
    """Wait (bounded) until queued deletions are done; True when none is left."""
    work = _queue
    if work is None:
        return True
    done = threading.Event()
    work.put(done.set)  # one thread, in order: set once everything queued before is done
    return done.wait(timeout_s)
