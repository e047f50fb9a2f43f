"""Reading record batches from Fetch responses: magic v2 batches (every codec) and
legacy v0/v1 message sets, control batches skipped, aborted transactions filtered.

v2 batches are read with the record-batch format's own header reader and record
decoder (:mod:`sluice.protocol.records`); this module adds what only a consumer needs:
the legacy formats, ``ConsumerRecord`` and read_committed filtering.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from sluice.client.errors import CorruptRecordException
from sluice.protocol.records import batch as record_batch
from sluice.protocol.records.compression import decompress
from sluice.protocol.records.errors import CorruptRecordException as InvalidBatch
from sluice.protocol.records.reader import batch_records, control_type

if TYPE_CHECKING:
    from sluice.protocol.records.columnar import RecordColumns

__all__ = [
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "ConsumerRecord",
    "RecordBatchInfo",
    "decode_columns",
    "decode_records",
    "next_fetch_offset",
]

TIMESTAMP_NOT_AVAILABLE: Final = 0
TIMESTAMP_CREATE_TIME: Final = 1
TIMESTAMP_LOG_APPEND_TIME: Final = 2

_LEGACY: Final = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_LOG_APPEND_FLAG: Final = record_batch.TIMESTAMP_TYPE_MASK


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


def iter_batches(
    topic: str, partition: int, data: Any, check_crcs: bool = True
) -> Iterator[RecordBatchInfo]:
    """The complete batches in ``data`` (a trailing partial batch is ignored)."""
    buf = bytes(data)
    pos = 0
    size = len(buf)
    while pos + record_batch.LOG_OVERHEAD <= size:
        _base_offset, length = record_batch.read_base_offset_and_length(buf, pos)
        end = pos + record_batch.LOG_OVERHEAD + length
        if end > size or size - pos <= record_batch.MAGIC_OFFSET:
            return  # partial batch at the end of a fetch response
        magic = buf[pos + record_batch.MAGIC_OFFSET]
        if magic == record_batch.CURRENT_MAGIC:
            yield _decode_v2(topic, partition, buf, record_batch.read_header(buf, pos), check_crcs)
        elif magic in (0, 1):
            yield from _decode_legacy(topic, partition, buf[pos:end])
        else:
            raise CorruptRecordException(f"unknown record batch magic {magic}")
        pos = end


def _decode_v2(
    topic: str, partition: int, buf: bytes, header: record_batch.BatchHeader, check_crcs: bool
) -> RecordBatchInfo:
    base_offset = header.base_offset
    info = RecordBatchInfo(
        base_offset, header.last_offset, header.producer_id, header.is_transactional,
        header.is_control,
    )  # fmt: skip
    try:
        records = batch_records(buf, header, check_crcs)
    except InvalidBatch as exc:  # the client's own exception, for the application
        raise CorruptRecordException(f"{topic}-{partition}: {exc}") from exc
    if info.is_control:
        kind = control_type(records[0]) if records else None
        if kind is not None:
            info.control_type = kind
        return info
    log_append_time = header.timestamp_type is record_batch.TimestampType.LOG_APPEND_TIME
    ts_type = TIMESTAMP_LOG_APPEND_TIME if log_append_time else TIMESTAMP_CREATE_TIME
    base_ts = header.base_timestamp
    max_ts = header.max_timestamp
    epoch = header.partition_leader_epoch
    info.records = [
        ConsumerRecord(
            topic,
            partition,
            base_offset + r.offset_delta,
            max_ts if log_append_time else base_ts + r.timestamp_delta,
            ts_type,
            r.key,
            r.value,
            r.headers,
            epoch,
        )
        for r in records
    ]
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
        inner = decompress(codec, value)
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


class _BatchSelection:
    """Which batches a consumer returns records of, as Kafka's Fetcher chooses: never
    control batches; under read_committed, not the batches of transactions the answer
    lists as aborted (``aborted``: (producer id, first offset) pairs), from their first
    offset up to the producer's abort marker."""

    def __init__(self, aborted: Iterable[tuple[int, int]], read_committed: bool) -> None:
        self.read_committed = read_committed
        self._pending = sorted(aborted, key=lambda a: a[1])
        self._next = 0
        self._aborting: set[int] = set()

    def keeps(
        self, last_offset: int, producer_id: int, is_control: bool, is_transactional: bool,
        control_type: int | None,
    ) -> bool:  # fmt: skip
        """Whether the batch's records are returned; ``control_type``: a control batch's
        marker type (needed only under read_committed)."""
        if not self.read_committed:
            return not is_control
        pending = self._pending
        while self._next < len(pending) and pending[self._next][1] <= last_offset:
            self._aborting.add(pending[self._next][0])
            self._next += 1
        if is_control:
            if control_type == 0:  # an abort marker ends the producer's aborted run
                self._aborting.discard(producer_id)
            return False
        return not (is_transactional and producer_id in self._aborting)


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
    selection = _BatchSelection(aborted, read_committed)
    for batch in iter_batches(topic, partition, data, check_crcs):
        next_offset = max(next_offset, batch.last_offset + 1)
        if not selection.keeps(batch.last_offset, batch.producer_id, batch.is_control,
                               batch.is_transactional, batch.control_type):  # fmt: skip
            continue
        for record in batch.records:
            if record.offset >= fetch_offset:
                out.append(record)
    return out, next_offset


