"""Helpers shared by the coordination and controller tests: store factories, event sinks."""

from __future__ import annotations

import queue
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from sluice.metastore import CoordinationStore, EventType, WatchedEvent
from sluice.metastore.zk_server import (
    ZooKeeperServer,
    find_java,
    find_zookeeper_classpath,
)

WAIT_S = 20.0

StoreFactory = Callable[[], CoordinationStore]


@contextmanager
def zookeeper_or_skip() -> Iterator[ZooKeeperServer]:
    """Start a throwaway ZooKeeper, or skip (with the reason) if it is not installed."""
    pytest.importorskip("kazoo", reason="kazoo is not installed (pip install kazoo)")
    if find_zookeeper_classpath() is None or find_java() is None:
        pytest.skip(
            "ZooKeeper not found: install Debian's 'zookeeper' package "
            "(apt-get install zookeeper; scripts/setup.sh does it) "
            "or set SLUICE_ZOOKEEPER_CLASSPATH"
        )
    server = ZooKeeperServer().start()
    try:
        yield server
    finally:
        server.stop()


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
