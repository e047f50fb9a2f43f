"""A small HTTP/1.1 server on the broker's event loop, for the metrics endpoint and the
web console.

h11 does the protocol (a pure state machine: bytes in, events out); this module is the
thin asyncio shell around it, with the bounds every broker listener has: at most
``max_connections`` at once (more are answered 503 and closed), request heads up to
32 KiB and bodies up to ``max_body_bytes`` (413 beyond), and a connection that sends
nothing for ``idle_timeout_s`` is closed. Keep-alive works; requests on one connection
are answered in order, one at a time.

A handler is ``async (HttpRequest) -> HttpResponse``; :class:`Router` maps method and
path to handlers, with path prefixes for static files.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import parse_qs, urlsplit

import h11

from sluice.base.rate_limited_log import RateLimitedLog

__all__ = ["HttpRequest", "HttpResponse", "HttpServer", "Router"]

log = logging.getLogger("sluice.http")

MAX_HEAD_BYTES: Final = 16 * 1024
_READ_CHUNK: Final = 16 * 1024
TLS_HANDSHAKE_TIMEOUT_S: Final = 10.0
"""How long an HTTPS client has to finish its TLS handshake before it is dropped."""
_TOO_MANY: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
    b"Content-Length: 21\r\nConnection: close\r\n\r\ntoo many connections\n"
)
_REASONS: Final = {
    200: b"OK", 201: b"Created", 204: b"No Content", 400: b"Bad Request",
    401: b"Unauthorized", 403: b"Forbidden", 404: b"Not Found",
    405: b"Method Not Allowed", 409: b"Conflict", 413: b"Content Too Large",
    500: b"Internal Server Error", 503: b"Service Unavailable",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes
    client: tuple[str, int]

    def param(self, name: str, default: str | None = None) -> str | None:
        """The first value of query parameter ``name``."""
        values = self.query.get(name)
        return values[0] if values else default


@dataclass(slots=True)
class HttpResponse:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def text(cls, status: int, text: str) -> HttpResponse:
        return cls(status, text.encode())


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


class Router:
    """Method + exact path → handler, then the longest matching path prefix."""

    def __init__(self) -> None:
        self._exact: dict[tuple[str, str], Handler] = {}
        self._prefixes: list[tuple[str, str, Handler]] = []

    def add(self, method: str, path: str, handler: Handler) -> None:
        self._exact[(method, path)] = handler

    def add_prefix(self, method: str, prefix: str, handler: Handler) -> None:
        self._prefixes.append((method, prefix, handler))
        self._prefixes.sort(key=lambda entry: -len(entry[1]))

    async def __call__(self, request: HttpRequest) -> HttpResponse:
        method = "GET" if request.method == "HEAD" else request.method
        handler = self._exact.get((method, request.path))
        if handler is None:
            for prefix_method, prefix, candidate in self._prefixes:
                if prefix_method == method and request.path.startswith(prefix):
                    handler = candidate
                    break
        if handler is None:
            known = any(path == request.path for _, path in self._exact)
            return HttpResponse.text(405 if known else 404, "method not allowed" if known
                                     else "not found")  # fmt: skip
        return await handler(request)


class HttpServer:
    """Serves ``handler`` on ``host:port`` until :meth:`stop`."""

    def __init__(
        self,
        name: str,
        handler: Handler,
        *,
        max_connections: int = 64,
        max_body_bytes: int = 1024 * 1024,
        idle_timeout_s: float = 30.0,
    ) -> None:
        self.name = name
        self._handler = handler
        self._max_connections = max_connections
        self._max_body_bytes = max_body_bytes
        self._idle_timeout_s = idle_timeout_s
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._rejects = RateLimitedLog(log)
        self.host = ""
        self.port = 0
        self.scheme = "http"
        self._ssl_context: ssl.SSLContext | None = None

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> None:
        """Listen on ``host:port`` (0: a free port); HTTPS with ``ssl_context``. The TLS
        handshake starts once a connection has its place under ``max_connections`` and
        must end within ``TLS_HANDSHAKE_TIMEOUT_S``, so unfinished handshakes count too."""
        self._ssl_context = ssl_context
        self._server = await asyncio.start_server(self._serve, host, port, limit=_READ_CHUNK)
        self.scheme = "https" if ssl_context is not None else "http"
        sockname = self._server.sockets[0].getsockname()
        self.host, self.port = sockname[0], sockname[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = writer.get_extra_info("peername") or ("", 0)
        client = f"{peer[0]}:{peer[1]}"
        self._connections.add(task)
        try:
            if len(self._connections) > self._max_connections:
                # No request read: h11 answers only requests, so the bytes are written here
                # (over HTTPS the connection is only closed: no handshake was made).
                if self._ssl_context is None:
                    writer.write(_TOO_MANY)
                    await writer.drain()
                self._rejects.event(f"{self.name}: refused connection", client, "too many")
                return
            if self._ssl_context is not None:
                await writer.start_tls(
                    self._ssl_context, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S
                )
            await self._conversation(reader, writer, client)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, ssl.SSLError):
            pass
        except h11.ProtocolError as e:
            self._rejects.event(f"{self.name}: closed a connection", client, e)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _conversation(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        host, _, port = peer.rpartition(":")
        client = (host, int(port or 0))
        while True:
            request = await self._read_request(conn, reader, client)
            if request is None:
                return
            if isinstance(request, HttpResponse):  # refused before the handler
                await _write(writer, conn, request, close=True)
                return
            try:
                response = await self._handler(request)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: %s %s failed", self.name, request.method, request.path)
                response = _plain(500, "internal error")
            if request.method == "HEAD":
                response = HttpResponse(response.status, b"", response.content_type,
                                        [*response.headers,
                                         ("Content-Length", str(len(response.body)))])  # fmt: skip
            await _write(writer, conn, response)
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                return
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                return

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, client: tuple[str, int]
    ) -> HttpRequest | HttpResponse | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await asyncio.wait_for(reader.read(_READ_CHUNK), self._idle_timeout_s)
                conn.receive_data(data)  # b"" marks the end
                continue
            if isinstance(event, h11.ConnectionClosed):
                return None
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self._max_body_bytes:
                    return _plain(413, f"body over {self._max_body_bytes} bytes")
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return _request(head, bytes(body), client)


def _request(head: h11.Request, body: bytes, client: tuple[str, int]) -> HttpRequest:
    target = urlsplit(head.target.decode("latin-1"))
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in head.headers}
    return HttpRequest(
        head.method.decode("latin-1"), target.path or "/", parse_qs(target.query), headers,
        body, client,
    )  # fmt: skip


def _plain(status: int, text: str) -> HttpResponse:
    return HttpResponse.text(status, text + "\n")


async def _write(
    writer: asyncio.StreamWriter, conn: h11.Connection, response: HttpResponse,
    close: bool = False,
) -> None:  # fmt: skip
    headers = [("Content-Type", response.content_type), *response.headers]
    if not any(name.lower() == "content-length" for name, _ in headers):
        headers.append(("Content-Length", str(len(response.body))))
    if close:
        headers.append(("Connection", "close"))
    reason = _REASONS.get(response.status, b"")
    data = conn.send(h11.Response(status_code=response.status, headers=headers, reason=reason))
    if response.body:
        data += conn.send(h11.Data(data=response.body))
    data += conn.send(h11.EndOfMessage())
    writer.write(data)
    await writer.drain()
