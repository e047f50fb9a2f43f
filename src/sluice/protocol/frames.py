"""Sans-I/O framing: every Kafka request and response is an int32 size, then that many bytes.

:class:`FrameDecoder` is the one frame parser: the broker's connections, Sluice's clients
and the tests all split their byte streams with it. The size prefix is checked as soon as
its 4 bytes are in, before any payload is buffered: a negative size or one above
``max_frame_size`` (Kafka's ``socket.request.max.bytes``, 104857600 by default) raises a
:class:`~sluice.protocol.errors.FrameSizeError`, after which the connection must be
closed (the decoder refuses further input and drops the frames it still holds). A size
equal to the maximum is allowed, and so is 0 (header parsing rejects the empty frame).

It takes bytes in either of two ways:

* **In place** (:meth:`~FrameDecoder.get_buffer` / :meth:`~FrameDecoder.buffer_updated`,
  the interface of ``asyncio.BufferedProtocol``): the caller receives straight into the
  buffer the decoder offers. Small frames share one receive buffer, taken when bytes
  first arrive and kept while the connection is busy (:meth:`~FrameDecoder.trim` lets it
  go), and each complete one is queued as its own ``bytes`` copy (a few KiB at most), so
  the buffer can be reused at once. A frame that does not fit in half of it (a produce
  request of up to a MiB, say) is received into a buffer of its own: once its size prefix
  is known the rest of it is read into place, and it is queued as a read-only view of
  that buffer, with no copy at all.
* **By chunk** (:meth:`~FrameDecoder.feed`): the caller hands over what ``recv``
  returned and gets the frames it completed. A frame lying wholly inside one ``bytes``
  chunk is not copied (its view points into the chunk); anything else goes through the
  buffers above.

**A large frame's memory grows with what arrives, not with what its prefix claims.** A
size prefix is only a claim: a peer can announce ``max_frame_size`` bytes and send a few.
The room given to a large frame starts at twice what has arrived of it (at least 256
KiB) and doubles each time it fills, up to the claimed size. A buffer is reused for a
later large frame once nothing refers to the frame it held (a map with live views
refuses to be resized, which is how the check is made): a frame no larger than a free
spare gets all its room at once, so a connection that sends frames of similar sizes
receives each with one read, as if the claim had been believed. Up to ``spare_buffers``
spares of up to ``max_spare_bytes`` each are kept; :meth:`~FrameDecoder.trim` drops
them, with the receive buffer, when the connection goes idle.

The buffers are anonymous memory maps (``mmap``), not heap objects: only the pages the
received bytes land in take memory, a buffer's growth moves its pages instead of copying
them (``mremap``, where the system has it), and a buffer let go is given back to the
system at once, where a heap would keep the freed space of thousands of connections'
buffers resident.

**Accounting** (optional): given a :class:`~sluice.protocol.memory_pool.MemoryPool`, the
decoder charges it the room given to the frame being received and the size of every
frame queued (a small frame when it is copied out). A frame's charge passes to whoever
takes it with :meth:`~FrameDecoder.next_frame`, who releases it when done with the
frame (the broker: when the request is answered); :meth:`~FrameDecoder.clear` releases
what the decoder still holds. When the pool refuses room for a large frame (to start it
or to grow it), :attr:`~FrameDecoder.waiting_for_memory` is set and the frame waits
where it is: the caller should stop reading, and call
:meth:`~FrameDecoder.retry_memory` once memory is released. Room already given is
always filled, so a frame whose room is whole always completes.

Frames wait in a queue (:meth:`~FrameDecoder.next_frame`, :attr:`~FrameDecoder.queued_bytes`)
until the caller takes them, so it can decide when to stop reading.
:attr:`~FrameDecoder.frame_rest` says how much of a large frame is still to come, for a
socket's receive low-water mark.
"""

from __future__ import annotations

import mmap
from collections import deque
from collections.abc import Iterable
from typing import Final, NoReturn, TypeAlias

