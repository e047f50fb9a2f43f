"""Sans-I/O framing: every Kafka request and response is an int32 size, then that many bytes.

:class:`FrameDecoder` turns the bytes a connection receives, in chunks of any size,
into complete frames. The size prefix is checked as soon as its 4 bytes are in,
before any payload is buffered: a negative size or one above ``max_frame_size``
(Kafka's ``socket.request.max.bytes``, 104857600 by default) raises a
:class:`~sluice.protocol.errors.FrameSizeError`, after which the connection must be
closed (the decoder refuses further input). A size equal to the maximum is allowed,
and so is 0 (header parsing rejects the empty frame).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from ._wire import INT32, BytesLike
from .errors import FrameSizeError, FrameTooLargeError, NegativeFrameSizeError

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "SIZE_PREFIX_BYTES",
    "FrameDecoder",
    "encode_frame",
    "frame_segments",
]

DEFAULT_MAX_FRAME_SIZE: Final = 104_857_600
"""Kafka's default ``socket.request.max.bytes`` (100 MiB)."""

SIZE_PREFIX_BYTES: Final = INT32.size


class FrameDecoder:
    """Splits a received byte stream into size-prefixed frames (without the prefix).

    Feed it whatever the socket returned; it returns the frames completed by that
    chunk, in order, as read-only memoryviews. No copy is made of a frame that lies
    wholly inside one ``bytes`` chunk (the view points into the chunk); a frame spread
    over several chunks, or received in a mutable buffer (``bytearray``, a
    ``memoryview`` of a reused receive buffer), is copied once into a buffer owned by
    that frame, so views stay valid however the caller reuses its buffers.

    If a chunk completes some frames and then holds a bad size prefix, the exception
    is raised and those frames are dropped: the connection is closing anyway, and
    dropping them means no request from a broken stream takes effect.
    """

    __slots__ = ("_error", "_filled", "_frame", "_max_frame_size", "_prefix")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 0:
            raise ValueError("max_frame_size must not be negative")
        self._max_frame_size = max_frame_size
        self._prefix = bytearray()
        self._frame: bytearray | None = None
        self._filled = 0
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
        return len(self._prefix)

    @property
    def pending_frame_size(self) -> int | None:
        """The size of the frame being assembled, once its prefix is complete."""
        return None if self._frame is None else len(self._frame)

    def feed(self, data: BytesLike) -> list[memoryview]:
        """Consume ``data``; return the frames it completes.

        :raises NegativeFrameSizeError: on a negative size prefix.
        :raises FrameTooLargeError: on a size prefix above ``max_frame_size``.
        """
        if self._error is not None:
            raise self._error
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        shared = isinstance(data, bytes)  # immutable, so frames may point into it
        frames: list[memoryview] = []
        pos = 0
        end = len(view)
        while pos < end:
            frame = self._frame
            if frame is None:
                if self._prefix or end - pos < SIZE_PREFIX_BYTES:
                    take = min(SIZE_PREFIX_BYTES - len(self._prefix), end - pos)
                    self._prefix += view[pos : pos + take]
                    pos += take
                    if len(self._prefix) < SIZE_PREFIX_BYTES:
                        break
                    (size,) = INT32.unpack(self._prefix)
                    self._prefix.clear()
                else:
                    (size,) = INT32.unpack_from(view, pos)
                    pos += SIZE_PREFIX_BYTES
                self._check_size(size)
                if end - pos >= size:
                    payload = view[pos : pos + size]
                    frames.append(payload if shared else memoryview(payload.tobytes()))
                    pos += size
                    continue
                frame = self._frame = bytearray(size)
                self._filled = 0
            take = min(len(frame) - self._filled, end - pos)
            frame[self._filled : self._filled + take] = view[pos : pos + take]
            self._filled += take
            pos += take
            if self._filled == len(frame):
                frames.append(memoryview(frame).toreadonly())
                self._frame = None
                self._filled = 0
        return frames

    def _check_size(self, size: int) -> None:
        if size < 0:
            self._error = NegativeFrameSizeError(size, self._max_frame_size)
        elif size > self._max_frame_size:
            self._error = FrameTooLargeError(size, self._max_frame_size)
        else:
            return
        raise self._error


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
