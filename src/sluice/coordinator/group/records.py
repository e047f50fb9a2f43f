"""Kafka's own records for ``__consumer_offsets``, in magic-v2 record batches.

Keys and values are Kafka's ``OffsetCommitKey`` (versions 0-1: group, topic,
partition), ``GroupMetadataKey`` (version 2: group), ``OffsetCommitValue``
(versions 0-3; Sluice writes v1 when the commit carries an expire timestamp,
else v3, as Kafka 2.1+ does) and ``GroupMetadataValue`` (versions 0-3; written
as v3). Each is a version int16 followed by the struct in Kafka's classic
(non-flexible) encoding. A null value is a tombstone. Batches are built and
read with the record-batch format's builder and reader (:mod:`sluice.protocol.records`).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator

from sluice.coordinator.group.offsets import OffsetAndMetadata
from sluice.protocol.records import batch as record_batch
from sluice.protocol.records.builder import build_batch as build_record_batch
from sluice.protocol.records.errors import CorruptRecordException
from sluice.protocol.records.reader import CONTROL_TYPE_COMMIT, batch_records, control_type

__all__ = [
    "MAX_STRING_BYTES",
    "BatchEntry",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberRecord",
    "OffsetCommitKey",
    "RecordError",
    "build_batch",
    "group_metadata_key",
    "group_metadata_value",
    "offset_commit_key",
    "offset_commit_value",
    "read_batch_entries",
    "read_batches",
    "read_group_metadata_value",
    "read_key",
    "read_offset_commit_value",
    "read_subscription_topics",
]


class RecordError(ValueError):
    """An internal record that cannot be decoded."""


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """The key of a committed offset: group, topic and partition."""

    group: str
    topic: str
    partition: int


@dataclasses.dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """The key of a group's metadata record."""

    group: str


@dataclasses.dataclass(frozen=True, slots=True)
class MemberRecord:
    """One member in a ``GroupMetadataValue``."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A group's generation, protocol, leader and members, as Kafka persists it."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberRecord, ...]


# -- classic encoding ----------------------------------------------------------------------
MAX_STRING_BYTES = 2**15 - 1
"""The longest string a record holds (int16 length): group ids and member ids must fit."""


class _Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def int16(self, v: int) -> _Writer:
        self.buf += struct.pack(">h", v)
        return self

    def int32(self, v: int) -> _Writer:
        self.buf += struct.pack(">i", v)
        return self

    def int64(self, v: int) -> _Writer:
        self.buf += struct.pack(">q", v)
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.int16(-1)
        raw = v.encode()
        self.int16(len(raw))
        self.buf += raw
        return self

    def bytes_(self, v: bytes | None) -> _Writer:
        if v is None:
            return self.int32(-1)
        self.int32(len(v))
        self.buf += v
        return self


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: str, size: int) -> int:
        if self.pos + size > len(self.data):
            raise RecordError("record is truncated")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(value)

    def int16(self) -> int:
        return self._take(">h", 2)

    def int32(self) -> int:
        return self._take(">i", 4)

    def int64(self) -> int:
        return self._take(">q", 8)

    def _raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordError("record is truncated")
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        return raw

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n == -1 else self._raw(n).decode()

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise RecordError("null where a string is required")
        return value

    def bytes_(self) -> bytes:
        n = self.int32()
        return b"" if n == -1 else self._raw(n)


# -- keys and values --------------------------------------------------------------------
def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(_Writer().int16(1).string(group).string(topic).int32(partition).buf)


def group_metadata_key(group: str) -> bytes:
    return bytes(_Writer().int16(2).string(group).buf)


def read_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The decoded key, or None for key versions Sluice does not know (newer protocols)."""
    r = _Reader(data)
    version = r.int16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupMetadataKey(r.string())
    return None


def offset_commit_value(value: OffsetAndMetadata) -> bytes:
    w = _Writer()
    if value.expire_timestamp is not None:
        w.int16(1).int64(value.offset).string(value.metadata)
        return bytes(w.int64(value.commit_timestamp).int64(value.expire_timestamp).buf)
    epoch = -1 if value.leader_epoch is None else value.leader_epoch
    w.int16(3).int64(value.offset).int32(epoch).string(value.metadata)
    return bytes(w.int64(value.commit_timestamp).buf)


