"""RateLimitedLog: each event at DEBUG, per kind at most one line per interval, with counts."""

from __future__ import annotations

import logging

import pytest

from sluice.base import ManualClock
from sluice.base.rate_limited_log import MAX_CLIENTS_COUNTED, RateLimitedLog

LOGGER = "sluice.test.rate_limited"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000_000)


@pytest.fixture
def limited(clock: ManualClock) -> RateLimitedLog:
    return RateLimitedLog(logging.getLogger(LOGGER), interval_ms=10_000, clock=clock)


def lines(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= level]


def test_first_event_is_written_at_once_then_counted(
    limited: RateLimitedLog, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        limited.event("rejected request", "10.0.0.1:5000", "request body truncated")
        for i in range(500):
            clock.advance(10)
            limited.event("rejected request", f"10.0.0.{i % 7}:5000", f"detail {i}")
    warnings = lines(caplog, logging.WARNING)
    assert warnings == [
        "rejected request from 10.0.0.1:5000: request body truncated "
        "(further ones are counted: at most one line per 10 s)"
    ]
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(debug) == 501  # every event, for whoever looks closer
    assert limited.pending("rejected request") == 500

    clock.advance(5_000)  # past the interval: the next event writes the counts
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        limited.event("rejected request", "10.0.0.9:1", "last")
    assert lines(caplog) == [
        "rejected request: 501 from 8 clients in the last 10.0 s; latest from 10.0.0.9:1: last"
    ]
    assert limited.pending("rejected request") == 0


def test_lines_stay_bounded_however_many_events(
    limited: RateLimitedLog, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(100_000):  # 100 s of events every millisecond
            clock.advance(1)
            limited.event("rejected frame", "10.0.0.1:1", "frame size -1")
    assert 10 <= len(lines(caplog)) <= 11


def test_kinds_are_limited_separately_and_keep_their_level(
    limited: RateLimitedLog, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(3):
            limited.event("rejected request", "a:1", "x")
            limited.event("error handling a request", "a:1", "boom", level=logging.ERROR)
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.ERROR]


def test_flush_writes_what_is_counted(
    limited: RateLimitedLog, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        limited.event("rejected request", "a:1", "x")
        clock.advance(2_500)
        limited.event("rejected request", "b:1", "y")
        limited.event("rejected request", "b:1", "z")
        limited.flush()
        limited.flush()  # nothing left
    assert lines(caplog)[1:] == [
        "rejected request: 2 from 1 client in the last 2.5 s; latest from b:1: z"
    ]


def test_a_lone_event_after_a_quiet_interval_is_written_as_itself(
    limited: RateLimitedLog, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        limited.event("rejected request", "a:1", "x")
        clock.advance(60_000)
        limited.event("rejected request", "b:2", "y")
    assert lines(caplog)[1].startswith("rejected request from b:2: y (further ones")


def test_the_traceback_goes_with_the_written_line_only(
    limited: RateLimitedLog, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(5):
            try:
                raise ValueError("bad")
            except ValueError as exc:
                limited.event("error handling a request", "a:1", exc, exc_info=exc)
    assert [r.exc_info is not None for r in caplog.records] == [True]


def test_details_and_clients_are_bounded(
    limited: RateLimitedLog, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        limited.event("rejected request", "a:1", "t" * 40_000)
        for i in range(MAX_CLIENTS_COUNTED + 500):
            limited.event("rejected request", f"c{i}:1", "x")
        clock.advance(10_000)
        limited.flush()
    first, counts = lines(caplog)
    assert len(first) < 400 and "(40000 characters)" in first
    assert f"from {MAX_CLIENTS_COUNTED} or more clients" in counts
