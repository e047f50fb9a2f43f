"""Writing a response that holds file regions: buffers with ``writev``, regions with ``sendfile``.

``loop.sendfile`` costs, per region, a pause and resume of reading, a wait for an
empty write buffer, an ``fstat``, an ``lseek``, a writer registered and removed and at
least one extra turn of the event loop. A Fetch response is usually one header, one
region and a few trailing bytes, so :func:`write_segments` writes it straight to the
(non-blocking) socket when the transport's write buffer is empty: the header with
``os.writev``, the region with ``os.sendfile`` and the rest with ``os.writev``, the socket
corked (``TCP_CORK``) meanwhile so that the header and the trailing bytes travel in the
region's packets instead of packets of their own. Only when the socket is full
(``EAGAIN`` or a partial send) does it wait, for writability of a duplicate of the
socket descriptor (the event loop refuses a descriptor its transport owns).

Before its first wait it duplicates the descriptors of the regions still to send, so a
segment file deleted or closed meanwhile (the log's file cache closes idle ones) is
still read to the end, and the descriptor number, if reused, is never written to. A
region cut short (the file truncated underneath) cannot be completed inside a response
whose size is already written: the connection is closed (``ConnectionAbortedError``)
and the client fetches again.

The caller writes one response at a time per connection (as ``loop.sendfile`` also
requires). A transport whose buffer still holds bytes falls back to ``loop.sendfile``.
A TLS transport cannot take a file region at all (the bytes must pass through
encryption): :func:`write_segments` reads each region with ``os.pread`` in pieces of
``TLS_READ_BYTES`` and writes them through the transport, waiting for its buffer to
drain below its high-water mark before the next piece, so a response held in memory is
at most about one piece plus that mark, however large the region.

A client that goes away before or during its answer (its reset closes the transport,
also between two regions sent with ``loop.sendfile``) ends the write with
``ConnectionResetError``, which the connection takes as closed: no error is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
from typing import Any, Final, Protocol

from sluice.protocol.fetch import is_file_region

__all__ = [
    "CLOSED_CHECK_S",
    "TLS_READ_BYTES",
    "ResponseWriter",
    "SendfileSource",
    "holds_file_region",
    "write_segments",
]

log = logging.getLogger(__name__)

TLS_READ_BYTES: Final = 256 * 1024
"""How much of a file region is read at a time for a TLS connection."""
CLOSED_CHECK_S: Final = 1.0
"""While the socket is full, how often a wait also checks whether the transport closed."""

_TCP_CORK: Final = getattr(socket, "TCP_CORK", None)
_INET: Final = (socket.AF_INET, socket.AF_INET6)
_IOV_MAX: Final = 512  # well below every platform's IOV_MAX (1024 on Linux)


class ResponseWriter(Protocol):
    """What :func:`write_segments` needs of a connection's writer (an asyncio
    ``StreamWriter`` has it): its transport, ``writelines`` and ``drain``."""

    @property
    def transport(self) -> Any: ...

    def writelines(self, data: Any) -> None: ...

    async def drain(self) -> None: ...


class SendfileSource:
    """The file-object face ``loop.sendfile`` wants for a log file descriptor (positional
    reads only: the log itself never uses the file position)."""

    __slots__ = ("_fd",)
    mode = "rb"

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        return offset


def holds_file_region(segments: list[Any]) -> bool:
    """Whether an encoded response has a file region to send (else it is all buffers)."""
    return any(is_file_region(segment) for segment in segments)


async def write_segments(writer: ResponseWriter, segments: list[Any]) -> None:
    """Write a response: buffers as they are, file regions zero-copy with ``sendfile``."""
    if not holds_file_region(segments):
        writer.writelines(segments)
        await writer.drain()
        return
    transport: Any = writer.transport
    if transport.is_closing():  # the client went away before its answer
        raise _closed()
    if transport.get_extra_info("sslcontext") is not None:
        await _write_through_transport(writer, segments)
        return
    sock = _direct_socket(transport)
    if sock is None:
        await _write_with_loop_sendfile(writer, segments)
        return
    send = _DirectSend(sock.fileno(), segments)
    cork = _TCP_CORK is not None and sock.family in _INET and len(segments) > 1
    if cork:
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_CORK, 1)
    try:
        while not send.step():
            await send.writable(transport)
    finally:
        send.close()
        if cork and not transport.is_closing():
            # Uncorking pushes what is held; if the connection is gone, its reader sees it.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, _TCP_CORK, 0)


def _direct_socket(transport: Any) -> Any:
    """The transport's socket when bytes may go to it directly: a plain socket transport
    (the kind ``loop.sendfile`` sends natively on), open, with nothing buffered."""
    if getattr(transport, "_sendfile_compatible", None) is not _NATIVE:
        return None
    if transport.is_closing() or transport.get_write_buffer_size():
        return None
    return transport.get_extra_info("socket")


def _native_mode() -> Any:
    try:
        from asyncio import constants

        return constants._SendfileMode.TRY_NATIVE
    except AttributeError:  # pragma: no cover - another asyncio: always fall back
        return object()


_NATIVE: Final = _native_mode()


async def _write_with_loop_sendfile(writer: ResponseWriter, segments: list[Any]) -> None:
    pending: list[Any] = []
    loop = asyncio.get_running_loop()
    for segment in segments:
        if is_file_region(segment):
            if pending:
                writer.writelines(pending)
                pending = []
            transport = writer.transport
            if transport.is_closing():  # reset by the client between two regions
                raise _closed()
            # A duplicate, used across event-loop turns: the log's file cache may close
            # the segment's own descriptor meanwhile.
            source = SendfileSource(os.dup(segment.fileno()))
            try:  # no fallback: it would read the file through methods a raw fd lacks
                sent = await loop.sendfile(
                    transport,
                    source,  # type: ignore[arg-type]
                    segment.position,
                    segment.size,
                    fallback=False,
                )
            except asyncio.SendfileNotAvailableError as exc:  # the peer or the file went away
                raise ConnectionResetError(errno.ECONNRESET, f"sendfile failed: {exc}") from exc
            except RuntimeError as exc:  # "Transport is closing": closed while it waited
                if transport.is_closing():
                    raise _closed() from exc
                raise
            finally:
                os.close(source.fileno())
            if sent != segment.size:
                raise _cut_short(segment, sent)
        else:
            pending.append(segment)
    if pending:
        writer.writelines(pending)
    await writer.drain()


def _closed() -> ConnectionResetError:
    return ConnectionResetError(errno.ECONNRESET, "connection closed during a response")


async def _write_through_transport(writer: ResponseWriter, segments: list[Any]) -> None:
    """Write a response whose regions cannot be sent from the file (TLS): each region read
    in pieces (from a duplicate of its descriptor, which stays readable if the log's file
    cache closes its own meanwhile), each piece written once the transport drained."""
    fds: dict[int, int] = {}
    try:
        for i, segment in enumerate(segments):
            if is_file_region(segment):
                fds[i] = os.dup(segment.fileno())
        pending: list[Any] = []
        for i, segment in enumerate(segments):
            if not is_file_region(segment):
                pending.append(segment)
                continue
            fd = fds[i]
            position, end = segment.position, segment.position + segment.size
            while position < end:
                piece = os.pread(fd, min(TLS_READ_BYTES, end - position), position)
                if not piece:
                    raise _cut_short(segment, position - segment.position)
                pending.append(piece)
                if writer.transport.is_closing():  # the client went away meanwhile
                    raise _closed()
                writer.writelines(pending)
                pending = []
                position += len(piece)
                await writer.drain()
        if pending:
            writer.writelines(pending)
        await writer.drain()
    finally:
        for fd in fds.values():
            os.close(fd)


def _cut_short(region: Any, sent: int) -> ConnectionAbortedError:
    log.warning(
        "closing a connection: %d of %d bytes of %r sent, the file ended", sent, region.size, region
    )
    return ConnectionAbortedError(errno.ECONNABORTED, "file region ended before its size")


class _DirectSend:
    """The state of one response written straight to the socket: which segment is next
    and how much of it is sent."""

    __slots__ = ("_dups", "_fd", "_index", "_offset", "_region_fds", "_segments", "_sock_dup")

    def __init__(self, fd: int, segments: list[Any]) -> None:
        self._fd = fd
        self._segments = segments
        self._index = 0
        self._offset = 0  # bytes of segments[_index] already sent
        # Resolved now, before any await: a closed segment file raises here.
        self._region_fds = {
            i: s.fileno() for i, s in enumerate(segments) if is_file_region(s) and s.size
        }
        self._dups: list[int] = []
        self._sock_dup = -1

    def step(self) -> bool:
        """Send as much as the socket takes; True when the whole response is sent."""
        segments = self._segments
        count = len(segments)
        fd = self._fd
        while self._index < count:
            segment = segments[self._index]
            if is_file_region(segment):
                remaining = segment.size - self._offset
                if remaining <= 0:
                    self._next()
                    continue
                in_fd = self._region_fds[self._index]
                try:
                    sent = os.sendfile(fd, in_fd, segment.position + self._offset, remaining)
                except (BlockingIOError, InterruptedError):
                    return False
                if sent == 0:
                    raise _cut_short(segment, self._offset)
                self._offset += sent
                if sent < remaining:
                    return False
                self._next()
            else:
                if not self._send_buffers(fd):
                    return False
        return True

    def _send_buffers(self, fd: int) -> bool:
        """Send the run of buffers from the current one; False if the socket filled."""
        segments = self._segments
        end = self._index
        while end < len(segments) and end - self._index < _IOV_MAX:
            if is_file_region(segments[end]):
                break
            end += 1
        views = [memoryview(s) for s in segments[self._index : end]]
        if self._offset:
            views[0] = views[0][self._offset :]
        try:
            sent = os.writev(fd, views) if views else 0
        except (BlockingIOError, InterruptedError):
            return False
        for view in views:
            size = view.nbytes
            if sent < size:
                self._offset += sent
                return False
            sent -= size
            self._next()
        return True

    def _next(self) -> None:
        self._index += 1
        self._offset = 0

    async def writable(self, transport: Any) -> None:
        """Wait until the socket takes more (or ``CLOSED_CHECK_S`` passes); from the first
        wait on, send through duplicates so closed descriptors are never used."""
        if self._sock_dup < 0:
            self._hold_descriptors()
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        loop.add_writer(self._sock_dup, _wake, waiter)
        check = loop.call_later(CLOSED_CHECK_S, _wake, waiter)
        try:
            await waiter
        finally:
            check.cancel()
            loop.remove_writer(self._sock_dup)
        if transport.is_closing():
            raise _closed()

    def _hold_descriptors(self) -> None:
        self._sock_dup = os.dup(self._fd)
        self._dups.append(self._sock_dup)
        self._fd = self._sock_dup
        for i, fd in self._region_fds.items():
            if i >= self._index:
                dup = os.dup(fd)
                self._dups.append(dup)
                self._region_fds[i] = dup

    def close(self) -> None:
        for fd in self._dups:
            os.close(fd)
        self._dups.clear()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
