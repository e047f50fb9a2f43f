"""The coordination-store contract, run against InProcessStore and a real ZooKeeper."""

from __future__ import annotations

import threading

import pytest

from sluice.metastore import (
    BadArgumentsError,
    BadVersionError,
    CheckOp,
    CreateMode,
    CreateOp,
    DeleteOp,
    EventType,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionClosedError,
    SetDataOp,
    Stat,
    WatchedEvent,
)
from support.metastore import EventSink, StoreFactory, barrier


def test_create_get_set_delete_with_versions(store_factory: StoreFactory, base: str) -> None:
    store = store_factory()
    path = f"{base}/node"
    assert store.exists(path) is None
    assert store.create(path, b"one") == path
    data, stat = store.get(path)
    assert (data, stat.version, stat.ephemeral_owner, stat.data_length) == (b"one", 0, 0, 3)
    assert stat.czxid == stat.mzxid
    stat1 = store.set(path, b"two", version=0)
    assert stat1.version == 1 and stat1.mzxid > stat1.czxid and stat1.czxid == stat.czxid
    with pytest.raises(BadVersionError) as excinfo:
        store.set(path, b"three", version=0)
    assert excinfo.value.path == path
    assert store.get(path)[0] == b"two"
    assert store.set(path, b"three").version == 2  # -1: any version
    with pytest.raises(BadVersionError):
        store.delete(path, version=1)
    store.delete(path, version=2)
    assert store.exists(path) is None
    with pytest.raises(NoNodeError):
        store.get(path)
    with pytest.raises(NoNodeError):
        store.set(path, b"x")
    with pytest.raises(NoNodeError):
        store.delete(path)


def test_create_errors(store_factory: StoreFactory, base: str) -> None:
    store = store_factory()
    store.create(f"{base}/a")
    with pytest.raises(NodeExistsError):
        store.create(f"{base}/a")
    with pytest.raises(NoNodeError):
        store.create(f"{base}/missing/child")
    store.create(f"{base}/a/b")
    with pytest.raises(NotEmptyError):
        store.delete(f"{base}/a")
    store.create(f"{base}/eph", mode=CreateMode.EPHEMERAL)
    with pytest.raises(NoChildrenForEphemeralsError):
        store.create(f"{base}/eph/child")
    for bad in ("relative", f"{base}/", f"{base}//x", f"{base}/./x"):
        with pytest.raises(BadArgumentsError):
            store.create(bad)


def test_children_are_sorted_and_counted(store_factory: StoreFactory, base: str) -> None:
    store = store_factory()
    for name in ("c", "a", "b"):
        store.create(f"{base}/{name}")
    assert store.get_children(base) == ["a", "b", "c"]
    stat = store.exists(base)
    assert stat is not None and stat.num_children == 3 and stat.cversion == 3
    store.delete(f"{base}/b")
    stat = store.exists(base)
    assert stat is not None and stat.num_children == 2 and stat.cversion == 4
    with pytest.raises(NoNodeError):
        store.get_children(f"{base}/missing")


def test_sequential_nodes(store_factory: StoreFactory, base: str) -> None:
    store = store_factory()
    store.create(f"{base}/q")
    first = store.create(f"{base}/q/item-", b"1", CreateMode.PERSISTENT_SEQUENTIAL)
    second = store.create(f"{base}/q/item-", b"2", CreateMode.EPHEMERAL_SEQUENTIAL)
    store.create(f"{base}/q/other")
    third = store.create(f"{base}/q/item-", b"3", CreateMode.PERSISTENT_SEQUENTIAL)
    assert first == f"{base}/q/item-0000000000"
    assert second == f"{base}/q/item-0000000001"
    assert third == f"{base}/q/item-0000000003"  # the parent's counter counts every child
    assert store.get_children(f"{base}/q") == [
        "item-0000000000",
        "item-0000000001",
        "item-0000000003",
        "other",
    ]
    assert store.get(second)[1].ephemeral_owner == store.session_id


def test_ephemeral_nodes_vanish_when_the_session_closes(
    store_factory: StoreFactory, base: str
) -> None:
    owner, observer = store_factory(), store_factory()
    path = f"{base}/eph"
    owner.create(path, b"me", CreateMode.EPHEMERAL)
    stat = observer.exists(path)
    assert stat is not None and stat.ephemeral_owner == owner.session_id != 0
    sink = EventSink()
    observer.exists(path, watch=sink)
    owner.close()
    assert sink.next() == WatchedEvent(EventType.NODE_DELETED, path)
    assert observer.exists(path) is None
    with pytest.raises(SessionClosedError):
        owner.get(base)
    owner.close()  # twice is fine


def test_ephemeral_nodes_and_watches_vanish_when_the_session_expires(
    store_factory: StoreFactory, base: str
) -> None:
    owner, observer = store_factory(), store_factory()
    renewed = threading.Event()
    owner.add_session_listener(renewed.set)
    path = f"{base}/eph"
    owner.create(path, mode=CreateMode.EPHEMERAL)
    owner.create(f"{base}/watched")
    stale = EventSink()
    owner.get(f"{base}/watched", watch=stale)
    observed = EventSink()
    observer.exists(path, watch=observed)
    old_session = owner.session_id

    owner.expire_session()

    assert renewed.wait(20), "the session listener was not called"
    assert observed.next() == WatchedEvent(EventType.NODE_DELETED, path)
    assert owner.session_id not in (0, old_session)
    assert owner.exists(path) is None
    owner.create(path, mode=CreateMode.EPHEMERAL)  # the new session works
    assert owner.get(path)[1].ephemeral_owner == owner.session_id
    owner.set(f"{base}/watched", b"changed")
    barrier(owner, base)
    assert stale.drained() == []  # the old session's watch is gone


def test_data_watches_fire_once(store_factory: StoreFactory, base: str) -> None:
    store, writer = store_factory(), store_factory()
    path = f"{base}/w"
    sink = EventSink()
    assert store.exists(path, watch=sink) is None
    writer.create(path)
    assert sink.next() == WatchedEvent(EventType.NODE_CREATED, path)
    store.get(path, watch=sink)
    store.get(path, watch=sink)  # the same watcher twice: one watch
    writer.set(path, b"1")
    writer.set(path, b"2")
    assert sink.next() == WatchedEvent(EventType.NODE_DATA_CHANGED, path)
    store.exists(path, watch=sink)
    writer.delete(path)
    assert sink.next() == WatchedEvent(EventType.NODE_DELETED, path)
    barrier(store, base)
    assert sink.drained() == []


def test_child_watches_fire_once(store_factory: StoreFactory, base: str) -> None:
    store, writer = store_factory(), store_factory()
    parent = f"{base}/p"
    writer.create(parent)
    sink = EventSink()
    assert store.get_children(parent, watch=sink) == []
    writer.create(f"{parent}/a")
    writer.create(f"{parent}/b")
    writer.set(parent, b"data changes do not fire child watches")
    assert sink.next() == WatchedEvent(EventType.NODE_CHILDREN_CHANGED, parent)
    assert store.get_children(parent, watch=sink) == ["a", "b"]
    writer.delete(f"{parent}/a")
    assert sink.next() == WatchedEvent(EventType.NODE_CHILDREN_CHANGED, parent)
    store.get_children(parent, watch=sink)
    writer.delete(f"{parent}/b")
    assert sink.next() == WatchedEvent(EventType.NODE_CHILDREN_CHANGED, parent)
    store.get_children(parent, watch=sink)
    writer.delete(parent)
    assert sink.next() == WatchedEvent(EventType.NODE_DELETED, parent)
    barrier(store, base)
    assert sink.drained() == []


def test_multi_applies_everything(store_factory: StoreFactory, base: str) -> None:
    store = store_factory()
    store.create(f"{base}/epoch", b"1")
    store.create(f"{base}/old")
    sink = EventSink()
    store.get(f"{base}/epoch", watch=sink)
    results = store.multi(
        [
            CheckOp(f"{base}/epoch", 0),
            CreateOp(f"{base}/new", b"n", CreateMode.EPHEMERAL),
            CreateOp(f"{base}/seq-", b"", CreateMode.PERSISTENT_SEQUENTIAL),
            SetDataOp(f"{base}/epoch", b"2", 0),
            DeleteOp(f"{base}/old"),
        ]
    )
    assert results[0] is None and results[4] is None
    assert results[1] == f"{base}/new"
    assert isinstance(results[2], str) and results[2].startswith(f"{base}/seq-")
    assert isinstance(results[3], Stat) and results[3].version == 1
    assert store.get(f"{base}/epoch")[0] == b"2"
    assert store.exists(f"{base}/old") is None
    assert store.get(f"{base}/new")[1].ephemeral_owner == store.session_id
    assert sink.next() == WatchedEvent(EventType.NODE_DATA_CHANGED, f"{base}/epoch")


@pytest.mark.parametrize("failing", ["check", "create", "set", "delete"])
def test_multi_is_all_or_nothing(store_factory: StoreFactory, base: str, failing: str) -> None:
    store = store_factory()
    store.create(f"{base}/epoch", b"1")
    store.create(f"{base}/keep", b"k")
    sink = EventSink()
    store.get(f"{base}/epoch", watch=sink)
    store.get_children(base, watch=sink)
    ops = [
        CheckOp(f"{base}/epoch", 5 if failing == "check" else 0),
        CreateOp(f"{base}/created"),
        SetDataOp(f"{base}/epoch", b"2", 7 if failing == "set" else 0),
        CreateOp(f"{base}/keep" if failing == "create" else f"{base}/created2"),
        DeleteOp(f"{base}/missing" if failing == "delete" else f"{base}/keep"),
    ]
    expected = {"check": (BadVersionError, 0), "set": (BadVersionError, 2)}
    expected |= {"create": (NodeExistsError, 3), "delete": (NoNodeError, 4)}
    error_type, index = expected[failing]
    with pytest.raises(error_type) as excinfo:
        store.multi(ops)
    assert excinfo.value.op_index == index
    assert store.get(f"{base}/epoch")[0] == b"1"
    assert store.get(f"{base}/epoch")[1].version == 0
    assert store.exists(f"{base}/created") is None
    assert store.exists(f"{base}/created2") is None
    assert store.get(f"{base}/keep")[0] == b"k"
    assert store.get_children(base) == ["epoch", "keep"]
    barrier(store, base)  # an aborted transaction fires no watch (the barrier fires the child one)
    events = sink.drained()
    assert all(e.type is EventType.NODE_CHILDREN_CHANGED for e in events), events


def test_conditional_updates_from_racing_threads(store_factory: StoreFactory, base: str) -> None:
    path = f"{base}/counter"
    store_factory().create(path, b"0")
    stores = [store_factory() for _ in range(4)]
    per_thread = 25

    def increment(store: object) -> None:
        assert hasattr(store, "get")
        done = 0
        while done < per_thread:
            data, stat = store.get(path)  # type: ignore[attr-defined]
            try:
                store.set(path, str(int(data) + 1).encode(), stat.version)  # type: ignore[attr-defined]
                done += 1
            except BadVersionError:
                continue

    threads = [threading.Thread(target=increment, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    data, stat = stores[0].get(path)
    assert int(data) == 4 * per_thread == stat.version
