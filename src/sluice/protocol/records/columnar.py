"""Decoding the records of v2 batches into columns in bulk (numpy and pyarrow).

:mod:`.reader` decodes a batch record by record into Python objects; this module
decodes many batches at once into a :class:`RecordColumns`: numpy arrays of offsets,
timestamps and timestamp types, and Arrow arrays of keys, values and headers. It
serves readers that hand records on as Arrow data (the consumer's
``poll_arrow`` and the Spark source), where a Python object per record is the
dominant cost.

How: each batch is checked (CRC-32C) and decompressed once; the records sections
are joined into one buffer. The only per-record Python step is a loop that walks
the records' length prefixes to find where each record starts (a record's position
depends on every length before it). Every other field (timestamp and offset deltas,
key and value lengths, header counts, headers) is read at all record positions at
once with vectorized varint decoding (numpy), and keys and values become Arrow
binary arrays with one Arrow ``take`` over the buffer (no per-record copy in
Python). The result equals :func:`.reader.batch_records` on the same batches; the
tests check that with hypothesis.

numpy and pyarrow are imported by this module only; the broker never loads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from .batch import TIMESTAMP_TYPE_MASK, BatchHeader
from .errors import CorruptRecordException
from .reader import batch_section
from .varint import read_varint

__all__ = [
    "ARROW_HEADERS",
    "ARROW_SCHEMA",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "RecordColumns",
    "concat",
    "read_columns",
]

TIMESTAMP_CREATE_TIME: Final = 1
TIMESTAMP_LOG_APPEND_TIME: Final = 2
"""Timestamp types as the consumer reports them (``ConsumerRecord.timestamp_type``)."""

ARROW_HEADERS: Final = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
ARROW_SCHEMA: Final = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
        ("timestamp_type", pa.int8()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", ARROW_HEADERS),
        ("leader_epoch", pa.int32()),
    ]
)
"""The columns of :meth:`RecordColumns.to_arrow`: ``ConsumerRecord``'s fields."""
_PAD: Final = 16  # zero bytes after the buffer: a varint read at its end stays inside
_I64 = npt.NDArray[np.int64]


class RecordColumns:
    """Records of one partition as columns, in offset order.

    ``offsets`` and ``timestamps`` (ms) are int64 arrays, ``timestamp_types`` int8
    (1 create time, 2 log append time), ``leader_epochs`` int32; ``keys`` and
    ``values`` are Arrow binary arrays (null for a null key or value); ``headers``
    is an Arrow ``list<struct<key: string, value: binary>>`` array.
    """

    __slots__ = ("headers", "keys", "leader_epochs", "offsets", "timestamp_types", "timestamps",
                 "values")  # fmt: skip

    def __init__(
        self,
        offsets: _I64,
        timestamps: _I64,
        timestamp_types: npt.NDArray[np.int8],
        leader_epochs: npt.NDArray[np.int32],
        keys: Any,
        values: Any,
        headers: Any,
    ) -> None:
        self.offsets = offsets
        self.timestamps = timestamps
        self.timestamp_types = timestamp_types
        self.leader_epochs = leader_epochs
        self.keys = keys
        self.values = values
        self.headers = headers

    def __len__(self) -> int:
        return len(self.offsets)

    @classmethod
    def empty(cls) -> RecordColumns:
        return cls.from_records([])

    @classmethod
    def from_records(cls, records: Sequence[Any]) -> RecordColumns:
        """Columns of records decoded one by one (``ConsumerRecord``-like objects with
        offset, timestamp, timestamp_type, leader_epoch, key, value, headers)."""
        return cls(
            np.array([r.offset for r in records], np.int64),
            np.array([r.timestamp for r in records], np.int64),
            np.array([r.timestamp_type for r in records], np.int8),
            np.array([r.leader_epoch for r in records], np.int32),
            pa.array([r.key for r in records], pa.binary()),
            pa.array([r.value for r in records], pa.binary()),
            pa.array(
                [[{"key": k, "value": v} for k, v in r.headers] for r in records], ARROW_HEADERS
            ),
        )

    def slice(self, start: int, stop: int | None = None) -> RecordColumns:
        """Rows ``[start, stop)``, without copying."""
        stop = len(self) if stop is None else min(stop, len(self))
        start = min(start, stop)
        n = stop - start
        return RecordColumns(
            self.offsets[start:stop], self.timestamps[start:stop],
            self.timestamp_types[start:stop], self.leader_epochs[start:stop],
            self.keys.slice(start, n), self.values.slice(start, n), self.headers.slice(start, n),
        )  # fmt: skip

    def to_arrow(self, topic: str, partition: int) -> Any:
        """A ``pyarrow.RecordBatch`` of :data:`ARROW_SCHEMA` (the numeric columns are
        not copied)."""
        n = len(self)
        return pa.RecordBatch.from_arrays(
            [
                pa.repeat(pa.scalar(topic, pa.string()), n),
                pa.repeat(pa.scalar(partition, pa.int32()), n),
                pa.array(self.offsets),
                pa.Array.from_buffers(
                    ARROW_SCHEMA.field("timestamp").type, n, [None, pa.py_buffer(self.timestamps)]
                ),
                pa.array(self.timestamp_types),
                self.keys,
                self.values,
                self.headers,
                pa.array(self.leader_epochs),
            ],
            schema=ARROW_SCHEMA,
        )

    def from_offset(self, offset: int) -> RecordColumns:
        """The rows at or after ``offset``."""
        return self.slice(int(np.searchsorted(self.offsets, offset)))


