"""Hand-written encoder for Fetch responses (v4-v18) that does not copy record batches.

kio's writer is generic: a ``struct.pack`` and a ``BytesIO.write`` per field, a
temporary ``BytesIO`` per flexible struct, and every record batch copied into the
output (then copied again by ``getvalue``). A Fetch response is mostly record
batches, so this encoder packs the envelope fields in a few ``struct`` calls and
emits each batch of at least :data:`INLINE_RECORDS_MAX` bytes as its own segment,
referenced rather than copied. Records may be any bytes-like object (``bytes``,
``memoryview``, an ``mmap`` slice), though kio's dataclass is annotated ``bytes``.

The output is byte-for-byte what kio's writer produces (tests check it across all
versions with generated responses), including the rule that tagged fields holding
their default value are omitted.
"""

from __future__ import annotations

import struct
from typing import Any, Final, Protocol, runtime_checkable

from kio.static.protocol import ResponsePayload

from ._wire import INT16, INT32, BytesLike
from .headers import encode_response_header
from .records.varint import encode_uvarint

__all__ = [
    "INLINE_RECORDS_MAX",
    "FileRegion",
    "encode_fetch_response",
    "is_file_region",
    "segment_size",
]

INLINE_RECORDS_MAX: Final = 4096
"""Record batches smaller than this are copied inline; larger ones become segments."""


@runtime_checkable
class FileRegion(Protocol):
    """A byte range of an open file that the network layer sends with ``sendfile``
    (the log's ``FileSlice``); ``read`` copies it instead."""

    position: int
    size: int

    def fileno(self) -> int: ...

    def read(self) -> bytes: ...


_BUFFER_TYPES: Final = frozenset({bytes, bytearray, memoryview})
_region_types: dict[type, bool] = {}


def is_file_region(segment: Any) -> bool:
    """``isinstance(segment, FileRegion)``, answered once per type: a runtime-checkable
    Protocol check inspects every attribute on each call (~10 us, several per Fetch)."""
    kind = type(segment)
    if kind in _BUFFER_TYPES:
        return False
    known = _region_types.get(kind)
    if known is None:
        known = _region_types[kind] = isinstance(segment, FileRegion)
    return known


def segment_size(segment: Any) -> int:
    """The size in bytes of a response segment: a buffer or a :class:`FileRegion`."""
    return segment.size if is_file_region(segment) else memoryview(segment).nbytes


_ZERO_UUID: Final = bytes(16)
_PARTITION: Final = struct.Struct(">ihqq")  # index, error_code, high_watermark, LSO
_INT64: Final = struct.Struct(">q")
_ABORTED: Final = struct.Struct(">qq")  # producer_id, first_offset
_TOP_V7: Final = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_EPOCH_END: Final = struct.Struct(">iqB")  # EpochEndOffset: epoch, end_offset, no tags
_LEADER: Final = struct.Struct(">iiB")  # LeaderIdAndEpoch: leader_id, leader_epoch
_SNAPSHOT: Final = struct.Struct(">qiB")  # SnapshotId: end_offset, epoch
_NULL_LEGACY_ARRAY: Final = INT32.pack(-1)


def _millis(value: Any) -> int:
    if not value:  # timedelta(0), the usual throttle time
        return 0
    return round(float(value.total_seconds()) * 1000)


def _string(out: bytearray, value: str, flexible: bool) -> None:
    raw = value.encode()
    if flexible:
        out += encode_uvarint(len(raw) + 1)
    else:
        if len(raw) > 0x7FFF:
            raise ValueError(f"string of {len(raw)} bytes is too long for int16 length")
        out += INT16.pack(len(raw))
    out += raw


def _count(out: bytearray, count: int, flexible: bool) -> None:
    out += encode_uvarint(count + 1) if flexible else INT32.pack(count)


