"""Coordination: the ZooKeeper-shaped store the controller and broker registration use.

:class:`CoordinationStore` is the interface (one client session on a znode tree);
:class:`InProcessStore` runs it in memory (single-node brokers, in-process clusters),
:class:`ZooKeeperStore` over a real ZooKeeper through kazoo (imported lazily, so that
kazoo is only needed when a ZooKeeper is used). :mod:`.zk_server` starts a throwaway
ZooKeeper for tests and local clusters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .data_tree import DataTree
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
from .memory import InProcessStore
from .store import (
    CheckOp,
    CoordinationStore,
    CreateMode,
    CreateOp,
    DeleteOp,
    EventType,
    Op,
    OpResult,
    SessionListener,
    SetDataOp,
    Stat,
    WatchedEvent,
    Watcher,
    delete_recursive,
    ensure_path,
)

if TYPE_CHECKING:
    from .zookeeper import ZooKeeperStore

__all__ = [
    "BadArgumentsError",
    "BadVersionError",
    "CheckOp",
    "ConnectionLossError",
    "CoordinationError",
    "CoordinationStore",
    "CreateMode",
    "CreateOp",
    "DataTree",
    "DeleteOp",
    "EventType",
    "InProcessStore",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Op",
    "OpResult",
    "SessionClosedError",
    "SessionExpiredError",
    "SessionListener",
    "SetDataOp",
    "Stat",
    "WatchedEvent",
    "Watcher",
    "ZooKeeperStore",
    "delete_recursive",
    "ensure_path",
]


def __getattr__(name: str) -> Any:
    if name == "ZooKeeperStore":
        from .zookeeper import ZooKeeperStore

        return ZooKeeperStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
