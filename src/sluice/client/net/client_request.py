"""A request's three stages in the :class:`~.network_client.NetworkClient`.

:class:`ClientRequest` is what a caller hands to ``NetworkClient.send``;
:class:`InFlightRequest` is the same request once written to a
:class:`~.connection.BrokerConnection`, with its correlation id, version and
deadline; :class:`ClientResponse` is its outcome, given to the request's callback
and returned by ``NetworkClient.poll``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = ["ClientRequest", "ClientResponse", "InFlightRequest"]

log = logging.getLogger(__name__)


class ClientRequest:
    """A request to send to ``destination``: ``build(version)`` returns kio's request
    dataclass, or the already encoded body as a list of buffers (no header).
    ``version`` None means the highest version both sides support; ``timeout_ms``
    None means the client's ``request.timeout.ms``."""

    __slots__ = ("api_key", "build", "callback", "decode", "destination", "expect_response",
                 "timeout_ms", "version")  # fmt: skip

    def __init__(
        self,
        destination: int,
        api_key: int,
        build: Callable[[int], Any],
        callback: Callable[[ClientResponse], None] | None,
        *,
        version: int | None = None,
        expect_response: bool = True,
        decode: Callable[[memoryview, int], Any] | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        self.destination = destination
        self.api_key = api_key
        self.build = build
        self.callback = callback
        self.version = version
        self.expect_response = expect_response
        self.decode = decode
        self.timeout_ms = timeout_ms


class InFlightRequest:
    """A request written (or being written) to a connection, awaiting its outcome
    until ``deadline_ms``."""

    __slots__ = (
        "api_key",
        "api_version",
        "callback",
        "correlation_id",
        "deadline_ms",
        "decode",
        "destination",
        "end_position",
        "expect_response",
        "send_time_ms",
    )

    def __init__(
        self,
        destination: int,
        correlation_id: int,
        api_key: int,
        api_version: int,
        expect_response: bool,
        send_time_ms: int,
        callback: Callable[[ClientResponse], None] | None,
        decode: Callable[[memoryview, int], Any] | None,
        deadline_ms: int = 2**63 - 1,
    ) -> None:
        self.destination = destination
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version
        self.expect_response = expect_response
        self.send_time_ms = send_time_ms
        self.callback = callback
        self.decode = decode
        self.deadline_ms = deadline_ms
        self.end_position = 0


class ClientResponse:
    """The outcome of a request: a decoded body, or ``disconnected`` (and
    ``timed_out`` when its timeout expired). ``body`` is None for requests that
    expect no response."""

    __slots__ = ("body", "disconnected", "received_ms", "request", "timed_out")

    def __init__(
        self,
        request: InFlightRequest,
        received_ms: int,
        body: Any,
        *,
        disconnected: bool = False,
        timed_out: bool = False,
    ) -> None:
        self.request = request
        self.received_ms = received_ms
        self.body = body
        self.disconnected = disconnected
        self.timed_out = timed_out

    @property
    def destination(self) -> int:
        return self.request.destination

    @property
    def api_version(self) -> int:
        return self.request.api_version

    def on_complete(self) -> None:
        callback = self.request.callback
        if callback is not None:
            try:
                callback(self)
            except Exception:
                log.exception("Uncaught error in request completion for API key %d",
                              self.request.api_key)  # fmt: skip
