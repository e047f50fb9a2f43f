"""Record batch compression codecs, written the way the Java client writes them.

The codec id lives in the low three bits of a v2 batch's attributes
(Kafka's ``CompressionType``). What each codec produces, and why:

* gzip: a gzip member (``GZIPOutputStream``), via :mod:`zlib`.
* snappy: snappy-java's *xerial* block framing (a 16-byte header, then
  length-prefixed raw snappy blocks of at most 32 KiB input), which is what the
  Java client writes. The Java client (``SnappyInputStream``), librdkafka,
  kafka-python, aiokafka and the Sluice broker all read it; raw snappy is read by
  all of them too, but only xerial is what Kafka itself emits.
* lz4: an LZ4 frame with independent 64 KiB blocks and no content size or
  checksums, matching ``KafkaLZ4BlockOutputStream`` (the Java reader decompresses
  blocks one by one, so linked blocks are avoided). Uses the ``lz4`` package when
  installed, else cramjam's frame encoder.
* zstd: a zstd frame (cramjam).

:func:`compress` serves the producer and the log cleaner; :func:`decompress` reads
all of the above (and raw snappy) for the consumer, the cleaner and timestamp look-ups.
"""

from __future__ import annotations

import enum
import struct
import zlib
from typing import Any, Final

import cramjam

__all__ = ["CompressionType", "compress", "decompress"]

try:  # the lz4 package writes Java-compatible frames (independent blocks)
    import lz4.frame as _lz4_frame  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - depends on the environment
    _lz4_frame = None


class CompressionType(enum.IntEnum):
    """Kafka's compression codec ids (batch attribute bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def for_name(cls, name: str) -> CompressionType:
        """The codec for a ``compression.type`` value (``none``, ``gzip``, ...).

        :raises ValueError: for an unknown name.
        """
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown compression.type {name!r} (expected none, gzip, snappy, lz4 or zstd)"
            ) from None


_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK: Final = 32 * 1024
_INT32: Final = struct.Struct(">i")

DEFAULT_LEVELS: Final = {
    CompressionType.GZIP: 6,  # Java: Deflater.DEFAULT_COMPRESSION
    CompressionType.ZSTD: 3,  # Java: compression.zstd.level default
}


def compress(codec: CompressionType, data: Any, level: int | None = None) -> bytes:
    """Compress a batch's records section (any buffer) with ``codec``."""
    if codec == CompressionType.GZIP:
        c = zlib.compressobj(DEFAULT_LEVELS[codec] if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == CompressionType.SNAPPY:
        view = memoryview(data)
        parts = [_XERIAL_HEADER]
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
            parts.append(_INT32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == CompressionType.LZ4:
        if _lz4_frame is not None:
            return bytes(
                _lz4_frame.compress(
                    data,
                    # Java uses LZ4's fast compressor at its default level (9)
                    compression_level=0 if level is None or level == 9 else level,
                    block_size=_lz4_frame.BLOCKSIZE_MAX64KB,
                    block_linked=False,
                    content_checksum=False,
                    store_size=False,
                )
            )
        return bytes(cramjam.lz4.compress(data, level))  # pragma: no cover
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data, DEFAULT_LEVELS[codec] if level is None else level))
    if codec == CompressionType.NONE:
        return bytes(data)
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: CompressionType | int, data: Any) -> bytes:
    """Decompress a batch's records section written by any Kafka client."""
    if codec == CompressionType.GZIP:
        return zlib.decompress(data, 47)  # gzip or zlib header, as Java's stream accepts
    if codec == CompressionType.SNAPPY:
        return _unsnappy(memoryview(data))
    if codec == CompressionType.LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    if codec == CompressionType.NONE:
        return bytes(data)
    raise ValueError(f"unknown compression codec {codec}")


def _unsnappy(view: memoryview) -> bytes:
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    parts = []
    position = len(_XERIAL_HEADER)
    while position < len(view):
        (size,) = _INT32.unpack_from(view, position)
        position += _INT32.size
        parts.append(bytes(cramjam.snappy.decompress_raw(view[position : position + size])))
        position += size
    return b"".join(parts)
