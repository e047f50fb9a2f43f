"""TCP congestion control on loopback connections.

A connection whose peer is on a loopback address (a client or another broker on the same
host: tests, an embedded broker, a sidecar, a cluster on one machine) meets neither
congestion nor loss, yet the system's congestion control still runs on every send and
every ACK. A model-based algorithm such as BBR costs the sender CPU there for nothing,
most of it in the ``sendfile`` of large Fetch answers; ``reno`` costs the least.

So the broker sets ``socket.loopback.congestion.control`` (default ``reno``: built into
every Linux kernel and allowed to unprivileged processes) on the connections that carry
data, when their peer is a loopback address: those its listeners accept and those its
replica fetchers open. Every other connection (any peer elsewhere; the controller's,
transaction markers' and controlled shutdown's few small requests) keeps the system's
algorithm. An empty value keeps the system's everywhere. An algorithm the kernel refuses
(not built, or outside ``net.ipv4.tcp_allowed_congestion_control`` for an unprivileged
broker) is reported once, when the broker starts, and not used. ``TCP_CONGESTION`` is
Linux's; elsewhere nothing is set.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import socket
import sys
from typing import Any, Final

__all__ = ["checked_algorithm", "is_loopback", "set_on_loopback"]

log = logging.getLogger(__name__)

_OPTION: Final[int | None] = (
    getattr(socket, "TCP_CONGESTION", None) if sys.platform == "linux" else None
)
_INET: Final = (socket.AF_INET, socket.AF_INET6)


def is_loopback(address: str) -> bool:
    """Whether an IP address (``127.0.0.0/8``, ``::1``, an IPv4-mapped ``::ffff:127.x``;
    a zone suffix ``%lo`` ignored) is a loopback address. Anything else, names included: no."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


@functools.lru_cache(maxsize=8)
def checked_algorithm(name: str) -> bytes | None:
    """``name`` as the socket option wants it, if the kernel accepts it on a probe socket;
    None when it is empty, refused (reported once per name) or the platform lacks the
    option."""
    if not name or _OPTION is None:
        return None
    try:
        value = name.encode("ascii")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.IPPROTO_TCP, _OPTION, value)
    except (OSError, UnicodeEncodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        log.warning(
            "socket.loopback.congestion.control=%r refused (%s): loopback connections "
            "keep the system's congestion control",
            name,
            reason,
        )
        return None
    return value


def set_on_loopback(transport: Any, name: str) -> bool:
    """Set the congestion control ``name`` on a connected transport's TCP socket when its
    peer is on a loopback address. True if it was set; False otherwise (another peer, no
    socket, the name refused, or the socket already closed)."""
    algorithm = checked_algorithm(name)
    if algorithm is None or _OPTION is None:
        return False
    sock = transport.get_extra_info("socket")
    peer = transport.get_extra_info("peername")
    if sock is None or sock.family not in _INET or not peer or not is_loopback(str(peer[0])):
        return False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, _OPTION, algorithm)
    except OSError:  # the peer is already gone
        return False
    return True
