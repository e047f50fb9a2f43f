"""Reading record batches from Fetch responses: magic v2 batches (every codec) and
legacy v0/v1 message sets, control batches skipped, aborted transactions filtered.

The producer's :mod:`.records` writes batches; this is the reading side. The
decompression codecs are the producer's (:func:`.compression.decompress`), which
read gzip, snappy (raw and xerial framing), lz4 frames and zstd.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from sluice.checksum import crc32c

from .compression import decompress
from .errors import CorruptRecordException

__all__ = [
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "ConsumerRecord",
    "RecordBatchInfo",
    "decode_records",
]

TIMESTAMP_NOT_AVAILABLE: Final = 0
TIMESTAMP_CREATE_TIME: Final = 1
TIMESTAMP_LOG_APPEND_TIME: Final = 2

_HEAD: Final = struct.Struct(">qiib")  # baseOffset, batchLength, leaderEpoch, magic
_V2: Final = struct.Struct(
    ">IhiqqqhiI"
)  # crc attrs lastOffsetDelta baseTs maxTs pid epoch seq count
_LEGACY: Final = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_CONTROL_FLAG: Final = 0x20
_TRANSACTIONAL_FLAG: Final = 0x10
_LOG_APPEND_FLAG: Final = 0x08


class ConsumerRecord(NamedTuple):
    """One record as the consumer returns it (Kafka's ``ConsumerRecord``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    leader_epoch: int = -1


@dataclass
class RecordBatchInfo:
    """A batch's header fields and its (decoded) records."""

    base_offset: int
    last_offset: int
    producer_id: int
    is_transactional: bool
    is_control: bool
    records: list[ConsumerRecord] = field(default_factory=list)
    control_type: int = -1  # 0 abort, 1 commit


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


def _v2_records(
    topic: str, partition: int, data: bytes, count: int, base_offset: int, base_ts: int,
    ts_type: int, max_ts: int, leader_epoch: int,
) -> list[ConsumerRecord]:  # fmt: skip
    out: list[ConsumerRecord] = []
    pos = 0
    for _ in range(count):
        length, pos = _varint(data, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = _varint(data, pos)
        off_delta, pos = _varint(data, pos)
        klen, pos = _varint(data, pos)
        key = None
        if klen >= 0:
            key = data[pos : pos + klen]
            pos += klen
        vlen, pos = _varint(data, pos)
        value = None
        if vlen >= 0:
            value = data[pos : pos + vlen]
            pos += vlen
        hcount, pos = _varint(data, pos)
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(hcount):
            hk, pos = _varint(data, pos)
            hkey = data[pos : pos + hk].decode("utf-8", "replace")
            pos += hk
            hv, pos = _varint(data, pos)
            hval = None
            if hv >= 0:
                hval = data[pos : pos + hv]
                pos += hv
            headers.append((hkey, hval))
        pos = end
        timestamp = max_ts if ts_type == TIMESTAMP_LOG_APPEND_TIME else base_ts + ts_delta
        out.append(
            ConsumerRecord(
                topic,
                partition,
                base_offset + off_delta,
                timestamp,
                ts_type,
                key,
                value,
                headers,
                leader_epoch,
            )
        )
    return out


def iter_batches(
    topic: str, partition: int, data: Any, check_crcs: bool = True
) -> Iterator[RecordBatchInfo]:
    """The complete batches in ``data`` (a trailing partial batch is ignored)."""
    buf = bytes(data)
    pos = 0
    size = len(buf)
    while pos + _HEAD.size <= size:
        base_offset, length, leader_epoch, magic = _HEAD.unpack_from(buf, pos)
        end = pos + 12 + length
        if end > size:
            return  # partial batch at the end of a fetch response
        if magic == 2:
            yield _decode_v2(topic, partition, buf, pos, end, base_offset, leader_epoch, check_crcs)
        elif magic in (0, 1):
            yield from _decode_legacy(topic, partition, buf[pos:end])
        else:
            raise CorruptRecordException(f"unknown record batch magic {magic}")
        pos = end


def _decode_v2(
    topic: str, partition: int, buf: bytes, pos: int, end: int, base_offset: int,
    leader_epoch: int, check_crcs: bool,
) -> RecordBatchInfo:  # fmt: skip
    crc, attrs, last_delta, base_ts, max_ts, pid, _epoch, _seq, count = _V2.unpack_from(
        buf, pos + _HEAD.size
    )
    body_start = pos + _HEAD.size + _V2.size
    if check_crcs and crc32c(buf[pos + 21 : end]) != crc:
        raise CorruptRecordException(f"{topic}-{partition}: CRC mismatch at offset {base_offset}")
    info = RecordBatchInfo(
        base_offset, base_offset + last_delta, pid, bool(attrs & _TRANSACTIONAL_FLAG),
        bool(attrs & _CONTROL_FLAG),
    )  # fmt: skip
    codec = attrs & 0x07
    data = buf[body_start:end]
    if codec:
        data = decompress(codec, data)
    ts_type = TIMESTAMP_LOG_APPEND_TIME if attrs & _LOG_APPEND_FLAG else TIMESTAMP_CREATE_TIME
    records = _v2_records(
        topic, partition, data, count, base_offset, base_ts, ts_type, max_ts, leader_epoch
    )
    if info.is_control:
        if records and records[0].key is not None and len(records[0].key) >= 4:
            info.control_type = struct.unpack_from(">h", records[0].key, 2)[0]
    else:
        info.records = records
    return info


def _decode_legacy(topic: str, partition: int, buf: bytes) -> Iterator[RecordBatchInfo]:
    """A v0/v1 message (a wrapper with a compressed inner message set, or a plain one)."""
    offset, _size, _crc, magic, attrs = _LEGACY.unpack_from(buf, 0)
    pos = _LEGACY.size
    timestamp = -1
    if magic == 1:
        (timestamp,) = struct.unpack_from(">q", buf, pos)
        pos += 8
    (klen,) = struct.unpack_from(">i", buf, pos)
    pos += 4
    key = None
    if klen >= 0:
        key = buf[pos : pos + klen]
        pos += klen
    (vlen,) = struct.unpack_from(">i", buf, pos)
    pos += 4
    value = None
    if vlen >= 0:
        value = buf[pos : pos + vlen]
    codec = attrs & 0x07
    ts_type = TIMESTAMP_NOT_AVAILABLE
    if magic == 1:
        ts_type = TIMESTAMP_LOG_APPEND_TIME if attrs & _LOG_APPEND_FLAG else TIMESTAMP_CREATE_TIME
    if codec and value is not None:
        inner = decompress(codec, value) if codec != 1 else zlib.decompress(value, 47)
        inner_batches = list(iter_batches(topic, partition, inner))
        records = [r for b in inner_batches for r in b.records]
        if records and magic == 1:  # inner offsets are relative to the wrapper's last
            shift = offset - records[-1].offset
            records = [r._replace(offset=r.offset + shift) for r in records]
            if ts_type == TIMESTAMP_LOG_APPEND_TIME:
                records = [r._replace(timestamp=timestamp) for r in records]
        if records:
            yield RecordBatchInfo(records[0].offset, offset, -1, False, False, records)
        return
    record = ConsumerRecord(topic, partition, offset, timestamp, ts_type, key, value, [])
    yield RecordBatchInfo(offset, offset, -1, False, False, [record])


def decode_records(
    topic: str,
    partition: int,
    data: Any,
    fetch_offset: int,
    aborted: Iterable[tuple[int, int]] = (),
    read_committed: bool = False,
    check_crcs: bool = True,
) -> tuple[list[ConsumerRecord], int]:
    """Records at or after ``fetch_offset`` in a partition's fetched data, and the
    offset to fetch next (past the last complete batch, control batches included).

    With ``read_committed``, records of aborted transactions (``aborted``: the
    response's (producer id, first offset) pairs) are dropped, as Kafka's Fetcher does.
    """
    out: list[ConsumerRecord] = []
    next_offset = fetch_offset
    pending = sorted(aborted, key=lambda a: a[1])
    aborting: set[int] = set()
    for batch in iter_batches(topic, partition, data, check_crcs):
        next_offset = max(next_offset, batch.last_offset + 1)
        if read_committed:
            while pending and pending[0][1] <= batch.last_offset:
                aborting.add(pending.pop(0)[0])
            if batch.is_control:
                if batch.control_type == 0:
                    aborting.discard(batch.producer_id)
                continue
            if batch.is_transactional and batch.producer_id in aborting:
                continue
        elif batch.is_control:
            continue
        for record in batch.records:
            if record.offset >= fetch_offset:
                out.append(record)
    return out, next_offset
