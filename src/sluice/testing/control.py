"""Request controls: fault hooks that see a broker's requests before their handler does.

A test registers a *control function* for an API key on an
:class:`~sluice.testing.EmbeddedBroker` (or on one broker of an
:class:`~sluice.testing.EmbeddedCluster`). It is called on the broker's event loop with
each decoded request of that key (:class:`sluice.protocol.Request`: the header and kio's
request dataclass) and decides what happens to it:

* return a kio response dataclass of the request's version: the broker answers with it
  and the real handler never sees the request (:func:`respond` builds one);
* return None: not handled; the next control of the key, or the real handler, answers;
* return an awaitable: the request waits for it, then is answered with its result, or by
  the real handler if that is None (a delay: ``asyncio.sleep(0.5)`` returns None);
* raise :class:`DropConnection`: the broker closes the client's connection without an
  answer.

A control that answers, delays or drops has *acted*; it is then removed, unless it was
registered with ``keep=True``. One that returns None stays, so it can wait for the
request it is after. The controls of a key are asked in the order they were registered;
the first that acts decides. A control may register further controls.

The controls work by wrapping entries of the broker's handler table
(``Broker.handlers``): only keys that have a control are wrapped, so the other APIs
and a broker without controls run exactly as in production. Controls see requests once
the broker has started; the controller's inter-broker requests (LeaderAndIsr,
UpdateMetadata, StopReplica, ControlledShutdown) are not in that table and cannot be
controlled. A dropped connection is logged by the broker as a handler error.

A Produce request that is delayed and then handed to the real handler is appended when
the delay ends, after any Produce the same connection sent meanwhile: the broker reads a
connection's next Produce while one waits (``sluice.server.network``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.static.protocol import ResponsePayload

    from sluice.protocol import Request
    from sluice.server.network import Handler
    from sluice.server.request_context import RequestContext

__all__ = [
    "Control",
    "ControlResult",
    "DropConnection",
    "RequestControl",
    "RequestControls",
    "respond",
]

ControlResult: TypeAlias = "ResponsePayload | Awaitable[ResponsePayload | None] | None"
"""What a control function returns: an answer, an awaitable of one (None: the real
handler answers once it is done), or None (not handled)."""

Control: TypeAlias = "Callable[[Request], ControlResult]"
"""A control function: called with each request of its API key."""


class DropConnection(Exception):
    """Raised by a control function (or the awaitable it returned): the broker closes the
    client's connection without answering the request."""


def respond(request: Request, **fields: object) -> ResponsePayload:
    """kio's response dataclass for ``request``'s API and version, from plain values:
    fields this version lacks are ignored, missing ones get neutral zero values, nested
    entities may be dicts and lists (``sluice.protocol.build``)::

        respond(request, error_code=ErrorCode.coordinator_not_available)
    """
    from sluice.protocol.build import build

    response: ResponsePayload = build(request.response_type, **fields)
    return response


class RequestControl:
    """One registered control function (returned by :meth:`RequestControls.add`).

    ``seen`` counts the requests it was asked about, ``acted`` those it answered, delayed
    or dropped; both are updated on the broker's event loop."""

    __slots__ = ("_owner", "acted", "api_key", "fn", "keep", "seen")

    def __init__(self, owner: RequestControls, api_key: int, fn: Control, keep: bool) -> None:
        self._owner = owner
        self.api_key = api_key
        self.fn = fn
        self.keep = keep
        self.seen = 0
        self.acted = 0

    @property
    def active(self) -> bool:
        """Still registered: it has not acted yet, or it is kept."""
        return self._owner.is_registered(self)

    def remove(self) -> None:
        """Unregister it (nothing happens if it is gone already)."""
        self._owner.remove(self)

    def __repr__(self) -> str:
        return (
            f"RequestControl(api_key={self.api_key}, keep={self.keep}, seen={self.seen}, "
            f"acted={self.acted})"
        )


