"""Loopback ports to listen on later, chosen where outgoing connections cannot take them.

A test cluster picks its brokers' ports before it starts them, and keeps each port
across a broker's restart. A port taken with ``bind(port 0)`` comes from the kernel's
ephemeral range, the same range every outgoing connection takes its source port from,
so between the pick and the listener's bind a client connection elsewhere in the process
(to ZooKeeper, to another broker) may hold it: the listener then fails with "address
already in use". :func:`free_port` picks from outside that range instead, never hands
out the same port twice in one process, and checks that nothing listens there now.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

__all__ = ["ephemeral_range", "free_port", "listen_candidates"]

_LOWEST = 10_000
_HIGHEST = 65_535
_handed_out: set[int] = set()
_lock = threading.Lock()


def ephemeral_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> range:
    """The kernel's ephemeral (source) port range, Linux's default where unreadable."""
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        low, high = 32_768, 60_999
    return range(low, high + 1)


def listen_candidates(ephemeral: range) -> list[range]:
    """The stretches of ``[10000, 65535]`` outside ``ephemeral`` of 1,000 ports or more."""
    stretches = [
        range(_LOWEST, max(_LOWEST, min(ephemeral.start, _HIGHEST + 1))),
        range(max(_LOWEST, ephemeral.stop), _HIGHEST + 1),
    ]
    return [s for s in stretches if len(s) >= 1_000]


def _bindable(port: int, host: str) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on now, outside the ephemeral range
    and not returned before by this process; ``bind(port 0)``'s pick if every stretch
    outside the range is too short or full."""
    stretches = listen_candidates(ephemeral_range())
    with _lock:
        for _ in range(200):
            if not stretches:
                break
            (stretch,) = random.choices(stretches, weights=[len(s) for s in stretches])
            port = random.choice(stretch)
            if port not in _handed_out and _bindable(port, host):
                _handed_out.add(port)
                return port
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                port = int(sock.getsockname()[1])
            if port not in _handed_out:
                _handed_out.add(port)
                return port
