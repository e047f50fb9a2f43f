"""``Acceptor``: accepts one listener's connections within the broker's connection limits.

As Kafka's acceptor does, it takes connections off the listening sockets and checks each
against the :class:`~sluice.server.connection_quotas.ConnectionQuotas` before anything
is read from it:

* at ``max.connections`` it stops accepting (the listening sockets leave the event
  loop's watch) until a connection closes; new clients wait in the listen backlog;
* a connection from an address at its ``max.connections.per.ip`` limit is closed at
  once;
* when accepting fails for want of resources (``EMFILE``/``ENFILE``, the open-file
  limit; ``ENOBUFS``/``ENOMEM``), it stops accepting for a back-off that doubles from
  0.1 s up to 1 s while the failures last, and says so in one rate-limited log line
  (:class:`~sluice.base.rate_limited_log.RateLimitedLog`) instead of one traceback per
  attempt, as asyncio's own server would.

What becomes of an accepted socket is the owner's: ``connect(sock, key)`` gets it, with
the quota key to release when the connection closes.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable
from typing import Final

from sluice.base.rate_limited_log import RateLimitedLog
from sluice.server.connection_quotas import ConnectionQuotas

__all__ = ["ACCEPT_BACKOFF_S", "MAX_ACCEPT_BACKOFF_S", "Acceptor", "bind_listener"]

log = logging.getLogger(__name__)

BACKLOG: Final = 100  # asyncio's default for create_server
ACCEPTS_PER_WAKEUP: Final = BACKLOG
ACCEPT_BACKOFF_S: Final = 0.1
"""The first pause after accepting failed for want of resources; it doubles while they
last."""
MAX_ACCEPT_BACKOFF_S: Final = 1.0
_OUT_OF_RESOURCES: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

Connect = Callable[[socket.socket, str], None]
"""Takes an accepted socket (non-blocking) and the quota key of its address."""


def bind_listener(
    host: str, port: int, backlog: int = BACKLOG, send_buffer: int = -1, receive_buffer: int = -1
) -> list[socket.socket]:
    """Listening sockets for ``host:port``, one per address it resolves to (as asyncio's
    ``create_server`` binds them: address reuse on, IPv6 sockets IPv6-only).

    ``send_buffer`` and ``receive_buffer`` (``socket.send.buffer.bytes``,
    ``socket.receive.buffer.bytes``; -1: the system's) are set on the listening sockets
    before they listen, so that the window scale a connection agrees in its handshake
    fits the receive buffer; the sockets accepted from them inherit both sizes."""
    infos = socket.getaddrinfo(
        host or None, port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM,
        flags=socket.AI_PASSIVE,
    )  # fmt: skip
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _name, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
            if receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise OSError(
                    exc.errno, f"error while attempting to bind on address {address!r}: "
                    f"{(exc.strerror or str(exc)).lower()}",
                ) from None  # fmt: skip
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class Acceptor:
    """Accepts on ``sockets`` (from :func:`bind_listener`) while the quotas allow."""

    def __init__(
        self,
        sockets: list[socket.socket],
        connect: Connect,
        quotas: ConnectionQuotas,
        events: RateLimitedLog,
    ) -> None:
        """``events``: where the events clients cause are logged, rate-limited."""
        self.sockets = sockets
        self._connect = connect
        self._quotas = quotas
        self._events = events
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watching = False
        self._closed = False
        self._backoff_s = 0.0  # the current pause after running out of resources (0: none)
        self._retry: asyncio.TimerHandle | None = None
        self.paused_for_limit = False  # stopped at max.connections
        self.refused = 0  # connections closed at once for their address's limit

    @property
    def port(self) -> int:
        port: int = self.sockets[0].getsockname()[1]
        return port

    @property
    def name(self) -> str:
        """The listener, as its log lines name it."""
        host, port = self.sockets[0].getsockname()[:2]
        return f"listener {host}:{port}"

    @property
    def accepting(self) -> bool:
        """Whether the listening sockets are watched now."""
        return self._watching

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._quotas.on_slot_free(self._slot_free)
        self._watch()

    def close(self) -> None:
        """Stop accepting for good and close the listening sockets."""
        if self._closed:
            return
        self._closed = True
        self._unwatch()
        if self._retry is not None:
            self._retry.cancel()
        self._quotas.discard_callback(self._slot_free)
        for sock in self.sockets:
            sock.close()

    # -- watching -----------------------------------------------------------------------
    def _watch(self) -> None:
        if self._watching or self._closed or self._loop is None:
            return
        if self._quotas.full:
            self.paused_for_limit = True
            return
        self._watching = True
        self.paused_for_limit = False
        for sock in self.sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _unwatch(self) -> None:
        if not self._watching or self._loop is None:
            return
        self._watching = False
        for sock in self.sockets:
            self._loop.remove_reader(sock.fileno())

    def _slot_free(self) -> None:
        if self.paused_for_limit and self._retry is None:
            self._watch()

    def _resume_after_backoff(self) -> None:
        self._retry = None
        self._watch()

    # -- accepting ----------------------------------------------------------------------
    def _accept(self, listening: socket.socket) -> None:
        quotas = self._quotas
        for _ in range(ACCEPTS_PER_WAKEUP):
            if quotas.full:
                self._unwatch()
                self.paused_for_limit = True
                return
            try:
                sock, address = listening.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    self._back_off(exc)
                else:
                    self._events.event("accepting failed", self.name, exc)
                return
            self._backoff_s = 0.0
            host = str(address[0]) if isinstance(address, tuple) else str(address)
            key = quotas.try_add(host)
            if key is None:
                self.refused += 1
                peer = f"{host}:{address[1]}" if isinstance(address, tuple) else host
                self._events.event(
                    "refused a connection", peer,
                    f"too many connections from {host} "
                    f"(max.connections.per.ip {quotas.max_for(host)})",
                )  # fmt: skip
                sock.close()
                continue
            sock.setblocking(False)
            try:
                self._connect(sock, key)
            except Exception:
                quotas.remove(key)
                sock.close()
                log.exception("cannot serve a connection from %s", host)

    def _back_off(self, exc: OSError) -> None:
        """Out of descriptors or buffers: stop accepting for a while, said once."""
        delay = self._backoff_s = min(
            max(self._backoff_s * 2, ACCEPT_BACKOFF_S), MAX_ACCEPT_BACKOFF_S
        )
        self._events.event(
            "accepting paused", self.name,
            f"{exc.strerror or exc} ({errno.errorcode.get(exc.errno or 0, exc.errno)}), "
            f"{self._quotas.total} connections open; accepting again in {delay:g} s",
        )  # fmt: skip
        self._unwatch()
        assert self._loop is not None
        if self._retry is None:
            self._retry = self._loop.call_later(delay, self._resume_after_backoff)
