"""``RequestGate``: the broker's listeners accept connections while it finishes starting
(handler modules, coordinators); requests that arrive meanwhile wait and are handled in
arrival order once their API can be served, as Kafka's SocketServer is bound before
request processing is enabled."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from sluice.protocol import Request

__all__ = ["RequestGate"]

Ctx = TypeVar("Ctx")
Handler = Callable[[Ctx, Request], Any]


class RequestGate(Generic[Ctx]):
    """A handler table for ``KafkaServer`` before the real handlers exist: each request is
    held (an awaitable of its response is returned) until :meth:`open` is given a handler
    for its API key, which hands the held requests of those keys to the real handlers in
    arrival order and puts those handlers in the table, so later requests reach them
    directly. Keys may be opened in several steps (the broker serves ApiVersions, Metadata,
    Produce and Fetch before its coordinators exist). Event-loop thread only.

    Opening some keys before others cannot reorder one connection's requests: a
    connection hands out its next request only once its earlier non-Produce request is
    answered, and holds back any non-Produce request until every earlier Produce answer
    is written (see :mod:`sluice.protocol.server_connection`)."""

    __slots__ = ("_held", "handlers")

    def __init__(self, api_keys: Iterable[int]) -> None:
        self._held: list[tuple[int, Ctx, Request, asyncio.Future[Any]]] = []
        self.handlers: dict[int, Handler[Ctx]] = {key: self._hold for key in api_keys}

    @property
    def is_open(self) -> bool:
        """Every key has its real handler (or :meth:`close` gave up on the held ones)."""
        return not self.closed_keys

    @property
    def closed_keys(self) -> frozenset[int]:
        """The API keys whose requests are still held."""
        return frozenset(k for k, fn in self.handlers.items() if fn == self._hold)

    @property
    def held_count(self) -> int:
        return len(self._held)

    def _hold(self, context: Ctx, request: Request) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._held.append((request.api_key, context, request, future))
        return future

    def open(self, handlers: dict[int, Handler[Ctx]]) -> None:
        """Serve the held requests of ``handlers``' keys (all still held) with them, oldest
        first, and route every later request of those keys straight to them. Each held
        request is passed to its handler here, synchronously and in order, before any later
        request can be: a produce appends in the order the requests arrived."""
        if not handlers:
            return
        closed = self.closed_keys
        if not closed:
            raise RuntimeError("the request gate is already open")
        if not set(handlers) <= closed:
            raise ValueError("open() takes handlers only for API keys that are still held")
        self.handlers.update(handlers)  # the table KafkaServer reads, updated in place
        serve = [entry for entry in self._held if entry[0] in handlers]
        self._held = [entry for entry in self._held if entry[0] not in handlers]
        for api_key, context, request, future in serve:
            if future.done():  # cancelled: its connection is gone, nobody awaits an answer
                continue
            try:
                response = handlers[api_key](context, request)
            except Exception as exc:  # the server logs it and closes the connection
                future.set_exception(exc)
                continue
            if inspect.isawaitable(response):
                _settle_from(future, asyncio.ensure_future(response))
            else:
                future.set_result(response)

    def close(self) -> None:
        """Startup failed: cancel the held requests (their connections are dropped) and
        hold no more (a request of a key never opened is refused)."""
        held, self._held = self._held, []
        for key in self.closed_keys:
            self.handlers[key] = _refuse
        for _, _, _, future in held:
            future.cancel()


def _refuse(_context: object, request: Request) -> Any:
    raise RuntimeError(f"the broker failed to start; api key {request.api_key} is not served")


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
