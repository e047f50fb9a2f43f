"""The coordination store over a real ZooKeeper ensemble, through kazoo.

:class:`ZooKeeperStore` wraps one :class:`kazoo.client.KazooClient` (one session) and
gives it the :class:`~sluice.metastore.store.CoordinationStore` behaviour that
:class:`~sluice.metastore.memory.InProcessStore` has: kazoo exceptions become the
interface's errors, watch events become :class:`WatchedEvent`, transactions report the
failing operation, and after a session expiry kazoo's new session is announced to the
session listeners (on kazoo's callback thread, like watch callbacks).

kazoo drops all watches when the *connection* is lost even if the session survives;
such a watch is reported as a change (data changed / children changed) so that the
owner re-reads and re-watches, which is what every Kafka handler does anyway.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from kazoo import exceptions as kz  # type: ignore[import-untyped]
from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.protocol.states import Callback, KazooState  # type: ignore[import-untyped]
from kazoo.retry import KazooRetry  # type: ignore[import-untyped]

from .errors import (
    BadArgumentsError,
    BadVersionError,
    ConnectionLossError,
    CoordinationError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionClosedError,
    SessionExpiredError,
)
from .store import (
    CheckOp,
    CreateMode,
    CreateOp,
    EventType,
    Op,
    OpResult,
    SessionListener,
    SetDataOp,
    Stat,
    WatchedEvent,
    Watcher,
    ensure_path,
    validate_path,
)

__all__ = ["ZooKeeperStore"]

log = logging.getLogger(__name__)

# Most specific first: kazoo's ConnectionClosedError is a SessionExpiredError.
_ERROR_MAP: tuple[tuple[type[Exception], type[CoordinationError]], ...] = (
    (kz.NoNodeError, NoNodeError),
    (kz.NodeExistsError, NodeExistsError),
    (kz.BadVersionError, BadVersionError),
    (kz.NotEmptyError, NotEmptyError),
    (kz.NoChildrenForEphemeralsError, NoChildrenForEphemeralsError),
    (kz.BadArgumentsError, BadArgumentsError),
    (kz.ConnectionClosedError, SessionClosedError),
    (kz.SessionExpiredError, SessionExpiredError),
    (kz.ConnectionLoss, ConnectionLossError),
    (kz.OperationTimeoutError, ConnectionLossError),
)
_CLOSED_STATES = frozenset({"EXPIRED_SESSION", "CLOSED", "AUTH_FAILED"})
_EVENT_TYPES = {
    "CREATED": EventType.NODE_CREATED,
    "DELETED": EventType.NODE_DELETED,
    "CHANGED": EventType.NODE_DATA_CHANGED,
    "CHILD": EventType.NODE_CHILDREN_CHANGED,
}


def _translate(exc: BaseException, path: str | None) -> CoordinationError:
    for kazoo_type, ours in _ERROR_MAP:
        if isinstance(exc, kazoo_type):
            return ours(path=path)
    return CoordinationError(f"{type(exc).__name__}: {exc}", path=path)


def _stat(zstat: Any) -> Stat:
    return Stat(
        czxid=zstat.czxid,
        mzxid=zstat.mzxid,
        ctime=zstat.ctime,
        mtime=zstat.mtime,
        version=zstat.version,
        cversion=zstat.cversion,
        ephemeral_owner=zstat.ephemeralOwner,
        data_length=zstat.dataLength,
        num_children=zstat.numChildren,
    )


class _WatchAdapter:
    """A kazoo watch function for one of our watchers; equal adapters dedupe in kazoo."""

    __slots__ = ("callback", "kind", "path", "session_id", "store")

    def __init__(self, store: ZooKeeperStore, callback: Watcher, kind: str, path: str) -> None:
        self.store = store
        self.callback = callback
        self.kind = kind
        self.path = path
        self.session_id = store.session_id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _WatchAdapter) and (
            (self.callback, self.kind, self.path) == (other.callback, other.kind, other.path)
        )

    def __hash__(self) -> int:
        return hash((self.callback, self.kind, self.path))

    def __call__(self, event: Any) -> None:
        kind = _EVENT_TYPES.get(event.type)
        if kind is not None:
            self.fire(kind)
        elif event.state not in _CLOSED_STATES:
            # kazoo dropped the watch on a connection loss: report a change once the
            # session is known to have survived (see ZooKeeperStore._watch_lost).
            self.store._watch_lost(self)

    def fire(self, kind: EventType | None = None) -> None:
        if kind is None:
            data = self.kind == "data"
            kind = EventType.NODE_DATA_CHANGED if data else EventType.NODE_CHILDREN_CHANGED
        try:
            self.callback(WatchedEvent(kind, self.path))
        except Exception:
            log.exception("watch callback failed for %s %s", kind.name, self.path)


def _split_chroot(hosts: str) -> tuple[str, str]:
    server_list, slash, chroot = hosts.partition("/")
    return server_list, (slash + chroot).rstrip("/")


class ZooKeeperStore:
    """One ZooKeeper session through kazoo: the ensemble-backed :class:`CoordinationStore`.

    ``hosts`` is Kafka's ``zookeeper.connect`` (``host:port[,host:port][/chroot]``);
    a missing chroot is created first, as Kafka does.
    """

    def __init__(
        self,
        hosts: str,
        *,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int | None = None,
        request_timeout_ms: int = 30_000,
    ) -> None:
        self.hosts = hosts
        self._session_timeout_ms = session_timeout_ms
        self._connect_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000
        self._request_timeout_s = request_timeout_ms / 1000
        self._cond = threading.Condition()
        self._listeners: list[SessionListener] = []
        self._closing = False
        self._lost = False
        self._renewals = 0
        self._parked: list[_WatchAdapter] = []
        server_list, chroot = _split_chroot(hosts)
        if chroot:
            with ZooKeeperStore(server_list, session_timeout_ms=session_timeout_ms) as root:
                ensure_path(root, chroot)
        self._client = self._new_client(hosts)
        self._client.add_listener(self._on_state)
        try:
            self._client.start(timeout=self._connect_timeout_s)
        except Exception as exc:
            self._client.close()
            raise ConnectionLossError(f"cannot connect to ZooKeeper at {hosts}: {exc}") from exc

    def _new_client(self, hosts: str, client_id: tuple[int, bytes] | None = None) -> Any:
        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0)
        return KazooClient(
            hosts=hosts,
            timeout=self._session_timeout_ms / 1000,
            client_id=client_id,
            connection_retry=retry,
        )

    # -- the interface --------------------------------------------------------------
    @property
    def session_id(self) -> int:
        client_id = self._client.client_id
        return int(client_id[0]) if client_id else 0

    def _wait(self, async_result: Any, path: str | None) -> Any:
        try:
            return async_result.get(timeout=self._request_timeout_s)
        except kz.KazooException as exc:
            raise _translate(exc, path) from exc
        except self._client.handler.timeout_exception as exc:
            raise ConnectionLossError("request timed out", path=path) from exc

    def _read(self, start: Callable[[], Any], path: str) -> Any:
        """Run a read, retrying it after a connection loss once reconnected (reads are
        idempotent; Kafka's client retries every request until connected)."""
        deadline = time.monotonic() + self._request_timeout_s
        while True:
            try:
                return self._wait(start(), path)
            except ConnectionLossError:
                with self._cond:
                    while not self._client.connected and not self._closing:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            raise
                        self._cond.wait(remaining)
                if self._closing or time.monotonic() > deadline:
                    raise

    def create(self, path: str, data: bytes = b"", mode: CreateMode = CreateMode.PERSISTENT) -> str:
        validate_path(path)
        created = self._wait(
            self._client.create_async(
                path, data, ephemeral=mode.ephemeral, sequence=mode.sequential
            ),
            path,
        )
        return str(created)

    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]:
        validate_path(path)
        adapter = None if watch is None else _WatchAdapter(self, watch, "data", path)
        data, zstat = self._read(lambda: self._client.get_async(path, watch=adapter), path)
        return bytes(data or b""), _stat(zstat)

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        validate_path(path)
        return _stat(self._wait(self._client.set_async(path, data, version), path))

    def delete(self, path: str, version: int = -1) -> None:
        validate_path(path)
        self._wait(self._client.delete_async(path, version), path)

    def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        validate_path(path)
        adapter = None if watch is None else _WatchAdapter(self, watch, "data", path)
        zstat = self._read(lambda: self._client.exists_async(path, watch=adapter), path)
        return None if zstat is None else _stat(zstat)

    def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        validate_path(path)
        adapter = None if watch is None else _WatchAdapter(self, watch, "child", path)
        children = self._read(lambda: self._client.get_children_async(path, watch=adapter), path)
        return sorted(children)

    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        txn = self._client.transaction()
        for index, op in enumerate(ops):
            try:
                validate_path(op.path)
            except CoordinationError as exc:
                exc.op_index = index
                raise
            if isinstance(op, CheckOp):
                txn.check(op.path, op.version)
            elif isinstance(op, CreateOp):
                txn.create(
                    op.path, op.data, ephemeral=op.mode.ephemeral, sequence=op.mode.sequential
                )
            elif isinstance(op, SetDataOp):
                txn.set_data(op.path, op.data, op.version)
            else:
                txn.delete(op.path, op.version)
        raw = self._wait(txn.commit_async(), None)
        failures = [
            (i, r)
            for i, r in enumerate(raw)
            if isinstance(r, Exception)
            and not isinstance(r, kz.RolledBackError | kz.RuntimeInconsistency)
        ]
        if failures:
            index, cause = failures[0]
            error = _translate(cause, ops[index].path)
            error.op_index = index
            raise error
        results: list[OpResult] = []
        for op, value in zip(ops, raw, strict=True):
            if isinstance(op, CreateOp):
                results.append(str(value))
            elif isinstance(op, SetDataOp):
                results.append(_stat(value))
            else:
                results.append(None)
        return results

    def add_session_listener(self, listener: SessionListener) -> None:
        with self._cond:
            self._listeners.append(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        with self._cond:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def expire_session(self) -> None:
        """Expire the session server-side (another client attaches to it and closes it).

        Returns once the new session is open and the session listeners have run; do
        not call it from a watch callback or a session listener.
        """
        client_id = self._client.client_id
        if client_id is None:
            raise ConnectionLossError("not connected")
        with self._cond:
            before = self._renewals
        intruder = self._new_client(self.hosts, client_id=client_id)
        try:
            intruder.start(timeout=self._connect_timeout_s)
        finally:
            intruder.stop()
            intruder.close()
        deadline = time.monotonic() + max(30.0, 2 * self._session_timeout_ms / 1000)
        with self._cond:
            while self._renewals == before:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SessionExpiredError("no new session after expiry")
                self._cond.wait(remaining)

    def close(self) -> None:
        with self._cond:
            if self._closing:
                return
            self._closing = True
        try:
            self._client.stop()
        finally:
            self._client.close()

    def __enter__(self) -> ZooKeeperStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- session handling -----------------------------------------------------------
    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: no blocking, no ZooKeeper calls here.
        if state == KazooState.LOST:
            if not self._closing:
                log.warning("ZooKeeper session lost (%s)", self.hosts)
                self._lost = True
        elif state == KazooState.CONNECTED:
            with self._cond:
                parked, self._parked = self._parked, []
                self._cond.notify_all()
            for adapter in parked:
                if adapter.session_id == self.session_id:
                    self._client.handler.dispatch_callback(Callback("watch", adapter.fire, ()))
            if self._lost:
                self._lost = False
                callback = Callback("session", self._session_renewed, ())
                self._client.handler.dispatch_callback(callback)

    def _watch_lost(self, adapter: _WatchAdapter) -> None:
        """A watch kazoo dropped on a connection loss: fire it if the session survives."""
        with self._cond:
            if not self._client.connected:
                self._parked.append(adapter)
                return
        if adapter.session_id == self.session_id:
            adapter.fire()

    def _session_renewed(self) -> None:
        log.info("new ZooKeeper session 0x%x after expiry", self.session_id)
        with self._cond:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener()
            except Exception:
                log.exception("session listener failed")
        with self._cond:
            self._renewals += 1
            self._cond.notify_all()
