"""One client connection's bytes: frames received without copies, responses written back.

:class:`KafkaConnectionProtocol` is an :class:`asyncio.BufferedProtocol`: the event loop
``recv_into``s the buffer it offers, so a request travels from the socket to its
handler without passing through an intermediate ``bytes`` object or a stream buffer.

* Small frames share one receive buffer, reused for the life of the connection; each
  complete frame is handed on as its own ``bytes`` copy (a few KiB at most), so the
  buffer can be reused at once.
* A frame that does not fit (a produce request of up to a MiB, say) is received into a
  buffer of its own size, straight from the socket: once its size prefix is known,
  the rest of the frame is read into place, and the frame is handed on as a read-only
  view of it, with no copy at all. Meanwhile the socket's receive low-water mark is the
  rest of the frame, so the loop wakes once for it, not per segment
  (:class:`~sluice.server.low_water.ReceiveLowWater`). That buffer is reused for the
  next large frame when nothing still refers to the previous one (a bytearray with live
  views refuses to be resized, which is how the check is made), else a new one is taken.

Frames queue up to :data:`MAX_QUEUED_BYTES`; beyond that reading pauses until the
connection's task has taken them (back-pressure, as a stream reader's limit gives).
A size prefix that is negative or above ``socket.request.max.bytes`` closes the
connection. :class:`ResponseWriter` is the write side: the transport's ``write`` with
``drain`` flow control.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any

from sluice.protocol._wire import INT32
from sluice.protocol.errors import FrameSizeError, FrameTooLargeError, NegativeFrameSizeError
from sluice.server.low_water import ReceiveLowWater

__all__ = ["KafkaConnectionProtocol", "ResponseWriter"]

log = logging.getLogger(__name__)

RECEIVE_BUFFER_BYTES = 1 << 16
"""The shared receive buffer; a frame larger than half of it gets a buffer of its own."""
MAX_QUEUED_BYTES = 1 << 22
"""Frames received but not yet taken by the connection's task before reading pauses."""
MAX_SPARE_BUFFERS = 4
"""Large-frame buffers a connection keeps for reuse (pipelined produce requests hold theirs
until answered)."""
_SPARE_GRANULE = 1 << 18  # spares are sized in 256 KiB steps, to fit frames of any size
_PREFIX = INT32.size
_MIN_READ = 1 << 13


class ResponseWriter:
    """The write half of a connection, with the parts of ``asyncio.StreamWriter`` the
    server uses: ``write``/``writelines``, ``drain`` (waits while the transport's buffer
    is over its high-water mark), ``close`` and the ``transport`` itself."""

    __slots__ = ("_lost", "_paused", "_waiters", "transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self._paused = False
        self._lost = False
        self._waiters: list[asyncio.Future[None]] = []

    def write(self, data: Any) -> None:
        self.transport.write(data)

    def writelines(self, data: Any) -> None:
        self.transport.writelines(data)

    async def drain(self) -> None:
        if self._lost:
            raise ConnectionResetError("connection lost")
        if not self._paused:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    def close(self) -> None:
        self.transport.close()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def _wake(self, error: BaseException | None) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if waiter.done():
                continue
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)