def concat(parts: Sequence[RecordColumns]) -> RecordColumns:
    """One :class:`RecordColumns` of ``parts`` in order."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return RecordColumns.empty()
    return RecordColumns(
        np.concatenate([p.offsets for p in parts]),
        np.concatenate([p.timestamps for p in parts]),
        np.concatenate([p.timestamp_types for p in parts]),
        np.concatenate([p.leader_epochs for p in parts]),
        pa.concat_arrays([p.keys for p in parts]),
        pa.concat_arrays([p.values for p in parts]),
        pa.concat_arrays([p.headers for p in parts]),
    )


def _record_heads(data: bytes, pos: int, count: int, heads: list[int]) -> None:
    """Append the positions of ``count`` records' length prefixes, starting at ``pos``:
    the one per-record loop (each record's position depends on the lengths before it)."""
    append = heads.append
    for _ in range(count):
        append(pos)
        b = data[pos]
        if b & 1:  # zig-zag: an odd first byte is a negative length
            raise ValueError(f"negative record length at {pos}")
        if b < 0x80:
            pos += 1 + ((b >> 1) ^ -(b & 1))
            continue
        b1 = data[pos + 1]
        if b1 < 0x80:
            z = (b & 0x7F) | (b1 << 7)
            pos += 2 + ((z >> 1) ^ -(z & 1))
            continue
        length, pos = read_varint(data, pos)
        pos += length


def _varints(buf: npt.NDArray[np.uint8], pos: _I64) -> tuple[_I64, _I64]:
    """The zig-zag varints at every position of ``pos``, and their sizes in bytes."""
    last = len(buf) - 1
    b = buf[np.minimum(pos, last)]  # a corrupt record's positions are caught by the caller
    raw = (b & 0x7F).astype(np.uint64)
    size = np.ones(len(pos), np.int64)
    more = b >= 0x80
    shift = 7
    while more.any():
        if shift > 63:
            raise CorruptRecordException("varint is longer than 10 bytes")
        nxt = buf[np.minimum(pos + size, last)]
        raw |= np.where(more, (nxt & 0x7F).astype(np.uint64) << np.uint64(shift), 0).astype(
            np.uint64
        )
        size += more
        more &= nxt >= 0x80
        shift += 7
    value = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return value, size


def _binary(data: Any, starts: _I64, lengths: _I64) -> Any:
    """An Arrow binary array of ``data[starts[i] : starts[i] + lengths[i]]`` (null where
    the length is negative). The slices are in order and do not overlap, so they and the
    gaps between them are the elements of one array over ``data``; ``take`` keeps the
    slices and copies them into a new, contiguous array."""
    n = len(starts)
    if n == 0:
        return pa.array([], pa.binary())
    valid = lengths >= 0
    ends = starts + np.where(valid, lengths, 0)
    large = int(ends[-1]) >= 2**31
    offsets = np.empty(2 * n + 1, np.int64 if large else np.int32)
    offsets[0 : 2 * n : 2] = starts
    offsets[1 : 2 * n : 2] = ends
    offsets[2 * n] = ends[-1]
    bitmap = None
    nulls = n - int(np.count_nonzero(valid))
    if nulls:
        mask = np.ones(2 * n, bool)
        mask[0 : 2 * n : 2] = valid
        bitmap = pa.py_buffer(np.packbits(mask, bitorder="little"))
    spans = pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(), 2 * n,
        [bitmap, pa.py_buffer(offsets), data], null_count=nulls,
    )  # fmt: skip
    out = spans.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    return out.cast(pa.binary()) if large else out


def _header_spans(
    buf: npt.NDArray[np.uint8], pos: _I64, counts: _I64
) -> tuple[npt.NDArray[np.int32], tuple[_I64, _I64, _I64, _I64], _I64]:
    """Where the headers of records whose header lists start at ``pos`` are: the list
    offsets, the keys' and values' starts and lengths, and where each record's headers
    end."""
    n = len(pos)
    list_offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    total = int(list_offsets[-1])
    spans = tuple(np.zeros(total, np.int64) for _ in range(4))
    key_starts, key_lengths, value_starts, value_lengths = spans
    pos = pos.copy()
    limit = len(buf)
    k = 0
    while True:
        rows = np.flatnonzero(counts > k)
        if len(rows) == 0:
            break
        at = pos[rows]
        flat = list_offsets[rows] + k
        klen, size = _varints(buf, at)
        at = at + size
        key_starts[flat], key_lengths[flat] = at, klen
        at = at + np.clip(klen, 0, limit)
        vlen, size = _varints(buf, at)
        at = at + size
        value_starts[flat], value_lengths[flat] = at, vlen
        pos[rows] = at + np.clip(vlen, 0, limit)
        k += 1
    return list_offsets, (key_starts, key_lengths, value_starts, value_lengths), pos


