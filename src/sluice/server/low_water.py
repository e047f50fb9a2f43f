"""Wake the event loop once per large frame, not once per TCP segment.

A ~1 MB frame (a Produce of full batches, a follower's Fetch answer) reaches the socket
in many segments; by default the kernel reports it readable as soon as any byte is
there, so the loop wakes, reads a piece and sleeps again, several times per frame, each
time with a system call, a loop turn and, for a process that was asleep, a context
switch that on a busy machine also preempts whoever was running. While a large frame is
being received, :class:`ReceiveLowWater` raises the socket's receive low-water mark
(``SO_RCVLOWAT``) to the bytes of the frame still to come, so readiness comes once they
are all there and one ``recv_into`` takes them; when the frame is complete the mark
goes back to 1.

The mark never exceeds what the peer still owes for the frame, so a peer that sends its
frame whole is never waited for longer than before. Linux reports a socket readable
regardless of the mark on end of stream, on an error, and when the receive window is
nearly closed (so a mark the buffer could not hold does not stall the sender); it also
grows the receive buffer to hold the mark. Those guarantees are Linux's, so the mark is
only raised there; elsewhere, or where the option is refused, the socket keeps waking
per segment, as without this class. On TLS connections the mark leaves room for one
incomplete record TLS holds (:data:`TLS_HELD_BYTES`), and asyncio's TLS transport
decrypts whatever it has whenever the socket wakes it.
"""

from __future__ import annotations

import asyncio
import socket
import sys

__all__ = ["MIN_LOW_WATER_BYTES", "TLS_HELD_BYTES", "ReceiveLowWater"]

MIN_LOW_WATER_BYTES = 1 << 16
"""A rest of a frame at most this large is read as it comes (mark 1): one or two
segments, not worth two system calls."""

TLS_HELD_BYTES = 16_384 + 2_048 + 5
"""The most ciphertext TLS may hold read from the socket but not yet decrypted when
nothing else is pending: one incomplete record (at most 16 KiB of data, 2 KiB of
expansion and a 5-byte header)."""

_OPTION: int = getattr(socket, "SO_RCVLOWAT", -1) if sys.platform == "linux" else -1


class ReceiveLowWater:
    """The receive low-water mark of one connection's socket, set only when it changes."""

    __slots__ = ("_held", "_mark", "_sock")

    def __init__(self, transport: asyncio.BaseTransport | None = None) -> None:
        """``transport`` None (not connected yet): nothing is ever set. On a TLS transport
        the mark is the frame's rest less :data:`TLS_HELD_BYTES`: TLS may hold part of a
        record already read from the socket, so the socket may owe that much less than
        the rest (and never less: every record adds to the bytes it carries)."""
        sock = transport.get_extra_info("socket") if transport is not None else None
        tls = transport is not None and transport.get_extra_info("sslcontext") is not None
        self._held = TLS_HELD_BYTES if tls else 0
        self._sock = sock if _OPTION >= 0 and sock is not None else None
        self._mark = 1

    @property
    def mark(self) -> int:
        return self._mark

    def expect(self, rest: int) -> None:
        """The frame being received still lacks ``rest`` bytes (0: it is complete)."""
        rest -= self._held
        mark = rest if rest > MIN_LOW_WATER_BYTES else 1
        sock = self._sock
        if mark == self._mark or sock is None:
            return
        try:
            sock.setsockopt(socket.SOL_SOCKET, _OPTION, mark)
        except OSError:  # refused, or the socket is closed: wake per segment from now on
            self._sock, self._mark = None, 1
            return
        self._mark = mark