class KafkaConnectionProtocol(asyncio.BufferedProtocol):
    """Receives size-prefixed frames into reused buffers; :meth:`next_frame` hands them out
    in order, None once the peer has closed (or a bad size prefix closed the connection)."""

    __slots__ = (
        "_end",
        "_eof",
        "_filled",
        "_frame",
        "_frames",
        "_max_frame_size",
        "_on_connect",
        "_queued",
        "_reading_paused",
        "_receive",
        "_spares",
        "_start",
        "_waiter",
        "low_water",
        "transport",
        "writer",
    )  # fmt: skip

    def __init__(self, max_frame_size: int, on_connect: Any) -> None:
        self._max_frame_size = max_frame_size
        self._on_connect = on_connect  # called with this protocol once connected
        self._receive = memoryview(bytearray(RECEIVE_BUFFER_BYTES))
        self._start = 0  # unparsed bytes of _receive are [_start, _end)
        self._end = 0
        self._frame: memoryview | None = None  # a large frame being received in place
        self._filled = 0
        self._spares: list[bytearray] = []  # large frames' buffers, to reuse
        self._frames: collections.deque[memoryview | bytes] = collections.deque()
        self._queued = 0
        self._reading_paused = False
        self._eof = False
        self._waiter: asyncio.Future[None] | None = None
        self.transport: asyncio.Transport | None = None
        self.writer: ResponseWriter | None = None
        self.low_water = ReceiveLowWater()  # bound to the socket once connected

    # -- asyncio callbacks ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport
        self.writer = ResponseWriter(transport)  # type: ignore[arg-type]
        self.low_water = ReceiveLowWater(transport)
        self._on_connect(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._wake()
        if self.writer is not None:
            self.writer._lost = True
            self.writer._wake(ConnectionResetError("connection lost"))

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # close the transport

    def pause_writing(self) -> None:
        if self.writer is not None:
            self.writer._paused = True

    def resume_writing(self) -> None:
        if self.writer is not None:
            self.writer._paused = False
            self.writer._wake(None)

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            return frame[self._filled :]
        if len(self._receive) - self._end < _MIN_READ and self._start:  # move the partial
            # frame to the front, so that a read has room
            pending = self._end - self._start
            self._receive[:pending] = self._receive[self._start : self._end].tobytes()
            self._start, self._end = 0, pending
        return self._receive[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        frame = self._frame
        if frame is not None:
            self._filled += nbytes
            self.low_water.expect(len(frame) - self._filled)
            if self._filled == len(frame):
                self._frame = None
                self._deliver(frame.toreadonly())
            return
        self._end += nbytes
        try:
            self._split_frames()
        except FrameSizeError as exc:
            log.warning("closing connection: %s", exc)
            self._frames.clear()
            self._eof = True
            self._wake()
            if self.transport is not None:
                self.transport.close()

    # -- frames ------------------------------------------------------------------------
    def _split_frames(self) -> None:
        buf = self._receive
        start, end = self._start, self._end
        while end - start >= _PREFIX:
            (size,) = INT32.unpack_from(buf, start)
            if size < 0:
                raise NegativeFrameSizeError(size, self._max_frame_size)
            if size > self._max_frame_size:
                raise FrameTooLargeError(size, self._max_frame_size)
            body = start + _PREFIX
            if end - body >= size:
                self._deliver(bytes(buf[body : body + size]))
                start = body + size
                continue
            if size > len(buf) // 2:  # receive the rest in place, in its own buffer
                frame = self._frame_buffer(size)
                have = end - body
                frame[:have] = buf[body:end]
                self._frame, self._filled = frame, have
                self.low_water.expect(size - have)
                start = end = 0
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end

    def _frame_buffer(self, size: int) -> memoryview:
        """A writable view of ``size`` bytes for a large frame: the start of a spare buffer
        that no view of an earlier frame refers to any more, else of a new one (kept as
        a spare). Spares are never shrunk, so their pages stay mapped and warm."""
        spares = self._spares
        for spare in spares:
            if len(spare) < size:
                continue
            try:  # resizing a bytearray fails while views of it exist
                spare.append(0)
                del spare[-1]
            except BufferError:
                continue
            return memoryview(spare)[:size]
        fresh = bytearray(-(-size // _SPARE_GRANULE) * _SPARE_GRANULE)
        if len(spares) >= MAX_SPARE_BUFFERS:
            spares.pop(0)
        spares.append(fresh)
        return memoryview(fresh)[:size]

    def _deliver(self, frame: memoryview | bytes) -> None:
        self._frames.append(frame)
        self._queued += len(frame)
        if self._queued > MAX_QUEUED_BYTES and not self._reading_paused and self.transport:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def next_frame(self) -> memoryview | bytes | None:
        """The next request frame (without its size prefix), or None at the end."""
        while not self._frames:
            if self._eof:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        frame = self._frames.popleft()
        self._queued -= len(frame)
        if self._reading_paused and self._queued <= MAX_QUEUED_BYTES // 2 and self.transport:
            self._reading_paused = False
            self.transport.resume_reading()
        return frame