def _partition_tags(out: bytearray, partition: Any) -> None:
    tags: list[bytes] = []
    diverging = partition.diverging_epoch
    if diverging.epoch != -1 or diverging.end_offset != -1:
        tags.append(b"\x00" + _tagged(_EPOCH_END.pack(diverging.epoch, diverging.end_offset, 0)))
    leader = partition.current_leader
    if leader.leader_id != -1 or leader.leader_epoch != -1:
        tags.append(b"\x01" + _tagged(_LEADER.pack(leader.leader_id, leader.leader_epoch, 0)))
    snapshot = partition.snapshot_id
    if snapshot.end_offset != -1 or snapshot.epoch != -1:
        tags.append(b"\x02" + _tagged(_SNAPSHOT.pack(snapshot.end_offset, snapshot.epoch, 0)))
    out += encode_uvarint(len(tags))
    for tag in tags:
        out += tag


def _tagged(value: bytes) -> bytes:
    return encode_uvarint(len(value)) + value


def _node_endpoints(endpoints: Any) -> bytes:
    out = bytearray()
    _count(out, len(endpoints), True)
    for node in endpoints:
        out += INT32.pack(node.node_id)
        _string(out, node.host, True)
        out += INT32.pack(node.port)
        if node.rack is None:
            out += b"\x00"
        else:
            _string(out, node.rack, True)
        out += b"\x00"
    return bytes(out)


def encode_fetch_response(correlation_id: int, response: ResponsePayload) -> list[BytesLike]:
    """Encode a kio FetchResponse (v4-v18), framed, as a list of buffers.

    The first buffer holds the size prefix and header; record batches of at least
    :data:`INLINE_RECORDS_MAX` bytes are returned as they were given.
    """
    r: Any = response
    version = int(r.__version__)
    if r.__api_key__ != 1 or not 4 <= version <= 18:
        raise ValueError(f"not a FetchResponse v4-v18: {type(r).__qualname__} v{version}")
    flexible = version >= 12
    segments: list[BytesLike] = []
    out = bytearray(_NULL_LEGACY_ARRAY)  # placeholder for the size prefix
    out += encode_response_header(correlation_id, 1 if flexible else 0)
    if version >= 7:
        out += _TOP_V7.pack(_millis(r.throttle_time), r.error_code, r.session_id)
    else:
        out += INT32.pack(_millis(r.throttle_time))
    _count(out, len(r.responses), flexible)
    for topic in r.responses:
        if version >= 13:
            out += _ZERO_UUID if topic.topic_id is None else topic.topic_id.bytes
        else:
            _string(out, topic.topic, flexible)
        _count(out, len(topic.partitions), flexible)
        for p in topic.partitions:
            out += _PARTITION.pack(
                p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
            )
            if version >= 5:
                out += _INT64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                out += b"\x00" if flexible else _NULL_LEGACY_ARRAY
            else:
                _count(out, len(aborted), flexible)
                for txn in aborted:
                    out += _ABORTED.pack(txn.producer_id, txn.first_offset)
                    if flexible:
                        out += b"\x00"
            if version >= 11:
                out += INT32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                out += b"\x00" if flexible else _NULL_LEGACY_ARRAY
            else:
                region = is_file_region(records)
                size = records.size if region else memoryview(records).nbytes
                out += encode_uvarint(size + 1) if flexible else INT32.pack(size)
                if size < INLINE_RECORDS_MAX:
                    out += records.read() if region else records
                else:
                    segments.append(out)
                    segments.append(records)
                    out = bytearray()
            if flexible:
                _partition_tags(out, p)
        if flexible:
            out += b"\x00"
    if flexible:
        if version >= 16 and r.node_endpoints:
            endpoints = _node_endpoints(r.node_endpoints)
            out += b"\x01\x00" + _tagged(endpoints)
        else:
            out += b"\x00"
    segments.append(out)
    first = segments[0]
    assert isinstance(first, bytearray)
    total = sum(segment_size(segment) for segment in segments) - INT32.size
    INT32.pack_into(first, 0, total)
    return segments
