"""ZooKeeper's data tree and session tracker in memory, behind :class:`InProcessStore`.

One :class:`DataTree` stands for one ensemble. It keeps znodes with ZooKeeper's
versions and zxids, one-shot data and child watches per session, ephemeral znodes per
session, and session timeouts measured on its clock. Watch callbacks and expiry hooks
run on the thread that caused them, after the tree's lock is released.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sluice.base.clock import SYSTEM_CLOCK, Clock

from .errors import (
    BadVersionError,
    CoordinationError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionClosedError,
)
from .store import (
    CheckOp,
    CreateMode,
    CreateOp,
    DeleteOp,
    EventType,
    Op,
    OpResult,
    SetDataOp,
    Stat,
    WatchedEvent,
    Watcher,
    validate_path,
)

__all__ = ["DataTree"]

log = logging.getLogger(__name__)

_Notification = tuple[Watcher, WatchedEvent]


@dataclass(slots=True)
class _Znode:
    data: bytes
    czxid: int
    ctime: int
    ephemeral_owner: int
    mzxid: int = 0
    mtime: int = 0
    version: int = 0
    cversion: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> Stat:
        return Stat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            ctime=self.ctime,
            mtime=self.mtime,
            version=self.version,
            cversion=self.cversion,
            ephemeral_owner=self.ephemeral_owner,
            data_length=len(self.data),
            num_children=len(self.children),
        )


@dataclass(slots=True)
class _Session:
    session_id: int
    timeout_ms: int
    last_heard_ms: int
    on_expired: Callable[[], None]
    ephemerals: set[str] = field(default_factory=set)


def _parent(path: str) -> tuple[str, str]:
    head, _, name = path.rpartition("/")
    return (head or "/"), name


class DataTree:
    """A thread-safe in-memory znode tree with ZooKeeper's versions, watches and sessions."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self._lock = threading.RLock()
        self._zxid = 0
        self._next_session_id = 0x100_0000_0000_0001
        self._sessions: dict[int, _Session] = {}
        self._nodes: dict[str, _Znode] = {"/": _Znode(b"", 0, 0, 0)}
        # Watches: path -> ordered set of (session id, watcher).
        self._data_watches: dict[str, dict[tuple[int, Watcher], None]] = {}
        self._child_watches: dict[str, dict[tuple[int, Watcher], None]] = {}
        for path in ("/zookeeper", "/zookeeper/config", "/zookeeper/quota"):
            self._create(0, path, b"", CreateMode.PERSISTENT, [])

    # -- sessions -------------------------------------------------------------------
    def open_session(self, timeout_ms: int, on_expired: Callable[[], None]) -> int:
        """Register a session and return its id; ``on_expired`` runs after an expiry."""
        with self._lock:
            session_id = self._next_session_id
            self._next_session_id += 1
            now = self.clock.hi_res_clock_ms()
            self._sessions[session_id] = _Session(session_id, timeout_ms, now, on_expired)
            return session_id

    def touch(self, session_id: int) -> None:
        """Record that the session's client is alive (a ZooKeeper ping)."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None:
                session.last_heard_ms = self.clock.hi_res_clock_ms()

    def close_session(self, session_id: int) -> None:
        """End a session: delete its ephemeral znodes and drop its watches."""
        self._fire(self._end_session(session_id))

    def expire_session(self, session_id: int) -> None:
        """Expire a session as the ensemble would, then call its expiry hook."""
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            return
        log.info("session 0x%x expired", session_id)
        self._fire(self._end_session(session_id))
        session.on_expired()

    def expire_timed_out_sessions(self) -> list[int]:
        """Expire every session not heard from within its timeout; return their ids."""
        with self._lock:
            now = self.clock.hi_res_clock_ms()
            expired = [
                s.session_id
                for s in self._sessions.values()
                if now - s.last_heard_ms > s.timeout_ms
            ]
        for session_id in expired:
            self.expire_session(session_id)
        return expired

    def session_ids(self) -> list[int]:
        """The ids of the open sessions."""
        with self._lock:
            return sorted(self._sessions)

    def _end_session(self, session_id: int) -> list[_Notification]:
        notes: list[_Notification] = []
        with self._lock:
            session = self._sessions.pop(session_id, None)
            if session is None:
                return notes
            for table in (self._data_watches, self._child_watches):
                for path in list(table):
                    watchers = table[path]
                    for key in [k for k in watchers if k[0] == session_id]:
                        del watchers[key]
                    if not watchers:
                        del table[path]
            triggers: list[tuple[str, EventType]] = []
            self._zxid += 1
            for path in sorted(session.ephemerals, reverse=True):
                if path in self._nodes:
                    self._delete(session_id, path, -1, triggers)
            notes = self._resolve(triggers)
        return notes

    # -- operations (called by InProcessStore) --------------------------------------
    def create(self, session_id: int, path: str, data: bytes, mode: CreateMode) -> str:
        created = self._single(session_id, CreateOp(path, data, mode))
        assert isinstance(created, str)
        return created

    def set(self, session_id: int, path: str, data: bytes, version: int) -> Stat:
        stat = self._single(session_id, SetDataOp(path, data, version))
        assert isinstance(stat, Stat)
        return stat

    def delete(self, session_id: int, path: str, version: int) -> None:
        self._single(session_id, DeleteOp(path, version))

    def get(self, session_id: int, path: str, watch: Watcher | None) -> tuple[bytes, Stat]:
        validate_path(path)
        with self._lock:
            self._check_session(session_id)
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path=path)
            if watch is not None:
                self._data_watches.setdefault(path, {})[(session_id, watch)] = None
            return node.data, node.stat()

    def exists(self, session_id: int, path: str, watch: Watcher | None) -> Stat | None:
        validate_path(path)
        with self._lock:
            self._check_session(session_id)
            if watch is not None:
                self._data_watches.setdefault(path, {})[(session_id, watch)] = None
            node = self._nodes.get(path)
            return None if node is None else node.stat()

    def get_children(self, session_id: int, path: str, watch: Watcher | None) -> list[str]:
        validate_path(path)
        with self._lock:
            self._check_session(session_id)
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path=path)
            if watch is not None:
                self._child_watches.setdefault(path, {})[(session_id, watch)] = None
            return sorted(node.children)

    def multi(self, session_id: int, ops: Sequence[Op]) -> list[OpResult]:
        """Apply ``ops`` atomically: on the first failure undo the applied ones and raise."""
        with self._lock:
            self._check_session(session_id)
            triggers: list[tuple[str, EventType]] = []
            undo: list[Callable[[], None]] = []
            results: list[OpResult] = []
            self._zxid += 1
            for index, op in enumerate(ops):
                try:
                    validate_path(op.path)
                    results.append(self._apply(session_id, op, triggers, undo))
                except CoordinationError as exc:
                    for step in reversed(undo):
                        step()
                    exc.op_index = index
                    raise
            notes = self._resolve(triggers)
        self._fire(notes)
        return results

    # -- internals ------------------------------------------------------------------
    def _single(self, session_id: int, op: Op) -> OpResult:
        try:
            return self.multi(session_id, [op])[0]
        except CoordinationError as exc:
            exc.op_index = None
            raise

    def _check_session(self, session_id: int) -> None:
        if session_id not in self._sessions:
            raise SessionClosedError("session is not open")
        self._sessions[session_id].last_heard_ms = self.clock.hi_res_clock_ms()

    def _apply(
        self,
        session_id: int,
        op: Op,
        triggers: list[tuple[str, EventType]],
        undo: list[Callable[[], None]],
    ) -> OpResult:
        if isinstance(op, CheckOp):
            node = self._nodes.get(op.path)
            if node is None:
                raise NoNodeError(path=op.path)
            if op.version != -1 and node.version != op.version:
                raise BadVersionError(path=op.path)
            return None
        if isinstance(op, CreateOp):
            return self._create(session_id, op.path, op.data, op.mode, triggers, undo)
        if isinstance(op, SetDataOp):
            node = self._nodes.get(op.path)
            if node is None:
                raise NoNodeError(path=op.path)
            if op.version != -1 and node.version != op.version:
                raise BadVersionError(path=op.path)
            saved = (node.data, node.version, node.mzxid, node.mtime)
            node.data, node.version = op.data, node.version + 1
            node.mzxid, node.mtime = self._zxid, self.clock.milliseconds()

            def restore(node: _Znode = node) -> None:
                node.data, node.version, node.mzxid, node.mtime = saved

            undo.append(restore)
            triggers.append((op.path, EventType.NODE_DATA_CHANGED))
            return node.stat()
        self._delete(session_id, op.path, op.version, triggers, undo)
        return None

    def _create(
        self,
        session_id: int,
        path: str,
        data: bytes,
        mode: CreateMode,
        triggers: list[tuple[str, EventType]],
        undo: list[Callable[[], None]] | None = None,
    ) -> str:
        parent_path = _parent(path)[0]
        parent = self._nodes.get(parent_path)
        if parent is None:
            raise NoNodeError(path=parent_path)
        if parent.ephemeral_owner:
            raise NoChildrenForEphemeralsError(path=parent_path)
        if mode.sequential:
            path = f"{path}{parent.cversion:010d}"
        if path in self._nodes:
            raise NodeExistsError(path=path)
        now = self.clock.milliseconds()  # ctime and mtime: wall time, as ZooKeeper
        owner = session_id if mode.ephemeral else 0
        self._nodes[path] = _Znode(data, self._zxid, now, owner, self._zxid, now)
        name = _parent(path)[1]
        parent.children.add(name)
        parent.cversion += 1
        if owner:
            self._sessions[owner].ephemerals.add(path)

        def remove() -> None:
            del self._nodes[path]
            parent.children.discard(name)
            parent.cversion -= 1
            if owner and owner in self._sessions:
                self._sessions[owner].ephemerals.discard(path)

        if undo is not None:
            undo.append(remove)
        triggers.append((path, EventType.NODE_CREATED))
        triggers.append((parent_path, EventType.NODE_CHILDREN_CHANGED))
        return path

    def _delete(
        self,
        session_id: int,
        path: str,
        version: int,
        triggers: list[tuple[str, EventType]],
        undo: list[Callable[[], None]] | None = None,
    ) -> None:
        node = self._nodes.get(path)
        if node is None or path == "/":
            raise NoNodeError(path=path)
        if version != -1 and node.version != version:
            raise BadVersionError(path=path)
        if node.children:
            raise NotEmptyError(path=path)
        parent_path, name = _parent(path)
        parent = self._nodes[parent_path]
        del self._nodes[path]
        parent.children.discard(name)
        parent.cversion += 1
        owner_session = self._sessions.get(node.ephemeral_owner)
        if owner_session is not None:
            owner_session.ephemerals.discard(path)

        def restore() -> None:
            self._nodes[path] = node
            parent.children.add(name)
            parent.cversion -= 1
            if owner_session is not None:
                owner_session.ephemerals.add(path)

        if undo is not None:
            undo.append(restore)
        triggers.append((path, EventType.NODE_DELETED))
        triggers.append((parent_path, EventType.NODE_CHILDREN_CHANGED))

    def _resolve(self, triggers: list[tuple[str, EventType]]) -> list[_Notification]:
        notes: list[_Notification] = []
        for path, kind in triggers:
            tables = {
                EventType.NODE_CREATED: (self._data_watches,),
                EventType.NODE_DATA_CHANGED: (self._data_watches,),
                EventType.NODE_DELETED: (self._data_watches, self._child_watches),
                EventType.NODE_CHILDREN_CHANGED: (self._child_watches,),
            }[kind]
            event = WatchedEvent(kind, path)
            for table in tables:
                for _, watcher in table.pop(path, {}):
                    notes.append((watcher, event))
        return notes

    @staticmethod
    def _fire(notes: list[_Notification]) -> None:
        for watcher, event in notes:
            try:
                watcher(event)
            except Exception:
                log.exception("watch callback failed for %s %s", event.type.name, event.path)
