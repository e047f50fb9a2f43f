"""``MemoryRecordsBuilder``: writes one magic-v2 record batch straight into a buffer.

A v2 batch is a 61-byte header and then the records (Kafka's ``DefaultRecordBatch``)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (2)
    | crc uint32 (CRC32C of everything after it) | attributes int16 | lastOffsetDelta int32
    | baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16
    | baseSequence int32 | recordCount int32 | records...

and each record (``DefaultRecord``) is ``length varint | attributes int8 |
timestampDelta varlong | offsetDelta varint | keyLength varint | key |
valueLength varint | value | headerCount varint | headers``, all varints zig-zag
encoded. The builder reserves the header, appends records after it (uncompressed),
and on :meth:`close` compresses the records section in place when a codec is set,
fills the header and computes the CRC. The batch then is a memoryview of the
buffer, written to the socket without a copy.

The per-record path is one ``bytes.join`` and one slice assignment; varints below
16384 come from a precomputed table.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any, Final

from sluice.checksum import crc32c

from .compression import CompressionType, compress

__all__ = [
    "RECORD_BATCH_OVERHEAD",
    "CompressionRatioEstimator",
    "MemoryRecordsBuilder",
    "encode_headers",
    "estimate_size_in_bytes_upper_bound",
    "zigzag_varint",
]

RECORD_BATCH_OVERHEAD: Final = 61
MAX_RECORD_OVERHEAD: Final = 21  # length varint 5 + attributes 1 + ts varlong 10 + offset 5
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
TRANSACTIONAL_FLAG: Final = 0x10
COMPRESSION_RATE_ESTIMATION_FACTOR: Final = 1.05

_HEAD: Final = struct.Struct(">qiib")  # baseOffset, batchLength, leaderEpoch, magic
_CRC: Final = struct.Struct(">I")
_TAIL: Final = struct.Struct(">hiqqqhii")  # attributes .. recordCount
_CRC_OFFSET: Final = _HEAD.size
_ATTRIBUTES_OFFSET: Final = _HEAD.size + _CRC.size


def zigzag_varint(value: int) -> bytes:
    """Kafka's signed varint/varlong: zig-zag, then 7 bits a byte, low bits first."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_TABLE_SIZE: Final = 1 << 14
_ZZ: Final[tuple[bytes, ...]] = tuple(zigzag_varint(n) for n in range(_TABLE_SIZE))
_NULL: Final = zigzag_varint(-1)
_NO_HEADERS: Final = b"\x00"


def encode_headers(headers: Iterable[tuple[str | bytes, Any]] | Mapping[str, Any] | None) -> bytes:
    """Encode record headers: a count, then (key, value) with varint lengths.

    Keys are strings (UTF-8 encoded) or bytes; values are bytes or None.
    """
    if not headers:
        return _NO_HEADERS
    items = headers.items() if isinstance(headers, Mapping) else headers
    parts: list[bytes] = []
    count = 0
    for key, value in items:
        raw_key = key.encode() if isinstance(key, str) else bytes(key)
        parts.append(zigzag_varint(len(raw_key)))
        parts.append(raw_key)
        if value is None:
            parts.append(_NULL)
        else:
            if isinstance(value, str):
                raise TypeError(f"header {key!r}: value must be bytes or None, not str")
            raw = bytes(value)
            parts.append(zigzag_varint(len(raw)))
            parts.append(raw)
        count += 1
    return zigzag_varint(count) + b"".join(parts)


def estimate_size_in_bytes_upper_bound(key_size: int, value_size: int, headers_size: int) -> int:
    """An upper bound of the size of a batch holding one such record (Kafka's
    ``estimateSizeInBytesUpperBound``); the size checked against max.request.size."""
    return RECORD_BATCH_OVERHEAD + MAX_RECORD_OVERHEAD + 10 + key_size + value_size + headers_size


class CompressionRatioEstimator:
    """Per-topic compressed/uncompressed ratio estimates, Kafka's algorithm: start at
    1.0, step down slowly (0.005) when batches compress better, up fast (0.05)
    when worse. The accumulator uses them to size compressed batches."""

    IMPROVING_STEP: Final = 0.005
    DETERIORATE_STEP: Final = 0.05

    def __init__(self) -> None:
        self._ratios: dict[str, float] = {}

    def estimation(self, topic: str) -> float:
        return self._ratios.get(topic, 1.0)

    def update_estimation(self, topic: str, observed: float) -> float:
        current = self._ratios.get(topic, 1.0)
        if observed > current:
            current = max(current + self.DETERIORATE_STEP, observed)
        elif observed < current:
            current = max(current - self.IMPROVING_STEP, observed)
        self._ratios[topic] = current
        return current


class MemoryRecordsBuilder:
    """Appends records to a v2 batch in ``buffer``; :meth:`close` seals it."""

    __slots__ = (
        "_base_sequence",
        "_base_timestamp",
        "_buffer",
        "_built",
        "_codec",
        "_compressed",
        "_count",
        "_is_transactional",
        "_level",
        "_max_timestamp",
        "_pos",
        "_producer_epoch",
        "_producer_id",
        "_ratio_factor",
        "_write_limit",
        "compression_ratio",
        "full",
    )

    def __init__(
        self,
        buffer: bytearray,
        compression: CompressionType = CompressionType.NONE,
        write_limit: int | None = None,
        estimated_compression_ratio: float = 1.0,
        compression_level: int | None = None,
    ) -> None:
        if len(buffer) < RECORD_BATCH_OVERHEAD:
            raise ValueError(f"a batch buffer needs at least {RECORD_BATCH_OVERHEAD} bytes")
        self._buffer = buffer
        self._codec = compression
        self._compressed = compression != CompressionType.NONE
        self._level = compression_level
        self._write_limit = len(buffer) if write_limit is None else write_limit
        self._ratio_factor = estimated_compression_ratio * COMPRESSION_RATE_ESTIMATION_FACTOR
        self._pos = RECORD_BATCH_OVERHEAD
        self._count = 0
        self._base_timestamp = 0
        self._max_timestamp = -1
        self._producer_id = NO_PRODUCER_ID
        self._producer_epoch = NO_PRODUCER_EPOCH
        self._base_sequence = NO_SEQUENCE
        self._is_transactional = False
        self.full = False
        """No more appends: closed, or the write limit is reached (Kafka's isFull)."""
        self._built: memoryview | None = None
        self.compression_ratio = 1.0
        """Compressed / uncompressed size of the records, known after close."""

    @property
    def buffer(self) -> bytearray:
        """The buffer holding the batch (a fresh one if the batch outgrew the first)."""
        return self._buffer

    @property
    def num_records(self) -> int:
        return self._count

    @property
    def compression_type(self) -> CompressionType:
        return self._codec

    def estimated_bytes_written(self) -> int:
        """The batch size so far, with the records' size scaled by the compression
        estimate when compressing."""
        if not self._compressed:
            return self._pos
        uncompressed = self._pos - RECORD_BATCH_OVERHEAD
        return RECORD_BATCH_OVERHEAD + int(uncompressed * self._ratio_factor)

    def is_full(self) -> bool:
        """No more appends: closed, or the write limit is reached."""
        return self.full

    def try_append(
        self, timestamp: int, key: bytes | None, value: bytes | None, headers: bytes
    ) -> int:
        """Append one record if it fits; return its size in bytes, or 0 if it does not.

        The first record always fits (the buffer was sized for it). ``full`` tells
        whether the write limit is reached (Kafka's ``isFull``).
        """
        if self.full:
            return 0
        count = self._count
        if count:
            delta = timestamp - self._base_timestamp
            head = (
                b"\x00"  # record attributes
                + (_ZZ[delta] if 0 <= delta < _TABLE_SIZE else zigzag_varint(delta))
                + (_ZZ[count] if count < _TABLE_SIZE else zigzag_varint(count))
            )
        else:
            head = b"\x00\x00\x00"  # attributes, timestamp delta 0, offset delta 0
        if key is None:
            head += _NULL
        else:
            n = len(key)
            head += (_ZZ[n] if n < _TABLE_SIZE else zigzag_varint(n)) + key
        if value is None:
            head += _NULL
            value = b""
            n = 0
        else:
            n = len(value)
            head += _ZZ[n] if n < _TABLE_SIZE else zigzag_varint(n)
        body = len(head) + n + len(headers)
        record = b"".join(
            (_ZZ[body] if body < _TABLE_SIZE else zigzag_varint(body), head, value, headers)
        )
        size = len(record)
        pos = self._pos
        end = pos + size
        limit = self._write_limit
        if self._compressed:
            factor = self._ratio_factor
            if (
                count
                and RECORD_BATCH_OVERHEAD + int((pos - RECORD_BATCH_OVERHEAD) * factor) + size
                > limit
            ):
                return 0
            self.full = RECORD_BATCH_OVERHEAD + int((end - RECORD_BATCH_OVERHEAD) * factor) >= limit
        else:
            if count and end > limit:
                return 0
            self.full = end >= limit
        if not count:
            self._base_timestamp = timestamp
        buffer = self._buffer
        if end > len(buffer):
            buffer = self._grow(end)
        buffer[pos:end] = record
        self._pos = end
        self._count = count + 1
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return size

    def _grow(self, needed: int) -> bytearray:
        """Move to a larger, unpooled buffer (a pooled one is never resized)."""
        grown = bytearray(max(needed, len(self._buffer) * 2))
        grown[: self._pos] = memoryview(self._buffer)[: self._pos]
        self._buffer = grown
        return grown

    def close_for_record_appends(self) -> None:
        self.full = True

    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool
    ) -> None:
        """Set the idempotence fields (before :meth:`close`, or rewrite them after)."""
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = is_transactional
        if self._built is not None:
            self._write_header(len(self._built))

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def base_sequence(self) -> int:
        return self._base_sequence

    def is_closed(self) -> bool:
        return self._built is not None

    def close(self) -> memoryview:
        """Seal the batch (compress, header, CRC) and return its bytes; idempotent."""
        if self._built is not None:
            return self._built
        self.close_for_record_appends()
        if self._count == 0:
            raise ValueError("cannot build an empty record batch")
        end = self._pos
        if self._compressed:
            raw = memoryview(self._buffer)[RECORD_BATCH_OVERHEAD:end]
            packed = compress(self._codec, raw, self._level)
            raw.release()
            self.compression_ratio = len(packed) / (end - RECORD_BATCH_OVERHEAD)
            end = RECORD_BATCH_OVERHEAD + len(packed)
            if end > len(self._buffer):
                self._grow(end)
            self._buffer[RECORD_BATCH_OVERHEAD:end] = packed
        self._write_header(end)
        self._built = memoryview(self._buffer)[:end]
        return self._built

    def _write_header(self, end: int) -> None:
        buffer = self._buffer
        attributes = int(self._codec) | (TRANSACTIONAL_FLAG if self._is_transactional else 0)
        _HEAD.pack_into(buffer, 0, 0, end - 12, -1, 2)
        _TAIL.pack_into(
            buffer,
            _ATTRIBUTES_OFFSET,
            attributes,
            self._count - 1,
            self._base_timestamp,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            self._count,
        )
        view = memoryview(buffer)
        _CRC.pack_into(buffer, _CRC_OFFSET, crc32c(view[_ATTRIBUTES_OFFSET:end]))
        view.release()

    def size_in_bytes(self) -> int:
        """The sealed batch's size (the estimate while still open)."""
        if self._built is not None:
            return len(self._built)
        return self.estimated_bytes_written()

    def release(self) -> None:
        """Drop the view of the sealed batch, so the buffer may be reused."""
        if self._built is not None:
            self._built.release()
