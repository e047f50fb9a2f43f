"""A handler's answer that is written the moment it is set, not a loop turn later.

A parked Fetch completes inside the Produce that fed it (a follower's fetch, a consumer
at the log end), and an acks=all Produce completes inside the follower Fetch that moved
the high watermark. With a plain future the answer would be written only after that
handler has finished and the event loop has woken the waiting task, a loop turn after it
was ready, on the path of every replicated or acks=all record. An :class:`Answer` lets the network
layer leave a ``write`` callback on it: :meth:`set_result` calls it at once, and the
callback writes the encoded answer if it can be written without waiting (no file
region to send, the connection open and its turn to answer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["Answer"]


class Answer(asyncio.Future[Any]):
    """A future answer. ``written`` is True when the callback left by
    :meth:`write_when_set` wrote it; ``encoded`` holds the segments it encoded but could
    not write (a file region to send), for the task that writes it instead."""

    __slots__ = ("_write", "encoded", "written")

    def __init__(self, *, loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(loop=loop)
        self._write: Callable[[Answer, Any], None] | None = None
        self.encoded: list[Any] | None = None
        self.written = False

    def write_when_set(self, write: Callable[[Answer, Any], None]) -> None:
        """``write(self, result)`` runs inside :meth:`set_result`, after the result is set."""
        self._write = write

    def set_result(self, result: Any) -> None:
        super().set_result(result)
        write, self._write = self._write, None
        if write is not None:
            write(self, result)
