"""Waiting on a condition with a deadline, the one way tests wait (never a bare sleep).

Like Kafka's ``TestUtils.waitForCondition``: the condition is polled until it returns
something truthy, which is returned; an exception raised by the condition counts as "not
yet" (a client asked too early, a broker still starting) and is reported, chained, when
the deadline passes. Polls start 1 ms apart and back off to ``MAX_PAUSE_S``, so a quick
condition is seen at once and a costly one (a new client per try) is not hammered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from typing import TypeVar

T = TypeVar("T")

FIRST_PAUSE_S = 0.001
MAX_PAUSE_S = 0.05


def wait_until(
    condition: Callable[[], T], timeout_s: float = 30.0, message: str = "the condition"
) -> T:
    """Poll ``condition`` until it returns something truthy and return that; fail the test
    (AssertionError) naming ``message`` once ``timeout_s`` has passed."""
    polls = _polls(condition, timeout_s, message)
    while True:
        try:
            pause = next(polls)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        time.sleep(pause)


async def wait_until_async(
    condition: Callable[[], T], timeout_s: float = 30.0, message: str = "the condition"
) -> T:
    """:func:`wait_until` for a test running on an event loop: the loop keeps running (a
    server under test on it makes progress) between polls."""
    polls = _polls(condition, timeout_s, message)
    while True:
        try:
            pause = next(polls)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        await asyncio.sleep(pause)


def _polls(condition: Callable[[], T], timeout_s: float, message: str) -> Generator[float, None, T]:
    """Check ``condition``; yield how long to pause before the next check, return its
    truthy value, or raise once the deadline has passed."""
    deadline = time.monotonic() + timeout_s
    pause = FIRST_PAUSE_S
    last: Exception | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:
            last = exc
        if time.monotonic() > deadline:
            detail = f" (last error: {last!r})" if last is not None else ""
            raise AssertionError(
                f"timed out after {timeout_s}s waiting for {message}{detail}"
            ) from last
        yield pause
        pause = min(pause * 2, MAX_PAUSE_S)
