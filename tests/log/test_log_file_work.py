"""Where a log's background file work runs (sluice.log.file_work): inline at once, or on
one file thread in submission order, which its owner starts and stops."""

from __future__ import annotations

import threading

import pytest

from sluice.log.file_work import FileThread, InlineFileWork


def test_inline_file_work_runs_at_once_and_logs_a_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inline = InlineFileWork()
    ran: list[str] = []
    assert inline.in_background is False
    inline.submit(lambda: ran.append(threading.current_thread().name))
    assert ran == [threading.current_thread().name]

    def failing() -> None:
        raise OSError("no such file")

    inline.submit(failing)  # logged, not raised
    assert "background file work failed" in caplog.text


def test_the_file_thread_runs_work_in_order_off_the_caller_and_stop_joins_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    thread = FileThread("file-work-test")
    assert thread.in_background is True
    ran: list[tuple[int, str]] = []
    thread.submit(lambda: ran.append((0, threading.current_thread().name)))  # before start
    thread.start()

    def failing() -> None:
        raise OSError("no such file")

    thread.submit(failing)  # logged; the thread goes on
    for i in range(1, 50):
        thread.submit(lambda i=i: ran.append((i, threading.current_thread().name)))  # type: ignore[misc]
    assert thread.stop(timeout_s=10.0)  # runs what is queued first
    assert not thread.is_alive
    assert ran == [(i, "file-work-test") for i in range(50)]
    assert "background file work failed" in caplog.text
    thread.submit(lambda: ran.append((50, threading.current_thread().name)))
    assert ran[-1] == (50, threading.current_thread().name)  # after stop: inline
    assert thread.stop(timeout_s=10.0)  # again: nothing to do


def test_a_file_thread_stopped_before_it_started_runs_its_queue_on_the_caller() -> None:
    thread = FileThread("never-started")
    ran: list[str] = []
    thread.submit(lambda: ran.append(threading.current_thread().name))
    assert thread.stop(timeout_s=10.0)
    assert ran == [threading.current_thread().name] and not thread.is_alive
    assert thread.stop(timeout_s=10.0)
