"""Write-behind appends (sluice.log.writer): the writer thread, and a Log whose appends a
writer writes, checked step by step with the ManualLogWriter (no threads, no sleeps)."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest
from sluice_log_helpers import ManualClock, Rec, build_batch, values_of

from sluice.log import Log, LogConfig
from sluice.log.errors import KafkaStorageException
from sluice.log.writer import LogWriter, ManualLogWriter, WriteJob


def _batch(*values: bytes) -> bytes:
    return build_batch([Rec(value) for value in values])


def _visible(log: Log) -> list[bytes | None]:
    """Every record value a consumer can read, from the log start to the log end offset."""
    out: list[bytes | None] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).read()
        pairs = values_of(data)
        assert pairs, f"nothing read at {offset} below {log.log_end_offset}"
        out.extend(value for _, value in pairs)
        offset = pairs[-1][0] + 1
    return out


# -- the thread ------------------------------------------------------------------------------


class _File:
    """What a job needs of its FileRecords: a descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


def _job(fd: int, data: bytes, position: int, on_done: list[int], tag: int) -> WriteJob:
    return WriteJob(_File(fd), [memoryview(data)], position, position + len(data), 0,  # type: ignore[arg-type]
                    lambda: on_done.append(tag))  # fmt: skip


def test_thread_writes_in_order_and_posts_each_callback(tmp_path: Path) -> None:
    posted: list[object] = []
    writer = LogWriter(posted.append)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    done: list[int] = []
    try:
        jobs = [_job(fd, bytes([65 + i]) * 1000, i * 1000, done, i) for i in range(20)]
        for job in jobs:
            writer.submit(job)
        writer.wait(jobs[-1])
        assert all(job.done and job.error is None for job in jobs)
        writer.close()
        for callback in posted:
            callback()  # type: ignore[operator]
        assert done == list(range(20))
        assert os.pread(fd, 20_000, 0) == b"".join(bytes([65 + i]) * 1000 for i in range(20))
    finally:
        writer.close()
        os.close(fd)


def test_thread_keeps_a_failed_write_s_error_and_goes_on(tmp_path: Path) -> None:
    writer = LogWriter(lambda callback: callback())
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    done: list[int] = []
    try:
        bad = _job(fd, b"x", 0, done, 0)
        bad.records = _File(987_654)  # type: ignore[assignment]  # not a descriptor: EBADF
        good = _job(fd, b"ok", 0, done, 1)
        writer.submit(bad)
        writer.submit(good)
        writer.wait(good)
        assert bad.done and isinstance(bad.error, OSError) and bad.error.errno == errno.EBADF
        assert good.error is None and os.pread(fd, 2, 0) == b"ok"
    finally:
        writer.close()
        os.close(fd)
    with pytest.raises(RuntimeError, match="closed"):
        writer.submit(good)


def test_close_writes_what_was_submitted(tmp_path: Path) -> None:
    writer = LogWriter(lambda callback: callback())
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    gate = threading.Event()
    done: list[int] = []
    try:
        first = _job(fd, b"a" * 10, 0, done, 0)
        first.on_done = lambda: gate.wait(10) and done.append(0)  # holds the thread
        writer.submit(first)
        writer.submit(_job(fd, b"b" * 10, 10, done, 1))
        gate.set()
        writer.close()
        assert os.pread(fd, 20, 0) == b"a" * 10 + b"b" * 10 and done == [0, 1]
    finally:
        os.close(fd)


# -- a log written by a writer ----------------------------------------------------------------


@pytest.fixture
def log(tmp_path: Path) -> Log:
    opened = Log(tmp_path / "t-0", LogConfig(segment_bytes=600), clock=ManualClock())
    yield opened
    opened.close()


