"""Reading the records of a v2 batch: the one record decoder of Sluice.

The broker's produce and fetch paths never come here (they move batches whole); the
consumer, the coordinators loading ``__consumer_offsets`` and ``__transaction_state``,
timestamp look-ups and producer-state recovery do. A record (``DefaultRecord``) is
``length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
keyLength varint | key | valueLength varint | value | headerCount varint | headers``.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final, NamedTuple

import cramjam

from sluice.protocol._wire import BytesLike

from .batch import BATCH_HEADER_SIZE, BatchHeader, compute_crc
from .compression import CompressionType, decompress
from .errors import CorruptRecordException
from .varint import read_varint

__all__ = [
    "CONTROL_TYPE_ABORT",
    "CONTROL_TYPE_COMMIT",
    "Record",
    "batch_records",
    "batch_section",
    "control_type",
    "read_records",
]

CONTROL_TYPE_ABORT: Final = 0
CONTROL_TYPE_COMMIT: Final = 1

_CONTROL_KEY: Final = struct.Struct(">hh")  # version, type


class Record(NamedTuple):
    """One decoded record; offsets and timestamps are relative to its batch's base."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def read_records(payload: BytesLike, count: int) -> list[Record]:
    """The ``count`` records of an uncompressed records section.

    :raises CorruptRecordException: if the section ends early or a record overruns it.
    """
    data = bytes(payload)
    out: list[Record] = []
    pos = 0
    try:
        for _ in range(count):
            length, pos = read_varint(data, pos)
            end = pos + length
            ts_delta, pos = read_varint(data, pos + 1)  # after the attributes byte
            off_delta, pos = read_varint(data, pos)
            klen, pos = read_varint(data, pos)
            key = None
            if klen >= 0:
                key = data[pos : pos + klen]
                pos += klen
            vlen, pos = read_varint(data, pos)
            value = None
            if vlen >= 0:
                value = data[pos : pos + vlen]
                pos += vlen
            hcount, pos = read_varint(data, pos)
            headers: list[tuple[str, bytes | None]] = []
            for _h in range(hcount):
                hk, pos = read_varint(data, pos)
                hkey = data[pos : pos + hk].decode("utf-8", "replace")
                pos += hk
                hv, pos = read_varint(data, pos)
                hval = None
                if hv >= 0:
                    hval = data[pos : pos + hv]
                    pos += hv
                headers.append((hkey, hval))
            if pos > end or end > len(data):
                raise ValueError("record overruns its length")
            out.append(Record(off_delta, ts_delta, key, value, headers))
            pos = end
    except (IndexError, ValueError) as exc:
        raise CorruptRecordException(f"cannot decode record {len(out)}: {exc}") from exc
    return out


def batch_section(
    buf: BytesLike, header: BatchHeader, check_crc: bool = True
) -> bytes | memoryview:
    """The records section of the batch ``header`` describes (at ``header.position`` of
    ``buf``), decompressed; the CRC is checked first unless ``check_crc`` is false.

    :raises CorruptRecordException: on a truncated batch, a CRC mismatch or a payload
        that does not decompress.
    """
    start = header.position
    size = header.size_in_bytes
    view = memoryview(buf)
    if len(view) < start + size:
        raise CorruptRecordException(f"truncated batch at offset {header.base_offset}")
    if check_crc:
        crc = compute_crc(view, start, size)
        if crc != header.crc:
            raise CorruptRecordException(
                f"record batch at offset {header.base_offset} is corrupt "
                f"(stored crc = {header.crc}, computed crc = {crc})"
            )
    section = view[start + BATCH_HEADER_SIZE : start + size]
    codec = header.compression_type
    if codec == CompressionType.NONE:
        return section
    try:
        return decompress(codec, section)
    except (ValueError, zlib.error, cramjam.DecompressionError) as exc:
        raise CorruptRecordException(
            f"cannot decompress the batch at offset {header.base_offset}: {exc}"
        ) from exc


def batch_records(buf: BytesLike, header: BatchHeader, check_crc: bool = True) -> list[Record]:
    """The records of the whole batch ``header`` describes (:func:`batch_section`).

    :raises CorruptRecordException: on a CRC mismatch, a bad payload or an unknown codec.
    """
    return read_records(memoryview(batch_section(buf, header, check_crc)), header.records_count)


def control_type(record: Record) -> int | None:
    """The type of a control record (``CONTROL_TYPE_ABORT`` or ``CONTROL_TYPE_COMMIT``
    for transaction markers), or None if its key is not a control key."""
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    return int(_CONTROL_KEY.unpack_from(key)[1])
