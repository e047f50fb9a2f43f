"""A handler's answer that reports its completion inside the call that completes it.

A parked Fetch completes inside the Produce that fed it (a follower's fetch, a consumer
at the log end), and an acks=all Produce completes inside the follower Fetch that moved
the high watermark. A plain future's done callbacks run a loop turn later, so the answer
would reach the socket only after that handler had finished and the loop had come round,
on the path of every replicated or acks=all record. An :class:`Answer` takes one
callback (:meth:`Answer.when_done`) that :meth:`~Answer.set_result`,
:meth:`~Answer.set_exception` and :meth:`~Answer.cancel` call before they return. The
network layer (:mod:`sluice.server.network`) leaves one on every answer it has to wait
for: it hands the answer to the connection's
:class:`~sluice.protocol.server_connection.ServerConnection` and writes whatever that
releases — nothing if an earlier answer is still awaited, this one and every completed
one behind it otherwise — there and then, in the completing handler's call stack. It
never handles the next request from there (that is left to the event loop), so a
handler is never re-entered from inside another.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["Answer"]


class Answer(asyncio.Future[Any]):
    """A future answer whose one :meth:`when_done` callback runs inside the call that
    completes it."""

    __slots__ = ("_when_done",)

    def __init__(self, *, loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(loop=loop)
        self._when_done: Callable[[Answer], None] | None = None

    def when_done(self, callback: Callable[[Answer], None]) -> None:
        """``callback(self)`` runs inside :meth:`set_result`, :meth:`set_exception` or
        :meth:`cancel`, once the outcome is set; it must not raise."""
        self._when_done = callback

    def set_result(self, result: Any) -> None:
        super().set_result(result)
        self._report()

    def set_exception(self, exception: type | BaseException) -> None:
        super().set_exception(exception)
        self._report()

    def cancel(self, msg: Any | None = None) -> bool:
        cancelled = super().cancel(msg)
        if cancelled:
            self._report()
        return cancelled

    def _report(self) -> None:
        callback, self._when_done = self._when_done, None
        if callback is not None:
            callback(self)