def _headers(
    data: Any, list_offsets: npt.NDArray[np.int32], spans: tuple[_I64, _I64, _I64, _I64]
) -> Any:
    """The ``list<struct<key: string, value: binary>>`` array of :func:`_header_spans`."""
    key_starts, key_lengths, value_starts, value_lengths = spans
    keys = _binary(data, key_starts, np.maximum(key_lengths, 0))
    try:
        names = keys.cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8: decoded with replacement characters, as one by one
        names = pa.array([b.decode("utf-8", "replace") for b in keys.to_pylist()], pa.string())
    values = _binary(data, value_starts, value_lengths)
    items = pa.StructArray.from_arrays([names, values], ["key", "value"])
    return pa.ListArray.from_arrays(pa.array(list_offsets), items, type=ARROW_HEADERS)


def read_columns(
    buf: bytes | bytearray | memoryview, batches: Sequence[BatchHeader], check_crc: bool = True
) -> RecordColumns:
    """The records of ``batches`` (headers read from ``buf``, in order; data batches,
    any codec) as columns.

    :raises CorruptRecordException: on a CRC mismatch, a bad payload or a record that
        overruns its batch.
    """
    if not batches:
        return RecordColumns.empty()
    view = memoryview(buf)
    sections = [batch_section(view, h, check_crc) for h in batches]
    joined = b"".join([*sections, bytes(_PAD)])
    heads: list[int] = []
    bounds = np.empty(len(batches), np.int64)
    pos = 0
    try:
        for i, (header, section) in enumerate(zip(batches, sections, strict=True)):
            if header.records_count > len(section):  # a record takes a byte at least
                raise ValueError(f"{header.records_count} records in {len(section)} bytes")
            _record_heads(joined, pos, header.records_count, heads)
            pos += len(section)
            bounds[i] = pos
    except (IndexError, ValueError) as exc:
        raise CorruptRecordException(f"cannot decode records: {exc}") from exc
    counts = np.fromiter((h.records_count for h in batches), np.int64, len(batches))
    arr = np.frombuffer(joined, np.uint8)
    data = pa.py_buffer(joined)
    head = np.array(heads, np.int64)
    length, size = _varints(arr, head)
    body = head + size
    record_end = body + length
    ts_delta, size = _varints(arr, body + 1)  # after the attributes byte
    at = body + 1 + size
    offset_delta, size = _varints(arr, at)
    at += size
    key_length, size = _varints(arr, at)
    key_start = at + size
    limit = len(arr)
    at = key_start + np.clip(key_length, 0, limit)
    value_length, size = _varints(arr, at)
    value_start = at + size
    at = value_start + np.clip(value_length, 0, limit)
    header_count, size = _varints(arr, at)
    at += size
    section_end = np.repeat(bounds, counts)
    _check(length, at, record_end, section_end, header_count)
    list_offsets, spans, at = _header_spans(arr, at, np.maximum(header_count, 0))
    _check(length, at, record_end, section_end, None)
    fields = np.array(
        [(h.base_offset, h.base_timestamp, h.max_timestamp, h.attributes & TIMESTAMP_TYPE_MASK,
          h.partition_leader_epoch) for h in batches], np.int64,
    )  # fmt: skip
    per_record = np.repeat(fields, counts, axis=0)
    log_append = per_record[:, 3] != 0
    timestamps = np.where(log_append, per_record[:, 2], per_record[:, 1] + ts_delta)
    return RecordColumns(
        per_record[:, 0] + offset_delta,
        timestamps,
        np.where(log_append, TIMESTAMP_LOG_APPEND_TIME, TIMESTAMP_CREATE_TIME).astype(np.int8),
        per_record[:, 4].astype(np.int32),
        _binary(data, key_start, key_length),
        _binary(data, value_start, value_length),
        _headers(data, list_offsets, spans),
    )


def _check(
    length: _I64, at: _I64, record_end: _I64, section_end: _I64, headers: _I64 | None
) -> None:
    """Every record within its length and its batch (and, before the headers are read,
    no more headers than bytes left)."""
    bad = (length < 0) | (at > record_end) | (record_end > section_end)
    if headers is not None:
        bad |= headers > record_end - at
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise CorruptRecordException(f"cannot decode record {index}: it overruns its length")
