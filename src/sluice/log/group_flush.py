"""Group commit for ``flush.messages``: the fsyncs of many appends in one round, off the
event loop.

Kafka flushes inside the append that makes ``flush.messages`` messages unflushed, so with
``flush.messages=1`` every produce request pays an fsync before it is answered. A broker
that runs every partition on one event loop would stop serving for each of those fsyncs
(milliseconds on a busy disk), one partition after another. So a broker gives its logs a
:class:`GroupFlusher` (``Log.flush_group``; broker setting ``log.flush.group.commit``):

* an append that makes a flush due asks for one and is written as usual; its produce
  answer waits until the log's recovery point passes it (the replica manager's
  DelayedProduce), so what is acknowledged is on disk, as in Kafka;
* the first request starts a round at the next turn of the loop: every log due by then
  is in it, with its descriptors taken at its log end offset (``Log.flush_work``);
* the round's fsyncs run on another thread (``run``), and the loop goes on serving;
* when they are done, back on the loop, each log's recovery point moves (``Log.flushed``;
  a failed fsync takes that log offline) and ``on_flushed`` wakes its waiting answers;
* logs that became due meanwhile form the next round, so one round is in flight at a
  time and a round's size follows the load: under many producers one fsync per
  partition serves every append made while the previous round ran.

The class is sans-I/O: ``call_soon`` and ``run`` are the broker's event loop and flush
thread, or plain lists in tests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sluice.log.errors import LogError
from sluice.log.local_log import FlushWork
from sluice.log.log import Log

__all__ = ["GroupFlusher"]

logger = logging.getLogger(__name__)

Job = Callable[[], None]


class GroupFlusher:
    """Batches the flushes appends ask for (``Log.flush_group``) into rounds, one in
    flight at a time. ``call_soon(fn)`` runs ``fn`` at the next turn of the logs' thread;
    ``run(job, done)`` runs ``job`` elsewhere and then ``done`` on the logs' thread;
    ``on_flushed(log)`` is called once a round has moved (or failed) ``log``'s flush."""

    def __init__(
        self,
        call_soon: Callable[[Job], object],
        run: Callable[[Job, Job], object],
        on_flushed: Callable[[Log], None],
    ) -> None:
        self._call_soon = call_soon
        self._run = run
        self._on_flushed = on_flushed
        self._due: dict[int, Log] = {}
        self._scheduled = False
        self._in_flight = False
        self.rounds = 0  # rounds whose fsyncs ran
        self.flushes = 0  # log flushes in those rounds

    def __call__(self, log: Log) -> None:
        """``log`` has a flush due (an append asked for it)."""
        self._due[id(log)] = log
        if not self._in_flight and not self._scheduled:
            self._scheduled = True
            self._call_soon(self._start)

    @property
    def in_flight(self) -> bool:
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Logs due for the next round."""
        return len(self._due)

    def _start(self) -> None:
        self._scheduled = False
        if self._in_flight or not self._due:
            return
        logs = list(self._due.values())
        self._due.clear()
        works: list[tuple[Log, FlushWork]] = []
        for log in logs:
            try:
                work = log.flush_work()
            except (LogError, OSError) as exc:  # closed, deleted or offline meanwhile
                logger.debug("%s: no flush: %s", log.dir.name, exc)
                work = None
            if work is None:
                self._on_flushed(log)  # flushed already, or gone: its answers can go
            else:
                works.append((log, work))
        if not works:
            return
        self._in_flight = True
        self.rounds += 1
        self.flushes += len(works)
        self._run(lambda: _sync_all(works), lambda: self._finish(works))

    def _finish(self, works: list[tuple[Log, FlushWork]]) -> None:
        self._in_flight = False
        for log, work in works:
            log.flushed(work)
            self._on_flushed(log)
        if self._due and not self._scheduled:
            self._scheduled = True
            self._call_soon(self._start)


def _sync_all(works: list[tuple[Log, FlushWork]]) -> None:
    """The round's fsyncs; a failure is kept in its work (``flushed`` takes that log
    offline) and the other logs are still synced."""
    for log, work in works:
        try:
            work.sync()
        except OSError as exc:
            logger.error("%s: fsync failed: %s", log.dir.name, exc)