from ._wire import INT32, BytesLike
from .errors import FrameSizeError, FrameTooLargeError, NegativeFrameSizeError
from .memory_pool import MemoryPool

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "FIRST_ROOM_BYTES",
    "MAX_SPARE_BUFFERS",
    "MAX_SPARE_BYTES",
    "RECEIVE_BUFFER_BYTES",
    "SIZE_PREFIX_BYTES",
    "Frame",
    "FrameDecoder",
    "encode_frame",
    "frame_segments",
]

DEFAULT_MAX_FRAME_SIZE: Final = 104_857_600
"""Kafka's default ``socket.request.max.bytes`` (100 MiB)."""

SIZE_PREFIX_BYTES: Final = INT32.size

RECEIVE_BUFFER_BYTES: Final = 1 << 16
"""The shared receive buffer; a frame larger than half of it gets a buffer of its own."""
MAX_SPARE_BUFFERS: Final = 4
"""Large-frame buffers a decoder keeps for reuse by default (pipelined produce requests
hold theirs until answered)."""
MAX_SPARE_BYTES: Final = 16 << 20
"""The largest buffer kept as a spare by default; a larger one is freed with its frame."""
FIRST_ROOM_BYTES: Final = 1 << 18
"""The least room a large frame is first given (unless it claims less)."""
_GRANULE: Final = 1 << 18  # buffers are sized in 256 KiB steps, to fit frames of any size
_MIN_READ: Final = 1 << 13  # below this much room, a partial frame moves to the front

Frame: TypeAlias = bytes | memoryview
"""A frame as the decoder hands it out: a small frame's own ``bytes``, or a read-only view."""


def _rounded(size: int) -> int:
    return -(-size // _GRANULE) * _GRANULE


def _map(size: int) -> mmap.mmap:
    """``size`` bytes of anonymous memory: pages are taken as they are written."""
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)


def _unreferenced(buffer: mmap.mmap) -> bool:
    """Whether no view of ``buffer`` exists (a map with views refuses to be resized)."""
    try:
        buffer.resize(len(buffer))
    except (BufferError, OSError, SystemError):  # SystemError: no mremap; never reused
        return False
    return True


