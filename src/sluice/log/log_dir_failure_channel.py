"""``LogDirFailureChannel``: where an I/O error takes a log directory offline.

As in Kafka, an ``OSError`` (``ENOSPC``, ``EIO``, ``EROFS``, ``EMFILE``, ...) met while a
log writes, rolls, flushes, reads or checkpoints is not a failure of the request that
caused it but of the directory holding the log: the log refuses every use from then on
(``KafkaStorageException``, answered ``KAFKA_STORAGE_ERROR``), and the failure is
reported here with the directory. The first report of a directory logs one error line
naming it and the error (errno); later ones, from the same or another log of that
directory, log at debug only, so that a full disk does not log a line per request.

The first report also calls ``on_offline(directory)``, on the reporting thread (a log's
thread, the file thread, the flush thread). The log's owner sets it: a broker hands the
directory to its event loop, where the log manager takes every log of the directory
offline, the replica manager answers the partitions' waiting requests, and in a cluster
the controller hears of it (Kafka's ``ReplicaManager.handleLogDirFailure``). A directory
stays offline until the process restarts.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["LogDirFailureChannel", "describe_os_error"]

logger = logging.getLogger(__name__)


def describe_os_error(error: OSError) -> str:
    """``error`` with its errno's symbolic name: ``[ENOSPC] No space left on device``."""
    number = error.errno
    name = errno.errorcode.get(number, str(number)) if number is not None else "no errno"
    return f"[{name}] {error.strerror or error}"


class LogDirFailureChannel:
    """The offline log directories of a process, reported from any thread."""

    __slots__ = ("_lock", "_offline", "on_offline")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[Path, OSError] = {}
        self.on_offline: Callable[[Path], None] | None = None

    def has_offline_log_dir(self, log_dir: Path) -> bool:
        return log_dir in self._offline

    @property
    def offline_log_dirs(self) -> dict[Path, OSError]:
        """Each offline directory with the error that took it offline."""
        with self._lock:
            return dict(self._offline)

    def maybe_add_offline_log_dir(self, log_dir: Path, what: str, error: OSError) -> bool:
        """Report that ``what`` (an operation and the log it was for) failed with
        ``error`` in ``log_dir``; True if this took the directory offline (logged, and
        ``on_offline`` called), False if it already was."""
        with self._lock:
            first = log_dir not in self._offline
            if first:
                self._offline[log_dir] = error
        if not first:
            logger.debug("%s failed in offline log dir %s: %s", what, log_dir, error)
            return False
        logger.error(
            "log dir %s is offline: %s failed: %s", log_dir, what, describe_os_error(error),
            extra={"event": "log_dir_offline", "log_dir": str(log_dir), "errno": error.errno},
        )  # fmt: skip
        listener = self.on_offline
        if listener is not None:
            listener(log_dir)
        return True