def test_appends_are_read_only_once_written(log: Log) -> None:
    writer = ManualLogWriter()
    calls: list[int] = []
    on_written = lambda: calls.append(log.log_end_offset)  # noqa: E731
    infos = [
        log.append_as_leader(_batch(b"a", b"b"), 0, writer=writer, on_written=on_written),
        log.append_as_leader(_batch(b"c"), 0, writer=writer, on_written=on_written),
    ]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 1), (2, 2)]
    assert log.log_end_offset == 0 and log.active_segment.size == 0 and _visible(log) == []
    assert writer.run(1) == 1
    assert log.log_end_offset == 0  # written, not yet published on the owner's thread
    writer.deliver()
    assert calls == [2] and _visible(log) == [b"a", b"b"]
    writer.run()
    writer.deliver()
    assert calls == [2, 3] and _visible(log) == [b"a", b"b", b"c"]


def test_a_synchronous_append_waits_for_the_pending_ones(log: Log) -> None:
    writer = ManualLogWriter()
    calls: list[int] = []
    log.append_as_leader(_batch(b"a"), 0, writer=writer, on_written=lambda: calls.append(1))
    info = log.append_as_leader(_batch(b"b"), 0)  # a coordinator's append: no writer
    assert info.first_offset == 1 and log.log_end_offset == 2
    assert _visible(log) == [b"a", b"b"]
    assert calls == [] and len(writer.posted) == 2  # the callback is posted, not made inline
    writer.deliver()
    assert calls == [1]


def test_roll_flush_truncate_and_close_wait_for_pending_writes(tmp_path: Path) -> None:
    writer = ManualLogWriter()
    config = LogConfig(segment_bytes=600)
    log = Log(tmp_path / "t-0", config, clock=ManualClock())
    values = [b"%03d" % i * 40 for i in range(12)]  # ~200-byte batches: rolls every few
    for value in values[:6]:
        log.append_as_leader(_batch(value), 0, writer=writer)
    assert log.number_of_segments > 1  # each roll waited for the writes before it
    assert log.log_end_offset >= 3
    log.flush()
    assert log.log_end_offset == 6 and log.recovery_point == 6
    for value in values[6:]:
        log.append_as_leader(_batch(value), 0, writer=writer)
    assert log.truncate_to(10)
    assert _visible(log) == values[:10]
    log.append_as_leader(_batch(b"last"), 0, writer=writer)
    log.close()
    reopened = Log(tmp_path / "t-0", config, clock=ManualClock(), had_clean_shutdown=True)
    try:
        assert _visible(reopened) == [*values[:10], b"last"]
    finally:
        reopened.close()


def test_a_failed_write_takes_the_log_offline(log: Log) -> None:
    writer = ManualLogWriter()
    calls: list[int] = []
    on_written = lambda: calls.append(log.log_end_offset)  # noqa: E731
    log.append_as_leader(_batch(b"a"), 0, writer=writer, on_written=on_written)
    log.append_as_leader(_batch(b"b"), 0, writer=writer, on_written=on_written)
    log.append_as_leader(_batch(b"c"), 0, writer=writer, on_written=on_written)
    writer.run(1)
    writer.fail_next(OSError(errno.ENOSPC, "No space left on device"))
    writer.run()
    writer.deliver()
    assert calls == [1]  # told once: what was written before the failure is readable
    assert isinstance(log.write_error, OSError) and log.log_end_offset == 1
    with pytest.raises(KafkaStorageException, match="offline"):
        log.append_as_leader(_batch(b"d"), 0, writer=writer)
    with pytest.raises(KafkaStorageException, match="offline"):
        log.read(0, 1000)


def test_timestamp_lookup_waits_for_pending_writes(log: Log) -> None:
    writer = ManualLogWriter()
    log.append_as_leader(build_batch([Rec(b"x", timestamp=5_000)]), 0, writer=writer)
    found = log.fetch_offset_by_timestamp(4_000)
    assert found is not None and (found.offset, found.timestamp) == (0, 5_000)
    assert log.log_end_offset == 1
