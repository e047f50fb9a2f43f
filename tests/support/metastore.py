"""Coordination-store tests: store factories, unique znodes, watch-event sinks and a
barrier that waits for a session's events to be delivered."""

from __future__ import annotations

import queue
import uuid
from collections.abc import Callable

from sluice.metastore import CoordinationStore, EventType, WatchedEvent

WAIT_S = 20.0

StoreFactory = Callable[[], CoordinationStore]


def unique_base() -> str:
    return f"/t-{uuid.uuid4().hex[:12]}"


class EventSink:
    """Collects watch events (from any thread) and waits for them with a deadline."""

    def __init__(self) -> None:
        self.events: queue.Queue[WatchedEvent] = queue.Queue()

    def __call__(self, event: WatchedEvent) -> None:
        self.events.put(event)

    def next(self, timeout_s: float = WAIT_S) -> WatchedEvent:
        try:
            return self.events.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"no watch event within {timeout_s}s") from None

    def drained(self) -> list[WatchedEvent]:
        out = []
        while True:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                return out


def barrier(store: CoordinationStore, base: str) -> None:
    """Wait until every watch event ``store`` caused so far has been delivered.

    Watch events of one session arrive in order, so once a fresh watch on a fresh
    znode has fired, all earlier events of that session have fired too.
    """
    path = f"{base}/barrier-{uuid.uuid4().hex[:8]}"
    sink = EventSink()
    store.exists(path, watch=sink)
    store.create(path)
    event = sink.next()
    assert event.type is EventType.NODE_CREATED
    store.delete(path)
