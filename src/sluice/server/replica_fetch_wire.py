"""The replica fetcher's hand-written Fetch v11 envelope: request encoder, response decoder.

A measured fast path (see docs/performance.md): the follower sends one Fetch per round
trip and the leader's answer carries the replicated batches. kio's general codec builds
a dataclass per field and copies every ``records`` field out of the frame; here the
request is packed with ``struct`` and the response is walked once, each partition's
records a ``memoryview`` into the frame. tests/server/test_replica_fetch_wire.py checks
both against kio byte for byte (property tests).

Fetch v11 is the newest non-flexible version (no tagged fields, no topic ids): the one
Kafka's inter.broker.protocol.version 2.3+ followers use, and what the fetcher sent
through kio before.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from sluice.protocol import MalformedRequestError

__all__ = [
    "FETCH_VERSION",
    "FetchPartitionRequest",
    "FetchedPartition",
    "decode_fetch_response",
    "encode_fetch_request",
]

FETCH_API_KEY, FETCH_VERSION = 1, 11

_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
_REQUEST = struct.Struct(">iiiibii")  # replica, max wait, min/max bytes, isolation, session
_PARTITION = struct.Struct(">iiqqi")  # partition, leader epoch, fetch offset, log start, max
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_RESPONSE_HEAD = struct.Struct(">iihi")  # correlation id, throttle, error, session id
_PARTITION_HEAD = struct.Struct(">ihqqq")  # index, error, HW, LSO, log start offset
_ABORTED_TXN_SIZE = 16  # producer id, first offset


class FetchPartitionRequest(NamedTuple):
    """One partition of a follower's fetch."""

    partition: int
    current_leader_epoch: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int


class FetchedPartition(NamedTuple):
    """One partition of a Fetch v11 response; ``records`` is a view into the frame."""

    topic: str
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview | None


def _string(value: str) -> bytes:
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def encode_fetch_request(
    correlation_id: int,
    client_id: str,
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    topics: Sequence[tuple[str, Sequence[FetchPartitionRequest]]],
) -> bytes:
    """A framed, session-less Fetch v11 request (read_uncommitted, no rack, nothing
    forgotten): what kio's writer produces for the same values."""
    parts = [
        _HEADER.pack(FETCH_API_KEY, FETCH_VERSION, correlation_id),
        _string(client_id),
        _REQUEST.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0, 0, -1),
        _I32.pack(len(topics)),
    ]
    for topic, partitions in topics:
        parts.append(_string(topic))
        parts.append(_I32.pack(len(partitions)))
        parts.extend(_PARTITION.pack(*p) for p in partitions)
    parts.append(_I32.pack(0))  # forgotten_topics_data
    parts.append(_I16.pack(0))  # rack_id ""
    payload = b"".join(parts)
    return _I32.pack(len(payload)) + payload


class _Cursor:
    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: memoryview, pos: int) -> None:
        self.buf, self.pos, self.end = buf, pos, len(buf)

    def need(self, size: int) -> int:
        pos = self.pos
        if size < 0 or pos + size > self.end:
            raise MalformedRequestError(
                f"Fetch response truncated: {size} bytes wanted at {pos} of {self.end}"
            )
        self.pos = pos + size
        return pos

    def i32(self) -> int:
        return int(_I32.unpack_from(self.buf, self.need(4))[0])

    def string(self) -> str:
        (n,) = _I16.unpack_from(self.buf, self.need(2))
        if n < 0:
            raise MalformedRequestError("null topic name in a Fetch response")
        start = self.need(n)
        return bytes(self.buf[start : start + n]).decode()


def decode_fetch_response(
    frame: memoryview | bytes | bytearray,
) -> tuple[int, int, list[FetchedPartition]]:
    """(correlation id, top-level error code, partitions) of a Fetch v11 response frame
    (without its size prefix). The records views share the frame's buffer.

    :raises MalformedRequestError: if the frame is truncated or has bytes left over.
    """
    cur = _Cursor(memoryview(frame), 0)
    correlation_id, _throttle, error_code, _session = _RESPONSE_HEAD.unpack_from(
        cur.buf, cur.need(_RESPONSE_HEAD.size)
    )
    out: list[FetchedPartition] = []
    for _ in range(cur.i32()):
        topic = cur.string()
        for _ in range(cur.i32()):
            index, error, hw, lso, log_start = _PARTITION_HEAD.unpack_from(
                cur.buf, cur.need(_PARTITION_HEAD.size)
            )
            aborted = cur.i32()
            if aborted > 0:
                cur.need(aborted * _ABORTED_TXN_SIZE)
            cur.need(4)  # preferred_read_replica
            size = cur.i32()
            records = None
            if size >= 0:
                start = cur.need(size)
                records = cur.buf[start : start + size]
            out.append(FetchedPartition(topic, index, error, hw, lso, log_start, records))
    if cur.pos != cur.end:
        raise MalformedRequestError(f"{cur.end - cur.pos} bytes left after a Fetch response")
    return int(correlation_id), int(error_code), out
