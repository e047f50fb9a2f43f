"""Write-behind for leader appends: the copy into the segment file runs on a writer thread.

Why: an append's cost is the kernel copying the batches into page-cache pages, and on
a VM whose host takes back freed memory that copy slows down five- to tenfold for
seconds at a time (docs/performance.md, Soak). On the event loop every fetch and produce
answer of the broker waits behind it. With a :class:`LogWriter` the loop validates the
batches, assigns their offsets and file positions and indexes them, then hands the
bytes to this thread; it answers other requests meanwhile.

What a reader sees does not change: the log end offset, and the segment size reads are
bounded by, move only when the bytes are in the file (:meth:`LocalLog.publish_written`,
called back on the loop in append order). So the high watermark, fetches and the
produce answer (acks=1 waits for it, acks=all for the HW) all follow the write, as they
followed the synchronous append: nothing is acknowledged before the kernel has it.

Everything else that touches a log's files (a roll, a flush, truncation, a follower's
or coordinator's synchronous append, close) first waits for its writes
(:meth:`LocalLog.drain`). A failed write makes the log unusable
(``KafkaStorageException``), as Kafka takes a failed log directory offline.

The broker uses it only with ``log.write.thread`` (off by default): on the benchmark VM
it did not lower the soak's latency tail, a slow copy being slow on any thread, and it
cost CPU and memory (docs/performance.md, change 14).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from sluice.log.patched_records import pwrite_all

if TYPE_CHECKING:
    from sluice.log.file_records import FileRecords

__all__ = ["LogWriter", "ManualLogWriter", "WriteJob", "Writer"]

logger = logging.getLogger(__name__)

Post = Callable[[Callable[[], None]], object]


class WriteJob:
    """Bytes of one append at a file position; ``done`` once written (or failed)."""

    __slots__ = (
        "done", "end_offset", "end_position", "error", "on_done", "parts", "position",
        "records",
    )  # fmt: skip

    def __init__(
        self,
        records: FileRecords,
        parts: list[bytearray | memoryview],
        position: int,
        end_position: int,
        end_offset: int,
        on_done: Callable[[], None],
    ) -> None:
        self.records = records  # the file the bytes go to (open until the job is done)
        self.parts = parts
        self.position = position
        self.end_position = end_position
        self.end_offset = end_offset  # the log end offset once written
        self.on_done = on_done  # posted to the owner's thread when done
        self.done = False
        self.error: OSError | None = None


def _write(job: WriteJob) -> None:
    """Write ``job`` (an error is kept on it) and let go of its buffers."""
    try:
        pwrite_all(job.records.fileno(), job.parts, job.position)
    except OSError as exc:
        logger.error("write to a segment file failed: %s", exc)
        job.error = exc
    job.parts = []


class Writer(Protocol):
    """What a log needs of a writer: take a job, wait for one, and run a callback on the
    thread that owns the logs."""

    def submit(self, job: WriteJob) -> None: ...

    def wait(self, job: WriteJob) -> None: ...

    def post(self, callback: Callable[[], None]) -> object: ...


class LogWriter:
    """One thread writing :class:`WriteJob` s in submission order; ``post`` hands a
    finished job's callback to the thread that owns the logs (``loop.call_soon_threadsafe``
    for a broker)."""

    def __init__(self, post: Post, name: str = "sluice-log-writer") -> None:
        self.post: Post = post
        self._jobs: queue.SimpleQueue[WriteJob | None] = queue.SimpleQueue()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: WriteJob) -> None:
        if self._closed:
            raise RuntimeError("the log writer is closed")
        self._jobs.put(job)

    def wait(self, job: WriteJob) -> None:
        """Block until ``job`` is written (its callback may still be queued)."""
        if job.done:
            return
        with self._cond:
            while not job.done:
                self._cond.wait()

    def close(self) -> None:
        """Write what was submitted, then stop the thread."""
        if self._closed:
            return
        self._closed = True
        self._jobs.put(None)
        self._thread.join()

    def _run(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            if job is None:
                return
            _write(job)
            with self._cond:
                job.done = True
                self._cond.notify_all()
            # RuntimeError: the owner's loop is closed, nobody waits any more.
            with contextlib.suppress(RuntimeError):
                self.post(job.on_done)


class ManualLogWriter:
    """The writer without a thread, for sans-I/O tests: submitted jobs wait until
    :meth:`run` writes them (or a log waits for one), and the callbacks of written jobs
    wait in :attr:`posted` until :meth:`deliver`."""

    def __init__(self) -> None:
        self.queued: deque[WriteJob] = deque()
        self.posted: list[Callable[[], None]] = []
        self._failure: OSError | None = None

    def submit(self, job: WriteJob) -> None:
        self.queued.append(job)

    def wait(self, job: WriteJob) -> None:
        while not job.done and self.queued:
            self.run(1)

    def post(self, callback: Callable[[], None]) -> None:
        self.posted.append(callback)

    def fail_next(self, error: OSError) -> None:
        """The next job written fails with ``error`` instead of writing."""
        self._failure = error

    def run(self, count: int | None = None) -> int:
        """Write the first ``count`` queued jobs (all by default); returns how many."""
        ran = 0
        while self.queued and (count is None or ran < count):
            job = self.queued.popleft()
            if self._failure is not None:
                job.error, self._failure = self._failure, None
                job.parts = []
            else:
                _write(job)
            job.done = True
            self.posted.append(job.on_done)
            ran += 1
        return ran

    def deliver(self) -> int:
        """Run the posted callbacks (those they post wait for the next call)."""
        callbacks, self.posted = self.posted, []
        for callback in callbacks:
            callback()
        return len(callbacks)

    def drop(self) -> int:
        """Forget the jobs not written yet (what a killed process loses)."""
        count = len(self.queued)
        self.queued.clear()
        return count
