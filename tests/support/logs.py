"""Logs on disk for the log tests: a manual clock's start (:data:`START_MS`), a log of full segments
(:func:`segmented_log`), clean page-cache states (:func:`settle`), retries of what the
kernel drops (:func:`attempts`, see tests/log/conftest.py) and background file work run
when the test says (:class:`ManualFileWork`)."""

from __future__ import annotations

import os
import queue
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluice.base.clock import ManualClock
from sluice.log import Log, LogConfig
from sluice.log.file_records import FileRecords
from sluice.log.file_work import FileWork
from sluice.log.local_log import FlushWork, GuardedFileWork
from support.records import Rec, build_batch

ATTEMPTS = 5
SETTLE_S = 5.0
START_MS = 1_700_000_000_000
"""Where the log tests' manual clocks start: record and segment times in a realistic range."""


def attempts(disk: Path, scenario: Callable[[Path], None]) -> None:
    """Run ``scenario`` in a fresh directory under ``disk`` until it passes, at most
    ``ATTEMPTS`` times, 0.05, 0.1, 0.2 and 0.4 s apart (a retry of what the kernel did,
    not a wait for the code under test); the last failure is raised."""
    for attempt in range(ATTEMPTS):
        try:
            scenario(disk / f"attempt-{attempt}")
            return
        except AssertionError:
            if attempt == ATTEMPTS - 1:
                raise
        time.sleep(0.05 * 2**attempt)


def segmented_log(
    directory: Path,
    clock: ManualClock,
    segments: int,
    fsync: bool = True,
    file_work: FileWork | None = None,
    **config: Any,
) -> Log:
    """A log of ``segments`` full segments of two 200-byte records each (offsets 2i and
    2i + 1 in segment i) and an active one holding offset 2 * ``segments``, all on disk
    (``fsync``, their pages left clean: :func:`settle`) or some still dirty in the page
    cache; ``config`` are further :class:`LogConfig` fields; ``file_work`` runs the log's
    background file work (inline by default). Rolls create their own files unless
    ``config`` says otherwise (``segment_prepare_next``): these scenarios count the page
    drops queued as file work, where the next segment's files would be made."""
    one = len(build_batch([Rec(b"x" * 200, timestamp=clock.milliseconds())]))
    config.setdefault("segment_prepare_next", False)
    log = Log(
        directory / "t-0", LogConfig(segment_bytes=2 * one, **config), clock=clock,
        file_work=file_work,
    )  # fmt: skip
    for i in range(2 * segments + 1):
        log.append_as_leader(
            build_batch([Rec(b"%03d" % i + b"x" * 197, timestamp=clock.milliseconds())]), 0
        )
    if fsync:
        log.flush()
        for segment in log.segments:
            os.fsync(segment.log.fileno())
            settle(segment.log)
    return log


def settle(records: FileRecords) -> None:
    """Leave the file's pages in the cache as clean copies read from the disk: drop the
    ones just written (which the kernel may keep for a few milliseconds; dropped again
    until it lets them go, for at most ``SETTLE_S``), then read the file back."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        records.cache_dropper(write_back_first=False)()  # a dropper is single-use
        if not records.cached() or time.monotonic() > deadline:
            break
    records.read(0, records.size)


class ManualFileWork:
    """Background file work (sluice.log.file_work) queued in order, as a broker's file
    thread would run it, and run when the test says (:meth:`run`)."""

    def __init__(self) -> None:
        self.work: queue.Queue[Callable[[], None]] = queue.Queue()

    @property
    def in_background(self) -> bool:
        return True

    def submit(self, work: Callable[[], None]) -> None:
        self.work.put(work)

    def queued(self, owner: type) -> int:
        """How many queued pieces of work are methods of an ``owner`` (e.g. the
        ``FlushWork.sync`` a roll queues)."""
        return sum(isinstance(_owner(w), owner) for w in self.work.queue)

    def take(self, owner: type) -> list[Callable[[], None]]:
        """Take the queued methods of an ``owner`` out of the queue, the rest keeping
        their order: for a scenario that runs them later, or never (the fsyncs of the
        segments a roll left, ``FlushWork.sync``, with pages meant to stay dirty)."""
        kept: list[Callable[[], None]] = []
        taken: list[Callable[[], None]] = []
        while not self.work.empty():
            work = self.work.get()
            (taken if isinstance(_owner(work), owner) else kept).append(work)
        for work in kept:
            self.work.put(work)
        return taken

    def run(self) -> int:
        """Run what is queued, in order; how many there were."""
        done = 0
        while not self.work.empty():
            self.work.get()()
            done += 1
        return done

    def drop(self) -> int:
        """Forget what is queued (what a killed process loses, its descriptors closed:
        those a queued flush holds too); how many there were."""
        dropped = 0
        while not self.work.empty():
            owner = _owner(self.work.get())
            if isinstance(owner, FlushWork) and owner.owned:
                for fd in owner.fds:
                    os.close(fd)
                owner.fds = []
            dropped += 1
        return dropped


def _owner(work: Callable[[], None]) -> object:
    """The object whose method ``work`` is, through a log's GuardedFileWork."""
    inner = work.work if isinstance(work, GuardedFileWork) else work
    return getattr(inner, "__self__", None)
