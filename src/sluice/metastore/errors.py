"""Errors of the coordination store, named after ZooKeeper's ``KeeperException`` codes.

Both store implementations raise exactly these, so callers (the controller, broker
registration) never see a kazoo exception.
"""

from __future__ import annotations

__all__ = [
    "BadArgumentsError",
    "BadVersionError",
    "ConnectionLossError",
    "CoordinationError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "SessionClosedError",
    "SessionExpiredError",
]


class CoordinationError(Exception):
    """Base class of coordination-store errors.

    ``path`` is the znode the failing operation named (if any) and ``op_index`` the
    position of the failing operation inside a :meth:`multi` transaction (else None).
    """

    def __init__(self, message: str = "", *, path: str | None = None) -> None:
        self.path = path
        self.op_index: int | None = None
        text = message or type(self).__name__
        super().__init__(f"{text}: {path}" if path is not None else text)


class NoNodeError(CoordinationError):
    """The znode (or, for a create, its parent) does not exist (``NONODE``)."""


class NodeExistsError(CoordinationError):
    """A create named a znode that already exists (``NODEEXISTS``)."""


class BadVersionError(CoordinationError):
    """The expected version did not match the znode's current version (``BADVERSION``)."""


class NotEmptyError(CoordinationError):
    """A delete named a znode that still has children (``NOTEMPTY``)."""


class NoChildrenForEphemeralsError(CoordinationError):
    """A create tried to put a child under an ephemeral znode (``NOCHILDRENFOREPHEMERALS``)."""


class BadArgumentsError(CoordinationError):
    """A malformed path or argument (``BADARGUMENTS``)."""


class SessionExpiredError(CoordinationError):
    """The session expired while the operation was in flight (``SESSIONEXPIRED``)."""


class ConnectionLossError(CoordinationError):
    """The connection to the ensemble was lost; the outcome is unknown (``CONNECTIONLOSS``)."""


class SessionClosedError(CoordinationError):
    """The store was closed by its owner; no further operations are possible."""