class FrameDecoder:
    """Splits a received byte stream into size-prefixed frames (without the prefix),
    queued in arrival order until :meth:`next_frame` takes them."""

    __slots__ = ("_buffer", "_buffer_bytes", "_end", "_error", "_filled", "_frame",
                 "_frame_size", "_frames", "_granted", "_large", "_max_frame_size",
                 "_max_spare_bytes", "_max_spares", "_pool", "_queued", "_received",
                 "_spares", "_start", "_waiting")  # fmt: skip

    def __init__(
        self,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        buffer_bytes: int = RECEIVE_BUFFER_BYTES,
        spare_buffers: int = MAX_SPARE_BUFFERS,
        *,
        max_spare_bytes: int = MAX_SPARE_BYTES,
        pool: MemoryPool | None = None,
    ) -> None:
        """``spare_buffers``: how many large-frame buffers are kept for reuse, each of at
        most ``max_spare_bytes``; ``pool``: charged as described above (None: nothing
        is counted)."""
        if max_frame_size < 0:
            raise ValueError("max_frame_size must not be negative")
        if buffer_bytes < 2 * _MIN_READ:
            raise ValueError(f"buffer_bytes must be at least {2 * _MIN_READ}")
        self._max_frame_size = max_frame_size
        self._buffer: memoryview | None = None  # taken when bytes first arrive
        self._buffer_bytes = buffer_bytes
        self._large = buffer_bytes // 2  # frames above this get a buffer of their own
        self._start = 0  # unparsed bytes of _buffer are [_start, _end)
        self._end = 0
        # A large frame being received in place: its buffer (at least _granted bytes once
        # get_buffer has grown it), its size, the bytes in, and the room given (charged
        # to the pool).
        self._frame: mmap.mmap | None = None
        self._frame_size = 0
        self._filled = 0
        self._granted = 0
        self._waiting = False  # the pool refused the room the next bytes need
        self._spares: list[mmap.mmap] = []  # large frames' buffers, to reuse
        self._max_spares = spare_buffers
        self._max_spare_bytes = max_spare_bytes
        self._pool = pool
        self._frames: deque[Frame] = deque()
        self._queued = 0
        self._received = 0  # frames completed, ever
        self._error: FrameSizeError | None = None

    @property
    def max_frame_size(self) -> int:
        """The largest frame size accepted (a change applies from the next size prefix)."""
        return self._max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, size: int) -> None:
        if size < 0:
            raise ValueError("max_frame_size must not be negative")
        self._max_frame_size = size

    @property
    def buffered(self) -> int:
        """Bytes received towards the next, incomplete frame (prefix included)."""
        if self._frame is not None:
            return SIZE_PREFIX_BYTES + self._filled
        return self._end - self._start

    @property
    def pending_frame_size(self) -> int | None:
        """The size of the frame being assembled, once its prefix is complete."""
        if self._frame is not None:
            return self._frame_size
        if self._end - self._start < SIZE_PREFIX_BYTES:
            return None
        assert self._buffer is not None
        size: int = INT32.unpack_from(self._buffer, self._start)[0]
        return size

    @property
    def frame_rest(self) -> int:
        """Bytes of the large frame being received in place still to come (0: none is)."""
        return 0 if self._frame is None else self._frame_size - self._filled

    @property
    def room(self) -> int:
        """Bytes the large frame being received may still take without more memory (0:
        none is being received, or its room is full)."""
        return 0 if self._frame is None else self._granted - self._filled

    @property
    def waiting_for_memory(self) -> bool:
        """The pool refused the room the next bytes need; see :meth:`retry_memory`."""
        return self._waiting

    @property
    def queued_bytes(self) -> int:
        """The size of the complete frames not taken yet."""
        return self._queued

    @property
    def charged(self) -> int:
        """Bytes charged to the pool for what the decoder holds: the frames queued and
        the room given to the frame being received."""
        return self._queued + (self._granted if self._frame is not None else 0)

    @property
    def frames_received(self) -> int:
        """Frames completed since the decoder was made (taken or not)."""
        return self._received

    @property
    def memory(self) -> int:
        """Bytes of buffers the decoder holds: the receive buffer, the large frame's
        buffer and the spares (frames handed out may hold some of them)."""
        held = 0 if self._buffer is None else len(self._buffer)
        frame = self._frame
        if frame is not None and not any(spare is frame for spare in self._spares):
            held += len(frame)
        return held + sum(len(spare) for spare in self._spares)

    # -- receiving in place -----------------------------------------------------------
    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next bytes received go (never empty): the room of a large frame, or
        the free end of the receive buffer. Called while :attr:`waiting_for_memory`, it
        takes the memory whatever the pool says."""
        if self._waiting:
            self._retry(force=True)
        frame = self._frame
        if frame is not None:
            if len(frame) < self._granted:
                frame = self._enlarge(frame)
            return memoryview(frame)[self._filled : self._granted]
        buf = self._buffer
        if buf is None:
            buf = self._buffer = memoryview(_map(self._buffer_bytes))
        elif len(buf) - self._end < _MIN_READ and self._start:  # move the partial frame
            # to the front, so that a read has room
            pending = self._end - self._start
            buf[:pending] = buf[self._start : self._end].tobytes()
            self._start, self._end = 0, pending
        return buf[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the last :meth:`get_buffer`; queue the
        frames they complete.

        :raises NegativeFrameSizeError: on a negative size prefix.
        :raises FrameTooLargeError: on a size prefix above ``max_frame_size``.
        """
        if self._error is not None:
            raise self._error
        frame = self._frame
        if frame is not None:
            self._filled += nbytes
            if self._filled == self._frame_size:
                self._frames.append(memoryview(frame)[: self._frame_size].toreadonly())
                self._queued += self._frame_size
                self._received += 1
                self._frame = None
            elif self._filled == self._granted:
                self._grow(False)
            return
        self._end += nbytes
        assert self._buffer is not None
        start = self._split(self._buffer, self._start, self._end, True)
        if start == self._end:
            self._start = self._end = 0
        else:
            self._start = start

    # -- memory -----------------------------------------------------------------------
    def retry_memory(self) -> bool:
        """Try again to take the room refused; returns whether the decoder still waits."""
        if self._waiting:
            self._retry(force=False)
        return self._waiting

    def trim(self) -> int:
        """Let go of the buffers not in use (the connection is idle): the receive buffer
        if it holds no partial frame, and the spares. Returns the bytes let go (the
        frames handed out may still hold some of them)."""
        freed = 0
        if self._buffer is not None and self._start == self._end:
            freed += len(self._buffer)
            self._buffer = None
            self._start = self._end = 0
        frame = self._frame
        for spare in self._spares:
            if spare is not frame:
                freed += len(spare)
        self._spares = [] if frame is None else [s for s in self._spares if s is frame]
        return freed

    def _retry(self, force: bool) -> None:
        if self._frame is not None:
            self._grow(force)
            return
        # A large frame's start waits in the receive buffer: parse it again.
        assert self._buffer is not None
        self._waiting = False
        start = self._split(self._buffer, self._start, self._end, True, force)
        if start == self._end:
            self._start = self._end = 0
        else:
            self._start = start

    def _grow(self, force: bool) -> None:
        """The large frame's room is full and more is to come: double the room (up to
        the frame's size), if the pool allows; :meth:`get_buffer` enlarges the buffer
        (here the caller may still hold a view of it)."""
        granted = self._granted
        grant = min(self._frame_size, _rounded(2 * granted))
        pool = self._pool
        if pool is not None:
            if force:
                pool.allocate(grant - granted)
            elif not pool.try_allocate(grant - granted):
                self._waiting = True
                return
        self._waiting = False
        self._granted = grant

    def _enlarge(self, frame: mmap.mmap) -> mmap.mmap:
        """The buffer of the frame being received, made large enough for its room: moved
        in place if no view of it is left, else copied into a new one."""
        size = _rounded(self._granted)
        spares = self._spares
        kept = any(spare is frame for spare in spares)
        try:
            frame.resize(size)
        except (BufferError, OSError, SystemError):
            bigger = _map(size)
            bigger[: self._filled] = memoryview(frame)[: self._filled]
            if kept:
                spares[:] = [spare for spare in spares if spare is not frame]
            self._frame = frame = bigger
            self._keep(frame)
            return frame
        if kept and size > self._max_spare_bytes:
            spares[:] = [spare for spare in spares if spare is not frame]
        return frame

    # -- receiving by chunk -----------------------------------------------------------
    def feed(self, data: BytesLike) -> list[memoryview]:
        """Consume ``data``; return the frames it completes (with any still queued), as
        read-only memoryviews. The memory a frame needs is taken whatever the pool says.

        If a chunk completes some frames and then holds a bad size prefix, the exception
        is raised and those frames are dropped: the connection is closing anyway, and
        dropping them means no request from a broken stream takes effect.

        :raises NegativeFrameSizeError: on a negative size prefix.
        :raises FrameTooLargeError: on a size prefix above ``max_frame_size``.
        """
        if self._error is not None:
            raise self._error
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        pos, end = 0, len(view)
        if type(data) is bytes and self._frame is None and self._start == self._end:
            # Immutable and nothing held back: frames wholly inside it are views of it.
            pos = self._split(view, 0, end, False, True)
        while pos < end:
            buf = self.get_buffer()
            take = min(len(buf), end - pos)
            buf[:take] = view[pos : pos + take]
            del buf
            pos += take
            self.buffer_updated(take)
        frames = [f if type(f) is memoryview else memoryview(f) for f in self._frames]
        self._frames.clear()
        self._queued = 0
        return frames

    # -- taking frames ----------------------------------------------------------------
    def first_frame(self) -> Frame | None:
        """The oldest queued frame, left in the queue; None if there is none."""
        frames = self._frames
        return frames[0] if frames else None

    def next_frame(self) -> Frame | None:
        """Take the oldest queued frame; None if there is none. With a pool, its size
        stays charged until the taker releases it."""
        frames = self._frames
        if not frames:
            return None
        frame = frames.popleft()
        self._queued -= len(frame)
        return frame

    def clear(self) -> None:
        """Drop the queued frames and the frame being received (the connection is
        closing), releasing their charges; the buffers go too."""
        charged = self.charged
        self._frames.clear()
        self._queued = 0
        self._frame = None
        self._waiting = False
        self._buffer = None
        self._start = self._end = 0
        self._spares = []
        if self._pool is not None:
            self._pool.release(charged)

    # -- the parser -------------------------------------------------------------------
    def _split(
        self, view: memoryview, start: int, end: int, copy: bool, force: bool = False
    ) -> int:
        """Queue the whole frames in ``view[start:end]``, each its own ``bytes`` if
        ``copy`` (the view is a buffer to be reused) or a view of ``view`` (immutable).
        Returns where the incomplete rest begins; a large frame's start moves into a
        buffer of its own (the rest is then empty) unless the pool refuses its room
        (then it stays, and the decoder waits for memory)."""
        max_size = self._max_frame_size
        frames = self._frames
        pool = self._pool
        while end - start >= SIZE_PREFIX_BYTES:
            size: int = INT32.unpack_from(view, start)[0]
            if size < 0 or size > max_size:
                self._reject(size)
            body = start + SIZE_PREFIX_BYTES
            if end - body >= size:
                start = body + size
                frames.append(bytes(view[body:start]) if copy else view[body:start])
                self._queued += size
                self._received += 1
                if pool is not None:
                    pool.allocate(size)
                continue
            if size > self._large:  # receive the rest in place, in its own buffer
                if not self._start_frame(view, body, end, size, force or not copy):
                    self._waiting = True
                    break
                return end
            break
        if not copy and start < end:  # a partial frame of a chunk: into the buffer
            rest = end - start
            buf = self._buffer
            if buf is None:
                buf = self._buffer = memoryview(_map(self._buffer_bytes))
            buf[:rest] = view[start:end]
            self._start, self._end = 0, rest
            return end
        return start

    def _start_frame(self, view: memoryview, body: int, end: int, size: int, force: bool) -> bool:
        """Give the large frame of ``size`` whose first bytes are ``view[body:end]`` its
        room and buffer: all of a free spare that holds it, else twice what arrived (at
        least FIRST_ROOM_BYTES). False if the pool refuses."""
        have = end - body
        spare = self._free_spare(size)
        grant = size if spare is not None else min(size, _rounded(max(2 * have, FIRST_ROOM_BYTES)))
        pool = self._pool
        if pool is not None:
            if force:
                pool.allocate(grant)
            elif not pool.try_allocate(grant):
                return False
        if spare is None:
            spare = self._free_spare(grant)
            if spare is None:
                spare = _map(_rounded(grant))
                self._keep(spare)
        spare[:have] = view[body:end]
        self._frame, self._frame_size, self._filled, self._granted = spare, size, have, grant
        return True

    def _free_spare(self, size: int) -> mmap.mmap | None:
        """A spare of at least ``size`` bytes that no view of an earlier frame refers to."""
        for spare in self._spares:
            if len(spare) >= size and _unreferenced(spare):
                return spare
        return None

    def _keep(self, buffer: mmap.mmap) -> None:
        """Keep a new large-frame buffer as a spare, if it is not too large; the oldest
        spare makes room."""
        if len(buffer) > self._max_spare_bytes or not self._max_spares:
            return
        spares = self._spares
        if len(spares) >= self._max_spares:
            spares.pop(0)
        spares.append(buffer)

    def _reject(self, size: int) -> NoReturn:
        error: FrameSizeError
        if size < 0:
            error = NegativeFrameSizeError(size, self._max_frame_size)
        else:
            error = FrameTooLargeError(size, self._max_frame_size)
        self.clear()
        self._error = error
        raise error


def encode_frame(payload: BytesLike) -> bytes:
    """Prefix ``payload`` with its int32 size (one copy of the payload)."""
    return INT32.pack(len(payload)) + payload


def frame_segments(segments: Iterable[BytesLike]) -> list[BytesLike]:
    """Prefix a list of buffers with their total size, without copying them.

    The result suits ``transport.writelines`` or ``socket.sendmsg``.
    """
    parts: list[BytesLike] = [b""]
    total = 0
    for segment in segments:
        total += memoryview(segment).nbytes
        parts.append(segment)
    parts[0] = INT32.pack(total)
    return parts
