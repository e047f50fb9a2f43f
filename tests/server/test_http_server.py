"""The broker's small HTTP server (metrics endpoint, console): routing and its bounds."""

from __future__ import annotations

import asyncio
import http.client
from collections.abc import Awaitable, Callable
from typing import Any

from sluice.server.http_server import HttpRequest, HttpResponse, HttpServer, Router


async def _echo(request: HttpRequest) -> HttpResponse:
    return HttpResponse(200, f"{request.method} {request.param('x')} {len(request.body)}".encode())


async def _boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("boom")


def _router() -> Router:
    router = Router()
    router.add("GET", "/echo", _echo)
    router.add("POST", "/echo", _echo)
    router.add("GET", "/boom", _boom)

    async def static(request: HttpRequest) -> HttpResponse:
        return HttpResponse(200, request.path.encode(), "text/html")

    router.add_prefix("GET", "/static/", static)
    return router


def _serving(test: Callable[[HttpServer], Awaitable[None]]) -> None:
    async def run() -> None:
        srv = HttpServer("test", _router(), max_connections=3, max_body_bytes=100,
                         idle_timeout_s=0.5)  # fmt: skip
        await srv.start("127.0.0.1", 0)
        try:
            await test(srv)
        finally:
            await srv.stop()

    asyncio.run(run())


def _get(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request(method, path, body=body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


async def _call(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    return await asyncio.to_thread(_get, port, method, path, body)


def test_routes_exact_prefix_and_errors() -> None:
    _serving(_routes_exact_prefix_and_errors)


async def _routes_exact_prefix_and_errors(server: HttpServer) -> None:
    assert await _call(server.port, "GET", "/echo?x=7") == (200, b"GET 7 0")
    assert await _call(server.port, "POST", "/echo", b"abc") == (200, b"POST None 3")
    assert await _call(server.port, "GET", "/static/app.js") == (200, b"/static/app.js")
    assert (await _call(server.port, "GET", "/nope"))[0] == 404
    assert (await _call(server.port, "DELETE", "/echo"))[0] == 405
    assert (await _call(server.port, "GET", "/boom"))[0] == 500
    status, body = await _call(server.port, "HEAD", "/echo")
    assert (status, body) == (200, b"")


def test_keep_alive_serves_requests_in_turn() -> None:
    _serving(_keep_alive_serves_requests_in_turn)


async def _keep_alive_serves_requests_in_turn(server: HttpServer) -> None:
    def two() -> list[bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        out = []
        for x in (1, 2):
            conn.request("GET", f"/echo?x={x}")
            out.append(conn.getresponse().read())
        conn.close()
        return out

    assert await asyncio.to_thread(two) == [b"GET 1 0", b"GET 2 0"]


def test_bounds_body_connections_idle_and_garbage() -> None:
    _serving(_bounds_body_connections_idle_and_garbage)


async def _bounds_body_connections_idle_and_garbage(server: HttpServer) -> None:
    status, _ = await _call(server.port, "POST", "/echo", b"x" * 101)
    assert status == 413
    held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(3)]
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    answer = await asyncio.wait_for(reader.read(), 5)
    assert answer.startswith(b"HTTP/1.1 503")
    writer.close()
    # Idle connections are closed after idle_timeout_s, which frees their places.
    for held_reader, _ in held:
        assert await asyncio.wait_for(held_reader.read(), 5) == b""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"\x00\x01 not http at all\r\n\r\n")
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n")
    assert b"200" not in await asyncio.wait_for(reader.read(), 5)
    writer.close()
    assert await _call(server.port, "GET", "/echo?x=ok") == (200, b"GET ok 0")


def test_https_handshakes_count_against_the_connection_bound(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """Over HTTPS a connection takes its place before its TLS handshake: connections that
    never handshake fill the bound (the next is closed) until the handshake timeout
    drops them; then requests are served over TLS again."""
    import ssl

    from sluice.security.certificates import write_development_pki
    from sluice.security.ssl_engine_factory import SslEngineFactory
    from sluice.server import http_server

    monkeypatch.setattr(http_server, "TLS_HANDSHAKE_TIMEOUT_S", 0.5)
    pki = write_development_pki(tmp_path)
    server_context = SslEngineFactory({"ssl.keystore.location": str(pki.broker)}).server_context()
    client_context = ssl.create_default_context(cafile=str(pki.ca))

    def get(port: int) -> tuple[int, bytes]:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=client_context)
        try:
            conn.request("GET", "/echo?x=tls")
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    async def run() -> None:
        srv = HttpServer("test", _router(), max_connections=3)
        await srv.start("127.0.0.1", 0, server_context)
        try:
            assert srv.scheme == "https"
            assert await asyncio.to_thread(get, srv.port) == (200, b"GET tls 0")
            silent = [await asyncio.open_connection("127.0.0.1", srv.port) for _ in range(3)]
            reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            assert await asyncio.wait_for(reader.read(), 5) == b""  # no place: closed
            writer.close()
            for silent_reader, _ in silent:  # dropped at the handshake timeout
                assert await asyncio.wait_for(silent_reader.read(), 5) == b""
            assert await asyncio.to_thread(get, srv.port) == (200, b"GET tls 0")
        finally:
            await srv.stop()

    asyncio.run(run())
