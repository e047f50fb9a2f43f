"""Shared by the log tests that assert what the kernel dropped from the page cache.

The kernel drops clean pages on a best-effort basis: on the test VM (Linux 6.18, ext4) one
``POSIX_FADV_DONTNEED`` in ten or twenty left a page in the cache, and another call tens
of milliseconds later dropped it (the same happens to pages just read back from the
disk, and such refusals come in runs). So such a scenario runs on fresh files up to
``ATTEMPTS`` times, further apart each time (``support.logs.attempts``), and passes
on the first clean observation; one where the code does not ask for the drop fails every
time. The ``disk`` fixture here is a directory where a drop can be seen at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sluice.log.file_records import FileRecords
from support.logs import ManualFileWork

PROBE_TRIES = 20


@pytest.fixture
def disk(tmp_path: Path) -> Path:
    """``tmp_path``, where dropped pages can be seen to go: not on tmpfs (whose pages are
    the file) nor where ``RWF_NOWAIT`` probes cannot tell (:meth:`FileRecords.cached`)."""
    for attempt in range(PROBE_TRIES):
        probe = FileRecords.open(tmp_path / f"probe-{attempt}")
        probe.append(b"p" * 8192)
        os.fsync(probe.fileno())
        probe.cache_dropper()()
        dropped = not probe.cached()
        probe.delete()
        if dropped:
            return tmp_path
    pytest.skip(f"{tmp_path} keeps a file's pages after POSIX_FADV_DONTNEED, or cannot say")


@pytest.fixture
def file_work() -> ManualFileWork:
    """Background file work (deletions, page drops, the next segment's files) queued as
    on a broker's file thread, run when the test says (``file_work.run()``); a test hands
    it to the logs it opens."""
    return ManualFileWork()