class RequestControls:
    """The control functions of one broker, by API key, and the wrapping of that broker's
    handler table. Controls may be added from any thread, before the broker starts or
    while it runs; :meth:`attach` and :meth:`detach` are called on the broker's event
    loop as it starts and stops, and the controls carry over to the next start."""

    def __init__(self, timeout_s: float = 30.0) -> None:
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._controls: dict[int, list[RequestControl]] = {}
        # While attached: the broker's handler table, the handlers wrapped in it, its loop.
        self._handlers: dict[int, Handler[RequestContext]] | None = None
        self._originals: dict[int, Handler[RequestContext]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    def add(self, api_key: int, fn: Control, *, keep: bool = False) -> RequestControl:
        """Register ``fn`` for requests of ``api_key``; it is removed once it acts unless
        ``keep``. Effective for the next request when this returns. ValueError if the
        running broker does not serve ``api_key``."""
        control = RequestControl(self, int(api_key), fn, keep)
        with self._lock:
            self._controls.setdefault(control.api_key, []).append(control)
            loop = self._loop
        if loop is not None:
            try:
                self._on_loop(loop, lambda: self._wrap(control.api_key))
            except ValueError:
                self.remove(control)
                raise
        return control

    def remove(self, control: RequestControl) -> None:
        with self._lock:
            controls = self._controls.get(control.api_key, [])
            if control in controls:
                controls.remove(control)

    def clear(self) -> None:
        """Unregister every control (the wrapped handlers then pass every request on)."""
        with self._lock:
            self._controls.clear()

    def is_registered(self, control: RequestControl) -> bool:
        with self._lock:
            return control in self._controls.get(control.api_key, ())

    def __len__(self) -> int:
        with self._lock:
            return sum(len(c) for c in self._controls.values())

    # -- the broker's side ---------------------------------------------------------
    def attach(self, handlers: dict[int, Handler[RequestContext]]) -> None:
        """Called on the broker's event loop once it has started: wrap the handlers of
        the keys that have controls now, and of those that get one later. A key the
        broker does not serve is left alone."""
        with self._lock:
            self._handlers = handlers
            self._originals = {}
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
            keys = [key for key, controls in self._controls.items() if controls]
        for key in keys:
            if key in handlers:
                self._wrap(key)

    def detach(self) -> None:
        """Called on the broker's event loop as it stops."""
        with self._lock:
            self._handlers = None
            self._originals = {}
            self._loop = None
            self._loop_thread = None

    def _on_loop(self, loop: asyncio.AbstractEventLoop, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the broker's loop and wait for it (at once from a control)."""
        if threading.get_ident() == self._loop_thread:
            fn()
            return
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            try:
                fn()
            except Exception as exc:
                done.set_exception(exc)
            else:
                done.set_result(None)

        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError:  # the loop is closed: the broker stopped, nothing to wrap
            return
        done.result(self._timeout_s)

    def _wrap(self, api_key: int) -> None:
        """Put the controlled handler for ``api_key`` in the table (on the loop)."""
        handlers = self._handlers
        if handlers is None or api_key in self._originals:
            return
        original = handlers.get(api_key)
        if original is None:
            raise ValueError(f"the broker does not serve API key {api_key}")
        self._originals[api_key] = original
        handlers[api_key] = self._controlled(api_key, original)

    def _controlled(
        self, api_key: int, original: Handler[RequestContext]
    ) -> Handler[RequestContext]:
        def controlled(ctx: RequestContext, request: Request) -> object:
            with self._lock:
                controls = list(self._controls.get(api_key, ()))
            for control in controls:
                if not control.active:  # removed since, or used up by an earlier request
                    continue
                control.seen += 1
                try:
                    result = control.fn(request)
                except DropConnection:
                    self._acted(control)
                    raise
                if result is None:
                    continue
                self._acted(control)
                if inspect.isawaitable(result):
                    return _answer_after(result, original, ctx, request)
                return result
            return original(ctx, request)

        return controlled

    def _acted(self, control: RequestControl) -> None:
        control.acted += 1
        if not control.keep:
            self.remove(control)


async def _answer_after(
    pending: Awaitable[ResponsePayload | None],
    original: Handler[RequestContext],
    ctx: RequestContext,
    request: Request,
) -> object:
    """A delayed request: the control's awaited answer, else the real handler's."""
    response = await pending
    if response is not None:
        return response
    answer: object = original(ctx, request)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer
