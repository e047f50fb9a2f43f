"""Log lines for events a client can cause, bounded however often it causes them.

A broker's log is for its operators: a client sending malformed requests, opening
connections past a limit or tripping a bug must not be able to grow it without bound.
:class:`RateLimitedLog` writes each event at DEBUG (with who and what, for someone
looking into one client) and, per *kind* of event, at most one line per interval at
the level given (WARNING by default) that counts what happened since the last one::

    rejected request from 127.0.0.1:53712: non-nullable field topics was serialized
    as null (further ones are counted: at most one line per 10 s)
    rejected request: 37 from 4 clients in the last 10.2 s; latest from
    127.0.0.1:53790: request body truncated

The first event of a kind (and the first after a quiet interval) is written at once, so
a quiet broker shows the first sign of trouble; the events after it are counted, and
written when the next one comes after the interval or when :meth:`RateLimitedLog.flush`
is called (the owner's housekeeping or shutdown). Kinds are the caller's fixed strings,
never client data, so the state stays bounded; so does the set of clients counted per
kind. An event may carry a traceback (``exc_info``), written with its kind's line only:
one traceback per interval and kind.
"""

from __future__ import annotations

import logging
import threading
from typing import Final

from sluice.base.clock import SYSTEM_CLOCK, Clock

__all__ = ["RateLimitedLog"]

MAX_CLIENTS_COUNTED: Final = 1024
"""Distinct clients remembered per kind and interval; beyond it the count says "or more"."""

_ExcInfo = BaseException | None


class _Kind:
    __slots__ = ("clients", "count", "latest", "level", "next_ms", "since_ms")

    def __init__(self, now_ms: int, level: int) -> None:
        self.level = level
        self.count = 0  # events not written yet
        self.clients: set[str] = set()
        self.latest = ("", "")  # (client, detail) of the latest event
        self.since_ms = now_ms  # when counting began
        self.next_ms = now_ms  # when a line may be written next


class RateLimitedLog:
    """Client-caused events of ``logger``: each at DEBUG, per kind at most one line at
    ``level`` per ``interval_ms``, with counts. Safe to call from any thread."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval_ms: int = 10_000,
        level: int = logging.WARNING,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.logger = logger
        self.interval_ms = interval_ms
        self.level = level
        self._clock = clock
        self._kinds: dict[str, _Kind] = {}
        self._lock = threading.Lock()

    def event(
        self,
        kind: str,
        client: str,
        detail: object,
        *,
        exc_info: _ExcInfo = None,
        level: int | None = None,
    ) -> None:
        """One event of ``kind`` (a fixed phrase such as "rejected request") caused by
        ``client`` (an address), with ``detail`` (shortened to 200 characters);
        ``level``, given with a kind's first event, overrides the default for its lines."""
        text = _shorten(str(detail))
        self.logger.debug("%s from %s: %s", kind, client, text)
        now = self._clock.hi_res_clock_ms()
        with self._lock:
            state = self._kinds.get(kind)
            if state is None:
                state = self._kinds[kind] = _Kind(now, self.level if level is None else level)
            state.count += 1
            if len(state.clients) < MAX_CLIENTS_COUNTED:
                state.clients.add(client)
            state.latest = (client, text)
            if now < state.next_ms:
                return
            line = self._take(kind, state, now)
            level = state.level
        self.logger.log(level, "%s", line, exc_info=exc_info)

    def flush(self) -> None:
        """Write the counts not written yet, whatever the interval."""
        now = self._clock.hi_res_clock_ms()
        with self._lock:
            lines = [
                (state.level, self._take(kind, state, now))
                for kind, state in self._kinds.items()
                if state.count
            ]
        for level, line in lines:
            self.logger.log(level, "%s", line)

    def pending(self, kind: str) -> int:
        """Events of ``kind`` counted but not written yet."""
        with self._lock:
            state = self._kinds.get(kind)
            return 0 if state is None else state.count

    def _take(self, kind: str, state: _Kind, now: int) -> str:
        """The line for ``state``'s counted events, which are then forgotten (lock held):
        a lone event as itself, several as counts."""
        client, text = state.latest
        if state.count == 1:
            seconds = self.interval_ms / 1000
            line = (
                f"{kind} from {client}: {text} "
                f"(further ones are counted: at most one line per {seconds:g} s)"
            )
        else:
            clients = len(state.clients)
            more = " or more" if clients >= MAX_CLIENTS_COUNTED else ""
            line = (
                f"{kind}: {state.count} from {clients}{more} "
                f"client{'' if clients == 1 else 's'} in the last "
                f"{(now - state.since_ms) / 1000:.1f} s; latest from {client}: {text}"
            )
        state.count = 0
        state.clients.clear()
        state.since_ms = now
        state.next_ms = now + self.interval_ms
        return line


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
