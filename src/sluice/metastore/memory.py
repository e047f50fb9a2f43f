"""The in-process coordination store: one session on an in-memory :class:`DataTree`.

:class:`InProcessStore` behaves like :class:`~sluice.metastore.zookeeper.ZooKeeperStore`.
A single-node broker uses ``InProcessStore()`` (a private tree); an in-process cluster
opens one store per broker on a shared tree (``InProcessStore(tree)``). Session
timeouts follow the tree's clock: with a :class:`~sluice.base.clock.ManualClock`, advance
it and call :meth:`DataTree.expire_timed_out_sessions`.

Watch callbacks and session listeners run on the thread that caused them (the one
that changed the znode, or expired the session), after the tree's lock is released.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from sluice.base.clock import Clock

from .data_tree import DataTree
from .errors import SessionClosedError
from .store import CreateMode, Op, OpResult, SessionListener, Stat, Watcher

__all__ = ["InProcessStore"]

log = logging.getLogger(__name__)


class InProcessStore:
    """One session on a :class:`DataTree`: the in-process :class:`CoordinationStore`."""

    def __init__(
        self,
        tree: DataTree | None = None,
        *,
        clock: Clock | None = None,
        session_timeout_ms: int = 18_000,
    ) -> None:
        self.tree = tree if tree is not None else DataTree(clock)
        self._timeout_ms = session_timeout_ms
        self._lock = threading.Lock()
        self._listeners: list[SessionListener] = []
        self._closed = False
        self._session_id = self.tree.open_session(session_timeout_ms, self._on_expired)

    @property
    def session_id(self) -> int:
        return self._session_id

    def _sid(self) -> int:
        if self._closed:
            raise SessionClosedError("store is closed")
        return self._session_id

    def create(self, path: str, data: bytes = b"", mode: CreateMode = CreateMode.PERSISTENT) -> str:
        return self.tree.create(self._sid(), path, data, mode)

    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]:
        return self.tree.get(self._sid(), path, watch)

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        return self.tree.set(self._sid(), path, data, version)

    def delete(self, path: str, version: int = -1) -> None:
        self.tree.delete(self._sid(), path, version)

    def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        return self.tree.exists(self._sid(), path, watch)

    def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        return self.tree.get_children(self._sid(), path, watch)

    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        return self.tree.multi(self._sid(), ops)

    def heartbeat(self) -> None:
        """Keep the session alive without doing anything (a ZooKeeper ping)."""
        self.tree.touch(self._sid())

    def add_session_listener(self, listener: SessionListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def expire_session(self) -> None:
        self.tree.expire_session(self._sid())

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.tree.close_session(self._session_id)

    def _on_expired(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._session_id = self.tree.open_session(self._timeout_ms, self._on_expired)
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener()
            except Exception:
                log.exception("session listener failed")

    def __enter__(self) -> InProcessStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
