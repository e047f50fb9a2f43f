"""``RequestGate``: the broker's listeners accept connections while it finishes starting
(coordinators, handler modules); requests that arrive meanwhile wait and are handled in
arrival order once it is ready, as Kafka's SocketServer is bound before request
processing is enabled."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from sluice.protocol import Request

__all__ = ["RequestGate"]

Handler = Callable[[Request], Any]


class RequestGate:
    """A handler table for ``KafkaServer`` before the real handlers exist: each request is
    held (an awaitable of its response is returned) until :meth:`open`, which hands the
    held requests to the real handlers in arrival order and puts those handlers in the
    table, so later requests reach them directly. Event-loop thread only."""

    __slots__ = ("_held", "handlers")

    def __init__(self, api_keys: Iterable[int]) -> None:
        self._held: list[tuple[int, Request, asyncio.Future[Any]]] | None = []
        self.handlers: dict[int, Handler] = {key: self._hold for key in api_keys}

    @property
    def is_open(self) -> bool:
        return self._held is None

    @property
    def held_count(self) -> int:
        return len(self._held or ())

    def _hold(self, request: Request) -> Any:
        held = self._held
        assert held is not None, "a held handler was called after open()"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        held.append((request.api_key, request, future))
        return future

    def open(self, handlers: dict[int, Handler]) -> None:
        """Serve the held requests with ``handlers`` (one per key given at construction),
        oldest first, and route every later request straight to them. Each held request
        is passed to its handler here, synchronously and in order, before any later
        request can be: a produce appends in the order the requests arrived."""
        held, self._held = self._held, None
        if held is None:
            raise RuntimeError("the request gate is already open")
        if set(handlers) != set(self.handlers):
            raise ValueError("open() needs a handler for exactly the gated API keys")
        self.handlers.update(handlers)  # the table KafkaServer reads, updated in place
        for api_key, request, future in held:
            if future.done():  # cancelled: its connection is gone, nobody awaits an answer
                continue
            try:
                response = handlers[api_key](request)
            except Exception as exc:  # the server logs it and closes the connection
                future.set_exception(exc)
                continue
            if inspect.isawaitable(response):
                _settle_from(future, asyncio.ensure_future(response))
            else:
                future.set_result(response)

    def close(self) -> None:
        """Startup failed: cancel the held requests (their connections are dropped)."""
        held, self._held = self._held, None
        for _, _, future in held or ():
            future.cancel()


def _settle_from(future: asyncio.Future[Any], inner: asyncio.Future[Any]) -> None:
    """``future`` takes ``inner``'s outcome; cancelling ``future`` cancels ``inner``."""

    def copy(done: asyncio.Future[Any]) -> None:
        if future.done():
            return
        if done.cancelled():
            future.cancel()
        elif (exc := done.exception()) is not None:
            future.set_exception(exc)
        else:
            future.set_result(done.result())

    def forward_cancel(outer: asyncio.Future[Any]) -> None:
        if outer.cancelled():
            inner.cancel()

    inner.add_done_callback(copy)
    future.add_done_callback(forward_cancel)