def next_fetch_offset(data: Any, fetch_offset: int) -> int:
    """The offset to fetch after ``data``: past its last complete batch (of any magic),
    or ``fetch_offset`` when it holds none; no record is decoded."""
    buf = memoryview(data)
    size = len(buf)
    pos = 0
    next_offset = fetch_offset
    while pos + record_batch.LOG_OVERHEAD <= size:
        base_offset, length = record_batch.read_base_offset_and_length(buf, pos)
        end = pos + record_batch.LOG_OVERHEAD + length
        if end > size or size - pos <= record_batch.MAGIC_OFFSET:
            break
        if buf[pos + record_batch.MAGIC_OFFSET] == record_batch.CURRENT_MAGIC:
            next_offset = max(next_offset, record_batch.read_header(buf, pos).next_offset)
        else:  # a legacy message's offset is its (wrapper's) last
            next_offset = max(next_offset, base_offset + 1)
        pos = end
    return next_offset


def decode_columns(
    topic: str,
    partition: int,
    data: Any,
    fetch_offset: int,
    aborted: Iterable[tuple[int, int]] = (),
    read_committed: bool = False,
    check_crcs: bool = True,
) -> tuple[RecordColumns, int]:
    """:func:`decode_records` into columns: the same records (same batch selection,
    read_committed filtering and fetch-offset cut), decoded in bulk by
    :mod:`sluice.protocol.records.columnar`. Legacy (v0/v1) message sets are decoded
    one by one and converted."""
    from sluice.protocol.records.columnar import RecordColumns, read_columns

    buf = memoryview(data)
    size = len(buf)
    pos = 0
    next_offset = fetch_offset
    selection = _BatchSelection(aborted, read_committed)
    selected: list[record_batch.BatchHeader] = []
    while pos + record_batch.LOG_OVERHEAD <= size:
        _base_offset, length = record_batch.read_base_offset_and_length(buf, pos)
        end = pos + record_batch.LOG_OVERHEAD + length
        if end > size or size - pos <= record_batch.MAGIC_OFFSET:
            break
        magic = buf[pos + record_batch.MAGIC_OFFSET]
        if magic != record_batch.CURRENT_MAGIC:
            if magic not in (0, 1):
                raise CorruptRecordException(f"unknown record batch magic {magic}")
            records, next_offset = decode_records(
                topic, partition, data, fetch_offset, aborted, read_committed, check_crcs
            )
            return RecordColumns.from_records(records), next_offset
        header = record_batch.read_header(buf, pos)
        pos = end
        next_offset = max(next_offset, header.next_offset)
        marker = (
            _control_type(topic, partition, buf, header, check_crcs)
            if header.is_control and read_committed
            else None
        )
        if not selection.keeps(
            header.last_offset, header.producer_id, header.is_control, header.is_transactional,
            marker,
        ):  # fmt: skip
            continue
        if header.last_offset >= fetch_offset:
            selected.append(header)
    try:
        columns = read_columns(buf, selected, check_crcs)
    except InvalidBatch as exc:  # the client's own exception, for the application
        raise CorruptRecordException(f"{topic}-{partition}: {exc}") from exc
    return columns.from_offset(fetch_offset), next_offset


def _control_type(
    topic: str, partition: int, buf: memoryview, header: record_batch.BatchHeader, check: bool
) -> int:
    try:
        records = batch_records(buf, header, check)
    except InvalidBatch as exc:
        raise CorruptRecordException(f"{topic}-{partition}: {exc}") from exc
    kind = control_type(records[0]) if records else None
    return -1 if kind is None else kind