def read_offset_commit_value(data: bytes) -> OffsetAndMetadata:
    r = _Reader(data)
    version = r.int16()
    if not 0 <= version <= 3:
        raise RecordError(f"unknown OffsetCommitValue version {version}")
    offset = r.int64()
    epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire = r.int64() if version == 1 else -1
    return OffsetAndMetadata(
        offset,
        None if epoch < 0 else epoch,
        metadata,
        commit_timestamp,
        None if expire < 0 else expire,
    )


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = _Writer().int16(3).string(value.protocol_type).int32(value.generation)
    w.string(value.protocol).string(value.leader).int64(value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
        w.string(m.client_host).int32(m.rebalance_timeout).int32(m.session_timeout)
        w.bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.buf)


def read_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
    version = r.int16()
    if not 0 <= version <= 3:
        raise RecordError(f"unknown GroupMetadataValue version {version}")
    protocol_type, generation = r.string(), r.int32()
    protocol, leader = r.nullable_string(), r.nullable_string()
    timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.int32()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id, client_host = r.string(), r.string()
        session_timeout = rebalance_timeout = -1
        if version >= 1:
            rebalance_timeout = r.int32()
        session_timeout = r.int32()
        if version == 0:
            rebalance_timeout = session_timeout
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                r.bytes_(),
                r.bytes_(),
            )
        )
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, timestamp, tuple(members)
    )


def read_subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a ``ConsumerProtocolSubscription`` (any version: topics come first)."""
    r = _Reader(metadata)
    r.int16()
    count = r.int32()
    if count < 0 or count > len(metadata):
        raise RecordError("bad topic count in subscription")
    return [r.string() for _ in range(count)]


# -- batches ----------------------------------------------------------------------------
def build_batch(
    records: list[tuple[bytes, bytes | None]],
    timestamp_ms: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> bytes:
    """An uncompressed magic-v2 batch of (key, value) records; the log assigns offsets.
    With a producer id it is a transactional batch (TxnOffsetCommit)."""
    return build_record_batch(
        records,
        timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=producer_id >= 0,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class BatchEntry:
    """A batch of an internal topic with what transactions need: its producer id, whether
    it is transactional, and for a marker whether it commits."""

    base_offset: int
    next_offset: int
    producer_id: int
    is_transactional: bool
    is_control: bool
    commits: bool
    records: list[tuple[bytes | None, bytes | None]]


def read_batch_entries(data: bytes) -> Iterator[BatchEntry]:
    """Every whole batch in ``data`` with its records as (key, value) pairs; a control
    batch has no records, a partial batch at the end is left out, a compressed or
    undecodable one raises :class:`RecordError`."""
    for header in record_batch.iter_batches(data):
        if header.compression_type:
            raise RecordError(
                f"compressed batch at offset {header.base_offset} in an internal topic"
            )
        try:
            records = batch_records(data, header)
        except CorruptRecordException as exc:
            raise RecordError(f"bad batch at offset {header.base_offset}: {exc}") from exc
        commits = False
        pairs: list[tuple[bytes | None, bytes | None]] = []
        if header.is_control:
            commits = bool(records) and control_type(records[0]) == CONTROL_TYPE_COMMIT
        else:
            pairs = [(r.key, r.value) for r in records]
        yield BatchEntry(
            header.base_offset, header.next_offset, header.producer_id,
            header.is_transactional, header.is_control, commits, pairs,
        )  # fmt: skip


def read_batches(data: bytes) -> Iterator[tuple[int, int, list[tuple[bytes | None, bytes | None]]]]:
    """(base offset, next offset, [(key, value), ...]) per whole batch in ``data``, as
    :func:`read_batch_entries` reads them."""
    for entry in read_batch_entries(data):
        yield entry.base_offset, entry.next_offset, entry.records
