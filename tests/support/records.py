"""Record batches for tests, built and read independently of the code under test.

:func:`build_batch` and :func:`decode_batches` are this suite's own magic-v2 encoder and
decoder (the oracle the log, cleaner and client tests compare against): they import
nothing from ``sluice``. :func:`read_batches` reads with kafka-python and
:func:`record_batch` writes with kio, two further independent implementations.
"""

from __future__ import annotations

import gzip
import struct
import warnings
from dataclasses import dataclass, field
from typing import Any

import cramjam
from crc32c import crc32c

_HEADER = struct.Struct(">qiibIhiqqqhii")


@dataclass
class Rec:
    """A record to encode: value, optional key, headers and absolute timestamp."""

    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None


def varint(value: int) -> bytes:
    """Zig-zag varint/varlong encoding as in the Kafka record format."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return varint(-1)
    return varint(len(data)) + data


def encode_record(offset_delta: int, timestamp_delta: int, rec: Rec) -> bytes:
    body = bytearray()
    body.append(0)  # attributes
    body += varint(timestamp_delta)
    body += varint(offset_delta)
    body += _bytes_field(rec.key)
    body += _bytes_field(rec.value)
    body += varint(len(rec.headers))
    for name, value in rec.headers:
        body += _bytes_field(name.encode())
        body += _bytes_field(value)
    return varint(len(body)) + bytes(body)


def _xerial_snappy(data: bytes) -> bytes:
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    out = bytearray(header)
    for start in range(0, max(len(data), 1), 32 * 1024):
        chunk = bytes(cramjam.snappy.compress_raw(data[start : start + 32 * 1024]))
        out += struct.pack(">i", len(chunk)) + chunk
    return bytes(out)


def _unxerial_snappy(data: bytes) -> bytes:
    """Raw snappy, or xerial framing: a 16-byte header, then length-prefixed raw blocks."""
    if data[:8] != b"\x82SNAPPY\x00":
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = 16
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        out += bytes(cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    return bytes(out)


def compress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return gzip.compress(data)
    if codec == 2:
        return _xerial_snappy(data)
    if codec == 3:
        return bytes(cramjam.lz4.compress(data))
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(codec)


def decompress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return gzip.decompress(data)
    if codec == 2:
        return _unxerial_snappy(data)
    if codec == 3:
        return bytes(cramjam.lz4.decompress(data))
    return bytes(cramjam.zstd.decompress(data))


def build_batch(
    records: list[Rec] | list[bytes],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
    log_append_time: bool = False,
    transactional: bool = False,
    control: bool = False,
    default_timestamp: int = 1_700_000_000_000,
) -> bytes:
    """Encode a complete, CRC-valid magic v2 batch."""
    recs = [r if isinstance(r, Rec) else Rec(r) for r in records]
    stamps = [default_timestamp if r.timestamp is None else r.timestamp for r in recs]
    first_ts = base_timestamp if base_timestamp is not None else (stamps[0] if stamps else -1)
    payload = b"".join(
        encode_record(i, stamp - first_ts, r)
        for i, (r, stamp) in enumerate(zip(recs, stamps, strict=True))
    )
    attributes = compression | (0x08 if log_append_time else 0)
    attributes |= (0x10 if transactional else 0) | (0x20 if control else 0)
    body = struct.pack(
        ">hiqqqhii",
        attributes,
        len(recs) - 1,
        first_ts,
        max(stamps) if stamps else -1,
        producer_id,
        producer_epoch,
        base_sequence,
        len(recs),
    ) + compress(compression, payload)
    crc = crc32c(body)
    length = 4 + 1 + 4 + len(body)  # leader epoch + magic + crc + rest
    return struct.pack(">qiibI", base_offset, length, partition_leader_epoch, 2, crc) + body


@dataclass
class DecodedRecord:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def decode_batches(buf: bytes) -> list[tuple[tuple[int, ...], list[DecodedRecord]]]:
    """Fully decode every batch (test oracle): (header fields, records)."""
    out = []
    pos = 0
    while pos + 61 <= len(buf):
        fields = _HEADER.unpack_from(buf, pos)
        size = fields[1] + 12
        batch = buf[pos : pos + size]
        attributes, base_ts, max_ts = fields[5], fields[7], fields[8]
        data = decompress(attributes & 7, batch[61:])
        recs = []
        p = 0
        for _ in range(fields[12]):
            length, p = read_varint(data, p)
            end = p + length
            p += 1
            ts_delta, p = read_varint(data, p)
            off_delta, p = read_varint(data, p)
            key, p = _read_bytes(data, p)
            value, p = _read_bytes(data, p)
            n_headers, p = read_varint(data, p)
            headers = []
            for _ in range(n_headers):
                name, p = _read_bytes(data, p)
                hval, p = _read_bytes(data, p)
                headers.append(((name or b"").decode(), hval))
            timestamp = max_ts if attributes & 0x08 else base_ts + ts_delta
            recs.append(DecodedRecord(fields[0] + off_delta, timestamp, key, value, headers))
            assert p == end
            p = end
        out.append((fields, recs))
        pos += size
    return out


def _read_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(data, pos)
    if length < 0:
        return None, pos
    return data[pos : pos + length], pos + length


def values_of(buf: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in ``buf``."""
    return [(r.offset, r.value) for _, recs in decode_batches(buf) for r in recs]


def read_batches(data: Any) -> list[dict[str, Any]]:
    """Parse record batches with kafka-python's independent reader (CRC checked)."""
    with warnings.catch_warnings():  # kafka-python's schema loader uses deprecated APIs
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record import MemoryRecords

    records = MemoryRecords(bytes(data))
    out = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc(), "CRC mismatch"
        out.append(
            {
                "compression": batch.compression_type,
                "producer_id": batch.producer_id,
                "producer_epoch": batch.producer_epoch,
                "base_sequence": batch.base_sequence,
                "records": [
                    (r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch
                ],
            }
        )
    return out


def record_batch(values: list[bytes], key: bytes | None = None) -> bytes:
    """A valid magic-v2 record batch (kio's writer) holding ``values``."""
    import datetime
    import io

    from kio.records.schema import NewRecordBatch, Record
    from kio.records.writers import write_new_batch
    from kio.static.primitive import i8, i16, i32, i64

    now = datetime.datetime.now(datetime.UTC)
    records = tuple(
        Record(attributes=i8(0), timestamp=now, offset=i64(i), key=key, value=v, headers=())
        for i, v in enumerate(values)
    )
    batch = NewRecordBatch(
        producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1),
        records=records, attributes=i16(0),
    )  # fmt: skip
    buf = io.BytesIO()
    write_new_batch(buf, batch)
    return buf.getvalue()
