"""Who the console's Kafka clients are: the listener they use and the logins.

The console is a Kafka client of its own broker (:class:`~.cluster_view.ClusterView`).
:func:`console_listener` picks the listener it connects to (``console.listener.name``,
or by default the first SASL listener, else the first PLAINTEXT or SSL one): on a SASL
listener every console user logs in with HTTP Basic credentials, which become the SASL
PLAIN or SCRAM credentials of their clients; on a PLAINTEXT or SSL listener there is no
login and the clients are ``User:ANONYMOUS``, as any client there. An SSL listener that
requires client certificates cannot serve the console.

:class:`Sessions` keeps the logged-in users' views: at most ``max_sessions`` (the least
recently used one is closed beyond), each closed after ``idle_s`` without a request. A
session is found by a keyed hash of the user name and password; the password itself
lives only in that session's client settings, which its connections need to
authenticate again.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sluice.config import BrokerConfig, ConfigError

__all__ = ["LOGIN_MECHANISMS", "ConsoleListener", "ListenerInfo", "Sessions", "console_listener"]

LOGIN_MECHANISMS: Final = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
"""The SASL mechanisms a console login may use, tried in this order among those the
listener enables."""
_TRUSTSTORE_CONFIGS: Final = (
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
    "ssl.truststore.password", "ssl.endpoint.identification.algorithm",
)  # fmt: skip


@dataclass(frozen=True)
class ListenerInfo:
    """A bound listener as the console sees it."""

    name: str
    security_protocol: str
    host: str  # where the console connects: the advertised host, else the bound one
    port: int
    client_certificate_required: bool = False
    sasl_mechanisms: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConsoleListener:
    """The listener the console's clients use, and how they connect to it."""

    name: str
    security_protocol: str
    bootstrap: str
    mechanisms: tuple[str, ...] = ()
    """The SASL mechanisms a login tries, preferred first; empty: no login."""
    ssl: Mapping[str, Any] = field(default_factory=dict)

    @property
    def login_required(self) -> bool:
        return bool(self.mechanisms)

    def client_config(
        self, user: str | None = None, password: str | None = None, mechanism: str | None = None
    ) -> dict[str, Any]:
        """Settings of a Sluice client on this listener, logged in as ``user``."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": self.security_protocol,
            **self.ssl,
        }
        if self.login_required:
            config.update({"sasl.mechanism": mechanism or self.mechanisms[0],
                           "sasl.username": user, "sasl.password": password})  # fmt: skip
        return config


def _connect_host(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host


def console_listener(config: BrokerConfig, listeners: Iterable[ListenerInfo]) -> ConsoleListener:
    """The listener named by ``console.listener.name``, or the default one; ConfigError
    when it cannot serve the console."""
    bound = list(listeners)
    wanted = str(config["console.listener.name"] or "").upper()
    if wanted:
        chosen = next((listener for listener in bound if listener.name == wanted), None)
        if chosen is None:
            raise ConfigError(
                f"console.listener.name {wanted} is not one of the listeners "
                f"({', '.join(listener.name for listener in bound)})"
            )
    else:
        usable = [listener for listener in bound if not listener.client_certificate_required]
        sasl = [listener for listener in usable if listener.sasl_mechanisms]
        candidates = sasl or usable
        if not candidates:
            raise ConfigError(
                "the console needs a SASL, PLAINTEXT or SSL listener without required "
                "client certificates; set console.listener.name or console.port=-1"
            )
        chosen = candidates[0]
    if chosen.client_certificate_required:
        raise ConfigError(
            f"console.listener.name {chosen.name}: the listener requires client "
            "certificates, which the console does not have; use a SASL or PLAINTEXT listener"
        )
    mechanisms: tuple[str, ...] = ()
    if chosen.security_protocol.startswith("SASL_"):
        mechanisms = tuple(m for m in LOGIN_MECHANISMS if m in chosen.sasl_mechanisms)
        if not mechanisms:
            raise ConfigError(
                f"console.listener.name {chosen.name}: the console logs in with "
                f"{', '.join(LOGIN_MECHANISMS)}, none of which the listener enables"
            )
    ssl: dict[str, Any] = {}
    if chosen.security_protocol.endswith("SSL"):
        for key in _TRUSTSTORE_CONFIGS:
            value = config.for_listener(chosen.name, key)
            if value is not None:
                ssl[key] = value
    bootstrap = f"{_connect_host(chosen.host)}:{chosen.port}"
    if ":" in _connect_host(chosen.host):
        bootstrap = f"[{_connect_host(chosen.host)}]:{chosen.port}"
    return ConsoleListener(chosen.name, chosen.security_protocol, bootstrap, mechanisms, ssl)


@dataclass
class Session:
    """One login's view of the cluster and when it was last used."""

    user: str | None
    view: Any  # a ClusterView (or, in tests, what stands for one)
    last_used: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while the view works: its clients serve one request at a time."""


class Sessions:
    """The logged-in users' sessions, bounded in number and idle time. ``close`` is
    called with each view that is let go (off the event loop, by the caller's choice)."""

    def __init__(
        self,
        close: Callable[[Any], None],
        now: Callable[[], float],
        *,
        max_sessions: int = 16,
        idle_s: float = 600.0,
    ) -> None:
        self._close = close
        self._now = now
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self._secret = secrets.token_bytes(32)  # per process: the keys mean nothing elsewhere
        self._sessions: OrderedDict[bytes, Session] = OrderedDict()

    def key(self, user: str | None, password: str | None) -> bytes:
        text = f"{user or ''}\0{password or ''}".encode()
        return hmac.new(self._secret, text, hashlib.sha256).digest()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: bytes) -> Session | None:
        """The session of ``key`` if it is still open (and now used)."""
        self.expire()
        session = self._sessions.get(key)
        if session is not None:
            session.last_used = self._now()
            self._sessions.move_to_end(key)
        return session

    def add(self, key: bytes, user: str | None, view: Any) -> Session:
        """A new session; beyond ``max_sessions`` the least recently used one closes."""
        old = self._sessions.pop(key, None)
        if old is not None:
            self._close(old.view)
        session = self._sessions[key] = Session(user, view, self._now())
        while len(self._sessions) > self.max_sessions:
            _, evicted = self._sessions.popitem(last=False)
            self._close(evicted.view)
        return session

    def expire(self) -> None:
        """Close the sessions idle for ``idle_s``."""
        cutoff = self._now() - self.idle_s
        while self._sessions:
            key, oldest = next(iter(self._sessions.items()))
            if oldest.last_used > cutoff:
                break
            del self._sessions[key]
            self._close(oldest.view)

    def close_all(self) -> None:
        while self._sessions:
            _, session = self._sessions.popitem(last=False)
            self._close(session.view)
