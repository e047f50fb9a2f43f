"""The coordination-store interface: the part of ZooKeeper that Kafka's broker uses.

A :class:`CoordinationStore` is one client *session* on a tree of znodes (Kafka's
``KafkaZkClient`` over a ZooKeeper session): create (persistent, ephemeral,
sequential), get with a :class:`Stat`, set and delete with an expected version,
exists, children, one-shot watches delivered as callbacks, atomic ``multi``
transactions, and a session whose ephemeral znodes vanish when it closes or expires.

Two implementations behave the same way: :class:`~sluice.metastore.memory.InProcessStore`
(a thread-safe in-memory tree, for single-node brokers and fast cluster tests) and
:class:`~sluice.metastore.zookeeper.ZooKeeperStore` (a real ZooKeeper via kazoo).

Semantics shared by both, as in ZooKeeper:

* versions start at 0 and grow by one on each ``set``; ``version=-1`` matches any;
* ``create`` needs the parent to exist and not be ephemeral; ``delete`` needs no
  children; sequential creates append the parent's ten-digit child counter;
* a watch fires at most once. ``get``/``exists`` set a *data* watch (created,
  deleted, data changed); ``get_children`` sets a *child* watch (children changed,
  deleted). The same callback registered twice on one path fires once. Callbacks run
  outside the store's locks and must not block: hand the event to a queue;
* when the session expires its ephemeral znodes and watches are gone; the store opens
  a new session and then calls the session listeners, which must re-register
  (Kafka's ``StateChangeHandler.afterInitializingSession``);
* ``get_children`` returns names sorted.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from .errors import BadArgumentsError, NodeExistsError, NoNodeError, NotEmptyError

__all__ = [
    "CheckOp",
    "CoordinationStore",
    "CreateMode",
    "CreateOp",
    "DeleteOp",
    "EventType",
    "Op",
    "OpResult",
    "SessionListener",
    "SetDataOp",
    "Stat",
    "WatchedEvent",
    "Watcher",
    "delete_recursive",
    "ensure_path",
    "validate_path",
]


class CreateMode(enum.Enum):
    """ZooKeeper's create modes."""

    PERSISTENT = "persistent"
    EPHEMERAL = "ephemeral"
    PERSISTENT_SEQUENTIAL = "persistent_sequential"
    EPHEMERAL_SEQUENTIAL = "ephemeral_sequential"

    @property
    def ephemeral(self) -> bool:
        return self in (CreateMode.EPHEMERAL, CreateMode.EPHEMERAL_SEQUENTIAL)

    @property
    def sequential(self) -> bool:
        return self in (CreateMode.PERSISTENT_SEQUENTIAL, CreateMode.EPHEMERAL_SEQUENTIAL)


@dataclass(frozen=True, slots=True)
class Stat:
    """A znode's metadata, field for field ZooKeeper's ``Stat``.

    ``czxid`` (the transaction that created the znode) is what Kafka uses as a broker
    epoch; ``ephemeral_owner`` is the owning session id, 0 for persistent znodes.
    """

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int


class EventType(enum.Enum):
    """What a watch reports (ZooKeeper's ``Watcher.Event.EventType``)."""

    NODE_CREATED = "created"
    NODE_DELETED = "deleted"
    NODE_DATA_CHANGED = "changed"
    NODE_CHILDREN_CHANGED = "child"


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    """One watch notification: what happened to which path."""

    type: EventType
    path: str


Watcher = Callable[[WatchedEvent], None]
SessionListener = Callable[[], None]


@dataclass(frozen=True, slots=True)
class CheckOp:
    """In a transaction: require ``path`` to exist with ``version`` (-1: any)."""

    path: str
    version: int


@dataclass(frozen=True, slots=True)
class CreateOp:
    """In a transaction: create ``path``; the result is the created path."""

    path: str
    data: bytes = b""
    mode: CreateMode = CreateMode.PERSISTENT


@dataclass(frozen=True, slots=True)
class SetDataOp:
    """In a transaction: set ``path``'s data if its version is ``version``; result: Stat."""

    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class DeleteOp:
    """In a transaction: delete ``path`` if its version is ``version``."""

    path: str
    version: int = -1


Op = CheckOp | CreateOp | SetDataOp | DeleteOp
OpResult = str | Stat | None


class CoordinationStore(Protocol):
    """One session on a coordination tree; see the module docstring for semantics."""

    @property
    def session_id(self) -> int:
        """The current session's id (it changes after an expiry)."""
        ...

    def create(self, path: str, data: bytes = b"", mode: CreateMode = CreateMode.PERSISTENT) -> str:
        """Create a znode and return its path (with the suffix, for sequential modes)."""
        ...

    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]:
        """Return a znode's data and stat; ``watch`` becomes a data watch."""
        ...

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Replace a znode's data if its version matches (else BadVersionError)."""
        ...

    def delete(self, path: str, version: int = -1) -> None:
        """Delete a childless znode if its version matches."""
        ...

    def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        """Return the stat or None; ``watch`` is set even if the znode does not exist."""
        ...

    def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        """Return the sorted child names; ``watch`` becomes a child watch."""
        ...

    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """Apply all ``ops`` atomically or none; the first failure is raised with op_index."""
        ...

    def add_session_listener(self, listener: SessionListener) -> None:
        """Call ``listener()`` after each session expiry, once a new session is open."""
        ...

    def remove_session_listener(self, listener: SessionListener) -> None:
        """Stop calling ``listener``."""
        ...

    def expire_session(self) -> None:
        """Expire the current session now, as the ensemble would (for tests and tools)."""
        ...

    def close(self) -> None:
        """Close the session: its ephemeral znodes vanish; later calls fail."""
        ...


def validate_path(path: str) -> None:
    """Raise BadArgumentsError unless ``path`` is an absolute ZooKeeper path."""
    if not path.startswith("/"):
        raise BadArgumentsError("path must start with /", path=path)
    if path == "/":
        return
    for part in path[1:].split("/"):
        if part in ("", ".", "..") or "\x00" in part:
            raise BadArgumentsError("invalid path", path=path)


def ensure_path(store: CoordinationStore, path: str, data: bytes = b"") -> None:
    """Create ``path`` and any missing ancestors as persistent znodes (kazoo's ``ensure_path``).

    ``data`` goes into the last znode only if this call creates it.
    """
    if path == "/" or store.exists(path) is not None:
        return
    parts = path.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        prefix = "/" + "/".join(parts[:i])
        with contextlib.suppress(NodeExistsError):
            store.create(prefix, data if i == len(parts) else b"")


def delete_recursive(store: CoordinationStore, path: str) -> None:
    """Delete ``path`` and everything below it; a missing znode is not an error."""
    try:
        children = store.get_children(path)
    except NoNodeError:
        return
    for child in children:
        delete_recursive(store, f"{path.rstrip('/')}/{child}")
    try:
        store.delete(path)
    except NoNodeError:
        pass
    except NotEmptyError:  # a child appeared meanwhile: go again
        delete_recursive(store, path)
