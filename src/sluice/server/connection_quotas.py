"""``ConnectionQuotas``: how many client connections the broker holds, in all and per address.

Kafka's connection limits, with its names and semantics:

* ``max.connections``: connections the broker holds at once, over all its listeners. At
  the limit the listeners stop accepting; a new connection waits in the listen backlog
  until one closes (Kafka's acceptor blocks on the same count).
* ``max.connections.per.ip``: connections from one address. One more is closed as
  soon as it is accepted (Kafka's ``TooManyConnectionsException``).
* ``max.connections.per.ip.overrides``: ``host:count,host:count`` — a different limit
  for some addresses (a host name stands for the addresses it resolves to at start).
  ``max.connections.per.ip`` may be 0 only when overrides are set: then only the
  addresses listed may connect.

Addresses are compared as addresses: an IPv4 address seen on a dual-stack socket as
``::ffff:a.b.c.d`` counts as ``a.b.c.d``. This module does no I/O except resolving the
overrides' host names once (:meth:`ConnectionQuotas.from_config`).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Mapping
from typing import Final

from sluice.config import INT_MAX, BrokerConfig, ConfigError, parse_connection_overrides

__all__ = ["ConnectionQuotas", "normalize_address"]

UNLIMITED: Final = INT_MAX


def normalize_address(host: str) -> str:
    """``host`` (an address as a socket reports it) in one spelling per address."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _resolve(host: str) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ConfigError(
            f"cannot resolve {host!r} in max.connections.per.ip.overrides: {exc}"
        ) from None
    return sorted({normalize_address(str(info[4][0])) for info in infos})


class ConnectionQuotas:
    """The connection counts of one broker (shared by its listeners) and their limits."""

    __slots__ = ("_counts", "_max", "_max_per_ip", "_on_slot_free", "_overrides", "_total")

    def __init__(
        self,
        max_connections: int = UNLIMITED,
        max_per_ip: int = UNLIMITED,
        overrides: Mapping[str, int] | None = None,
    ) -> None:
        """``overrides``: per-address limits, keyed by address (as :func:`normalize_address`
        spells it)."""
        self._max = max_connections
        self._max_per_ip = max_per_ip
        self._overrides = {normalize_address(k): v for k, v in (overrides or {}).items()}
        self._counts: dict[str, int] = {}
        self._total = 0
        self._on_slot_free: list[Callable[[], None]] = []

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ConnectionQuotas:
        """From ``max.connections``, ``max.connections.per.ip`` and its overrides, whose
        host names are resolved now (an unknown one is a :class:`ConfigError`)."""
        overrides: dict[str, int] = {}
        for host, count in parse_connection_overrides(
            config["max.connections.per.ip.overrides"]
        ).items():
            for address in _resolve(host):
                overrides[address] = count
        return cls(config["max.connections"], config["max.connections.per.ip"], overrides)

    def reconfigure(self, limits: ConnectionQuotas) -> None:
        """Take the limits of ``limits`` (dynamic broker configs changed) and keep the
        counts: connections over a lowered limit stay open, as in Kafka; if the broker
        is no longer at ``max.connections``, the listeners accept again."""
        was_full = self.full
        self._max, self._max_per_ip = limits._max, limits._max_per_ip
        self._overrides = dict(limits._overrides)
        if was_full and not self.full:
            for callback in list(self._on_slot_free):
                callback()

    @property
    def total(self) -> int:
        """Connections held now."""
        return self._total

    @property
    def max_connections(self) -> int:
        return self._max

    @property
    def full(self) -> bool:
        """Whether ``max.connections`` is reached: accepting must wait."""
        return self._total >= self._max

    def count(self, address: str) -> int:
        return self._counts.get(normalize_address(address), 0)

    def max_for(self, address: str) -> int:
        """The limit for connections from ``address``."""
        return self._overrides.get(normalize_address(address), self._max_per_ip)

    def try_add(self, address: str) -> str | None:
        """Count a connection just accepted from ``address``; returns the key to give
        :meth:`remove` when it closes, or None if ``address`` is at its limit (the
        connection must be closed; nothing is counted)."""
        key = normalize_address(address)
        count = self._counts.get(key, 0)
        if count >= self._overrides.get(key, self._max_per_ip):
            return None
        self._counts[key] = count + 1
        self._total += 1
        return key

    def remove(self, key: str) -> None:
        """A connection counted under ``key`` closed."""
        count = self._counts.get(key, 0)
        if count <= 0:
            return
        if count == 1:
            del self._counts[key]
        else:
            self._counts[key] = count - 1
        was_full = self._total >= self._max
        self._total -= 1
        if was_full and self._total < self._max:
            for callback in list(self._on_slot_free):
                callback()

    def on_slot_free(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever a connection closes below ``max.connections``."""
        self._on_slot_free.append(callback)

    def discard_callback(self, callback: Callable[[], None]) -> None:
        if callback in self._on_slot_free:
            self._on_slot_free.remove(callback)
