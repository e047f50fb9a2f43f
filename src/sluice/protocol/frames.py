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
  buffer the decoder offers. Small frames share one receive buffer, reused for the life
  of the connection, and each complete one is queued as its own ``bytes`` copy (a few
  KiB at most), so the buffer can be reused at once. A frame that does not fit in half
  of it (a produce request of up to a MiB, say) is received into a buffer of its own
  size: once its size prefix is known the rest of it is read into place, and it is
  queued as a read-only view of that buffer, with no copy at all. Such a buffer is
  reused for a later large frame once nothing refers to the frame any more (a
  bytearray with live views refuses to be resized, which is how the check is made),
  else a new one is taken. :attr:`~FrameDecoder.frame_rest` says how much of a large
  frame is still to come, for a socket's receive low-water mark.
* **By chunk** (:meth:`~FrameDecoder.feed`): the caller hands over what ``recv``
  returned and gets the frames it completed. A frame lying wholly inside one ``bytes``
  chunk is not copied (its view points into the chunk); anything else goes through the
  buffers above.

Frames wait in a queue (:meth:`~FrameDecoder.next_frame`, :attr:`~FrameDecoder.queued_bytes`)
until the caller takes them, so it can decide when to stop reading.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Final, NoReturn, TypeAlias

from ._wire import INT32, BytesLike
from .errors import FrameSizeError, FrameTooLargeError, NegativeFrameSizeError

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "MAX_SPARE_BUFFERS",
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
_SPARE_GRANULE: Final = 1 << 18  # spares are sized in 256 KiB steps, to fit frames of any size
_MIN_READ: Final = 1 << 13  # below this much room, a partial frame moves to the front

Frame: TypeAlias = bytes | memoryview
"""A frame as the decoder hands it out: a small frame's own ``bytes``, or a read-only view."""


class FrameDecoder:
    """Splits a received byte stream into size-prefixed frames (without the prefix),
    queued in arrival order until :meth:`next_frame` takes them."""

    __slots__ = ("_buffer", "_end", "_error", "_filled", "_frame", "_frames", "_large",
                 "_max_frame_size", "_max_spares", "_queued", "_spares", "_start")  # fmt: skip

    def __init__(
        self,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        buffer_bytes: int = RECEIVE_BUFFER_BYTES,
        spare_buffers: int = MAX_SPARE_BUFFERS,
    ) -> None:
        """``spare_buffers``: how many large-frame buffers are kept for reuse."""
        if max_frame_size < 0:
            raise ValueError("max_frame_size must not be negative")
        if buffer_bytes < 2 * _MIN_READ:
            raise ValueError(f"buffer_bytes must be at least {2 * _MIN_READ}")
        self._max_frame_size = max_frame_size
        self._buffer = memoryview(bytearray(buffer_bytes))
        self._large = buffer_bytes // 2  # frames above this get a buffer of their own
        self._start = 0  # unparsed bytes of _buffer are [_start, _end)
        self._end = 0
        self._frame: memoryview | None = None  # a large frame being received in place
        self._filled = 0
        self._spares: list[bytearray] = []  # large frames' buffers, to reuse
        self._max_spares = spare_buffers
        self._frames: deque[Frame] = deque()
        self._queued = 0
        self._error: FrameSizeError | None = None

    @property
    def max_frame_size(self) -> int:
        """The largest frame size accepted."""
        return self._max_frame_size

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
            return len(self._frame)
        if self._end - self._start < SIZE_PREFIX_BYTES:
            return None
        size: int = INT32.unpack_from(self._buffer, self._start)[0]
        return size

    @property
    def frame_rest(self) -> int:
        """Bytes of the large frame being received in place still to come (0: none is)."""
        frame = self._frame
        return 0 if frame is None else len(frame) - self._filled

    @property
    def queued_bytes(self) -> int:
        """The size of the complete frames not taken yet."""
        return self._queued

    # -- receiving in place -----------------------------------------------------------
    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next bytes received go (never empty): the rest of a large frame, or
        the free end of the receive buffer."""
        frame = self._frame
        if frame is not None:
            return frame[self._filled :]
        buf = self._buffer
        if len(buf) - self._end < _MIN_READ and self._start:  # move the partial frame to
            # the front, so that a read has room
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
            if self._filled == len(frame):
                self._frame = None
                self._frames.append(frame.toreadonly())
                self._queued += len(frame)
            return
        self._end += nbytes
        start = self._split(self._buffer, self._start, self._end, True)
        if start == self._end:
            self._start = self._end = 0
        else:
            self._start = start

    # -- receiving by chunk -----------------------------------------------------------
    def feed(self, data: BytesLike) -> list[memoryview]:
        """Consume ``data``; return the frames it completes (with any still queued), as
        read-only memoryviews.

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
            pos = self._split(view, 0, end, False)
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
        """Take the oldest queued frame; None if there is none."""
        frames = self._frames
        if not frames:
            return None
        frame = frames.popleft()
        self._queued -= len(frame)
        return frame

    def clear(self) -> None:
        """Drop the queued frames (the connection is closing)."""
        self._frames.clear()
        self._queued = 0

    # -- the parser -------------------------------------------------------------------
    def _split(self, view: memoryview, start: int, end: int, copy: bool) -> int:
        """Queue the whole frames in ``view[start:end]``, each its own ``bytes`` if
        ``copy`` (the view is a buffer to be reused) or a view of ``view`` (immutable).
        Returns where the incomplete rest begins; a large frame's start moves into a
        buffer of its own (the rest is then empty)."""
        max_size = self._max_frame_size
        frames = self._frames
        while end - start >= SIZE_PREFIX_BYTES:
            size: int = INT32.unpack_from(view, start)[0]
            if size < 0 or size > max_size:
                self._reject(size)
            body = start + SIZE_PREFIX_BYTES
            if end - body >= size:
                start = body + size
                frames.append(bytes(view[body:start]) if copy else view[body:start])
                self._queued += size
                continue
            if size > self._large:  # receive the rest in place, in its own buffer
                frame = self._frame_buffer(size)
                have = end - body
                frame[:have] = view[body:end]
                self._frame, self._filled = frame, have
                return end
            break
        if not copy and start < end:  # a partial frame of a chunk: into the buffer
            rest = end - start
            self._buffer[:rest] = view[start:end]
            self._start, self._end = 0, rest
            return end
        return start

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
        if len(spares) >= self._max_spares:
            spares.pop(0)
        spares.append(fresh)
        return memoryview(fresh)[:size]

    def _reject(self, size: int) -> NoReturn:
        error: FrameSizeError
        if size < 0:
            error = NegativeFrameSizeError(size, self._max_frame_size)
        else:
            error = FrameTooLargeError(size, self._max_frame_size)
        self._error = error
        self._frames.clear()
        self._queued = 0
        self._frame = None
        self._start = self._end = 0
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
