"""The records of ``__transaction_state``: Kafka's ``TransactionLogKey`` (version 0:
transactional id) and ``TransactionLogValue`` (version 0: producer id and epoch, timeout,
state, partitions, timestamps), plus the control batch of a transaction marker."""

from __future__ import annotations

import struct

from sluice.base import TopicPartition
from sluice.coordinator.group.records import RecordError
from sluice.coordinator.transaction.metadata import TransactionMetadata, TransactionState
from sluice.protocol.records.builder import build_batch
from sluice.protocol.records.reader import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT

__all__ = [
    "MAX_TRANSACTIONAL_ID_BYTES",
    "build_marker_batch",
    "read_txn_key",
    "read_txn_value",
    "txn_key",
    "txn_value",
]


MAX_TRANSACTIONAL_ID_BYTES = 2**15 - 1
"""The longest transactional id a record key holds (an int16-length string)."""


def _string(out: bytearray, value: str) -> None:
    raw = value.encode()
    out += struct.pack(">h", len(raw)) + raw


def txn_key(transactional_id: str) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    _string(out, transactional_id)
    return bytes(out)


def read_txn_key(data: bytes) -> str:
    try:
        version, length = struct.unpack_from(">hh", data)
        if version != 0 or length < 0 or 4 + length > len(data):
            raise RecordError(f"bad transaction log key (version {version})")
        return data[4 : 4 + length].decode()
    except (struct.error, UnicodeDecodeError) as exc:
        raise RecordError(f"bad transaction log key: {exc}") from exc


def txn_value(meta: TransactionMetadata) -> bytes:
    """Version 0 of Kafka's TransactionLogValue; partitions grouped by topic."""
    out = bytearray(
        struct.pack(
            ">hqhib",
            0,
            meta.producer_id,
            meta.producer_epoch,
            meta.txn_timeout_ms,
            meta.state.id,
        )
    )
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(meta.topic_partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out += struct.pack(">i", len(by_topic))
    for topic, partitions in by_topic.items():
        _string(out, topic)
        out += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    out += struct.pack(">qq", meta.txn_last_update_timestamp, meta.txn_start_timestamp)
    return bytes(out)


def read_txn_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    try:
        version, pid, epoch, timeout, state_id = struct.unpack_from(">hqhib", data)
        if version != 0:
            raise RecordError(f"unsupported transaction log value version {version}")
        pos = 17
        (topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        partitions: set[TopicPartition] = set()
        for _ in range(topics):
            (length,) = struct.unpack_from(">h", data, pos)
            topic = data[pos + 2 : pos + 2 + length].decode()
            pos += 2 + length
            (count,) = struct.unpack_from(">i", data, pos)
            ids = struct.unpack_from(f">{count}i", data, pos + 4)
            pos += 4 + 4 * count
            partitions.update(TopicPartition(topic, p) for p in ids)
        last_update, start = struct.unpack_from(">qq", data, pos)
        state = TransactionState.from_id(state_id)
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise RecordError(f"bad transaction log value: {exc}") from exc
    return TransactionMetadata(
        transactional_id, pid, epoch, timeout, state, partitions, start, last_update
    )


def build_marker_batch(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    """A transaction marker: a control batch whose one record has the key (version 0,
    COMMIT or ABORT) and the value (version 0, coordinator epoch)."""
    control_type = CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT
    marker = (struct.pack(">hh", 0, control_type), struct.pack(">hi", 0, coordinator_epoch))
    return build_batch(
        [marker],
        timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )
