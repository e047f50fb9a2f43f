"""Writing v2 record batches: ``MemoryRecordsBuilder`` for the producer, :func:`build_batch`
for the coordinators' internal records and transaction markers.

Each record (Kafka's ``DefaultRecord``) is ``length varint | attributes int8 |
timestampDelta varlong | offsetDelta varint | keyLength varint | key | valueLength varint |
value | headerCount varint | headers``, every varint zig-zag encoded; the batch header
is :mod:`.batch`'s. The builder reserves the header, appends records after it
(uncompressed), and on :meth:`~MemoryRecordsBuilder.close` compresses the records section
in place when a codec is set, fills the header and computes the CRC. The batch then is a
memoryview of the buffer, written to the socket without a copy.

The per-record path is one ``bytes.join`` and one slice assignment; varints below 16384
come from a precomputed table.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from .batch import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    CURRENT_MAGIC,
    HEADER_BODY_STRUCT,
    HEADER_PREFIX_STRUCT,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TRANSACTIONAL_FLAG_MASK,
    assemble_batch,
)
from .compression import CompressionType, compress
from .crc import crc32c
from .varint import SMALL_VARINT_LIMIT, SMALL_VARINTS, encode_varint

__all__ = [
    "MemoryRecordsBuilder",
    "build_batch",
    "encode_headers",
    "encode_record",
    "estimate_size_in_bytes_upper_bound",
]

MAX_RECORD_OVERHEAD: Final = 21  # length varint 5 + attributes 1 + ts varlong 10 + offset 5
COMPRESSION_RATE_ESTIMATION_FACTOR: Final = 1.05

_ZZ: Final = SMALL_VARINTS
_TABLE_SIZE: Final = SMALL_VARINT_LIMIT
_NULL: Final = encode_varint(-1)
_NO_HEADERS: Final = b"\x00"
_UINT32: Final = struct.Struct(">I")


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
        parts.append(encode_varint(len(raw_key)))
        parts.append(raw_key)
        if value is None:
            parts.append(_NULL)
        else:
            if isinstance(value, str):
                raise TypeError(f"header {key!r}: value must be bytes or None, not str")
            raw = bytes(value)
            parts.append(encode_varint(len(raw)))
            parts.append(raw)
        count += 1
    return encode_varint(count) + b"".join(parts)


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: bytes = _NO_HEADERS,
) -> bytes:
    """One record (``DefaultRecord``) with ``headers`` already encoded."""
    body = b"".join(
        (
            b"\x00",  # record attributes
            encode_varint(timestamp_delta),
            encode_varint(offset_delta),
            _NULL if key is None else encode_varint(len(key)) + key,
            _NULL if value is None else encode_varint(len(value)) + value,
            headers,
        )
    )
    return encode_varint(len(body)) + body


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    timestamp_ms: int,
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """An uncompressed batch of ``(key, value)`` records at base offset 0 (the log assigns
    offsets), every record stamped ``timestamp_ms``: the coordinators' internal records and,
    with ``control``, transaction markers."""
    if not records:
        raise ValueError("cannot build an empty record batch")
    attributes = (TRANSACTIONAL_FLAG_MASK if transactional else 0) | (
        CONTROL_FLAG_MASK if control else 0
    )
    payload = b"".join(encode_record(i, 0, k, v) for i, (k, v) in enumerate(records))
    return assemble_batch(
        0, NO_PARTITION_LEADER_EPOCH, attributes, len(records) - 1, timestamp_ms, timestamp_ms,
        producer_id, producer_epoch, NO_SEQUENCE, len(records), payload,
    )  # fmt: skip


def estimate_size_in_bytes_upper_bound(key_size: int, value_size: int, headers_size: int) -> int:
    """An upper bound of the size of a batch holding one such record (Kafka's
    ``estimateSizeInBytesUpperBound``); the size checked against max.request.size."""
    return BATCH_HEADER_SIZE + MAX_RECORD_OVERHEAD + 10 + key_size + value_size + headers_size


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
        if len(buffer) < BATCH_HEADER_SIZE:
            raise ValueError(f"a batch buffer needs at least {BATCH_HEADER_SIZE} bytes")
        self._buffer = buffer
        self._codec = compression
        self._compressed = compression != CompressionType.NONE
        self._level = compression_level
        self._write_limit = len(buffer) if write_limit is None else write_limit
        self._ratio_factor = estimated_compression_ratio * COMPRESSION_RATE_ESTIMATION_FACTOR
        self._pos = BATCH_HEADER_SIZE
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
        uncompressed = self._pos - BATCH_HEADER_SIZE
        return BATCH_HEADER_SIZE + int(uncompressed * self._ratio_factor)

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
                + (_ZZ[delta] if 0 <= delta < _TABLE_SIZE else encode_varint(delta))
                + (_ZZ[count] if count < _TABLE_SIZE else encode_varint(count))
            )
        else:
            head = b"\x00\x00\x00"  # attributes, timestamp delta 0, offset delta 0
        if key is None:
            head += _NULL
        else:
            n = len(key)
            head += (_ZZ[n] if n < _TABLE_SIZE else encode_varint(n)) + key
        if value is None:
            head += _NULL
            value = b""
            n = 0
        else:
            n = len(value)
            head += _ZZ[n] if n < _TABLE_SIZE else encode_varint(n)
        body = len(head) + n + len(headers)
        record = b"".join(
            (_ZZ[body] if body < _TABLE_SIZE else encode_varint(body), head, value, headers)
        )
        size = len(record)
        pos = self._pos
        end = pos + size
        limit = self._write_limit
        if self._compressed:
            factor = self._ratio_factor
            if count and BATCH_HEADER_SIZE + int((pos - BATCH_HEADER_SIZE) * factor) + size > limit:
                return 0
            self.full = BATCH_HEADER_SIZE + int((end - BATCH_HEADER_SIZE) * factor) >= limit
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
            raw = memoryview(self._buffer)[BATCH_HEADER_SIZE:end]
            packed = compress(self._codec, raw, self._level)
            raw.release()
            self.compression_ratio = len(packed) / (end - BATCH_HEADER_SIZE)
            end = BATCH_HEADER_SIZE + len(packed)
            if end > len(self._buffer):
                self._grow(end)
            self._buffer[BATCH_HEADER_SIZE:end] = packed
        self._write_header(end)
        self._built = memoryview(self._buffer)[:end]
        return self._built

    def _write_header(self, end: int) -> None:
        buffer = self._buffer
        attributes = int(self._codec) | (TRANSACTIONAL_FLAG_MASK if self._is_transactional else 0)
        HEADER_PREFIX_STRUCT.pack_into(
            buffer, 0, 0, end - LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH, CURRENT_MAGIC
        )
        HEADER_BODY_STRUCT.pack_into(
            buffer,
            ATTRIBUTES_OFFSET,
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
        _UINT32.pack_into(buffer, CRC_OFFSET, crc32c(view[ATTRIBUTES_OFFSET:end]))
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
