"""InProcessStore specifics: ManualClock-driven session timeouts and synchronous delivery."""

from __future__ import annotations

from sluice.base.clock import ManualClock
from sluice.metastore import (
    CreateMode,
    DataTree,
    EventType,
    InProcessStore,
    WatchedEvent,
)


def test_idle_sessions_time_out_on_the_tree_clock() -> None:
    clock = ManualClock(0)
    tree = DataTree(clock)
    idle = InProcessStore(tree, session_timeout_ms=1_000)
    busy = InProcessStore(tree, session_timeout_ms=1_000)
    renewed: list[int] = []
    idle.add_session_listener(lambda: renewed.append(idle.session_id))
    idle.create("/idle", mode=CreateMode.EPHEMERAL)
    busy.create("/busy", mode=CreateMode.EPHEMERAL)
    old = idle.session_id

    clock.advance(600)
    busy.heartbeat()
    assert tree.expire_timed_out_sessions() == []
    clock.advance(600)
    busy.exists("/")  # any request counts as a heartbeat
    assert tree.expire_timed_out_sessions() == [old]

    assert renewed == [idle.session_id] and idle.session_id != old
    assert idle.exists("/idle") is None
    assert busy.exists("/busy") is not None
    assert sorted(tree.session_ids()) == sorted([idle.session_id, busy.session_id])


def test_watches_are_delivered_before_the_change_returns() -> None:
    store = InProcessStore()
    seen: list[WatchedEvent] = []
    store.exists("/x", watch=seen.append)
    store.create("/x")
    assert seen == [WatchedEvent(EventType.NODE_CREATED, "/x")]


def test_a_watch_callback_may_call_the_store() -> None:
    store = InProcessStore()
    store.create("/x", b"0")
    values: list[bytes] = []

    def rewatch(event: WatchedEvent) -> None:
        values.append(store.get(event.path, watch=rewatch)[0])

    store.get("/x", watch=rewatch)
    for value in (b"1", b"2", b"3"):
        store.set("/x", value)
    assert values == [b"1", b"2", b"3"]


def test_a_failing_watch_callback_does_not_break_the_writer() -> None:
    store = InProcessStore()

    def boom(event: WatchedEvent) -> None:
        raise RuntimeError("boom")

    store.exists("/x", watch=boom)
    assert store.create("/x") == "/x"


def test_the_root_looks_like_zookeeper() -> None:
    store = InProcessStore()
    assert store.get_children("/") == ["zookeeper"]
    assert store.get_children("/zookeeper") == ["config", "quota"]
