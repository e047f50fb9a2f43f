"""The Produce request and response, hand-written for the producer's hot path.

The request body is returned as a list of buffers, so each record batch goes to
the socket straight from its BufferPool buffer (kio's writer would copy it into
a new ``bytes``). The response parser reads only what the Sender needs into
plain tuples. Both cover Produce v3-v11 (v9+ flexible) and are checked against
kio's generated codec in ``tests/client/test_client_produce_request.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from sluice.base import TopicPartition
from sluice.protocol._wire import BytesLike
from sluice.protocol.errors import ErrorCode, MalformedRequestError
from sluice.protocol.headers import skip_tagged_fields
from sluice.protocol.records.varint import encode_uvarint, read_uvarint

__all__ = [
    "PartitionResponse",
    "ProduceResponseData",
    "decode_produce_response",
    "encode_produce_request",
]

_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_ACKS_TIMEOUT: Final = struct.Struct(">hi")
_FIRST_FLEXIBLE: Final = 9
_NO_TAGS: Final = b"\x00"


class PartitionResponse(NamedTuple):
    """One partition's outcome (Kafka's ``ProduceResponse.PartitionResponse``)."""

    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple[tuple[int, str | None], ...] = ()


class ProduceResponseData(NamedTuple):
    responses: dict[TopicPartition, PartitionResponse]
    throttle_time_ms: int


def encode_produce_request(
    version: int,
    acks: int,
    timeout_ms: int,
    topic_data: Mapping[str, Sequence[tuple[int, BytesLike]]],
    transactional_id: str | None = None,
) -> list[BytesLike]:
    """The body of a Produce request (no header) as buffers; batches are not copied."""
    if not 3 <= version <= 11:
        raise ValueError(f"Produce v{version} is not supported (v3-v11)")
    flexible = version >= _FIRST_FLEXIBLE
    out: list[BytesLike] = []
    head = bytearray()
    if transactional_id is None:
        head += encode_uvarint(0) if flexible else _INT16.pack(-1)
    else:
        raw = transactional_id.encode()
        head += encode_uvarint(len(raw) + 1) if flexible else _INT16.pack(len(raw))
        head += raw
    head += _ACKS_TIMEOUT.pack(acks, timeout_ms)
    head += encode_uvarint(len(topic_data) + 1) if flexible else _INT32.pack(len(topic_data))
    for topic, partitions in topic_data.items():
        name = topic.encode()
        head += encode_uvarint(len(name) + 1) if flexible else _INT16.pack(len(name))
        head += name
        head += encode_uvarint(len(partitions) + 1) if flexible else _INT32.pack(len(partitions))
        for index, records in partitions:
            head += _INT32.pack(index)
            size = len(records)
            head += encode_uvarint(size + 1) if flexible else _INT32.pack(size)
            out.append(bytes(head))
            out.append(records)
            head = bytearray(_NO_TAGS) if flexible else bytearray()
        if flexible:
            head += _NO_TAGS
    if flexible:
        head += _NO_TAGS
    if head:
        out.append(bytes(head))
    return out


class _Reader:
    """A cursor over a response frame with Kafka's primitive readers."""

    __slots__ = ("buf", "end", "flexible", "pos")

    def __init__(self, buf: BytesLike, pos: int, flexible: bool) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.flexible = flexible

    def _take(self, fmt: struct.Struct) -> Any:
        if self.pos + fmt.size > self.end:
            raise MalformedRequestError("Produce response truncated")
        (value,) = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return value

    def int16(self) -> int:
        return int(self._take(_INT16))

    def int32(self) -> int:
        return int(self._take(_INT32))

    def int64(self) -> int:
        return int(self._take(_INT64))

    def array_length(self) -> int:
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos, self.end)
            n -= 1
        else:
            n = self.int32()
        if n > self.end - self.pos:
            raise MalformedRequestError(f"array of {n} cannot fit in the response")
        return n

    def string(self) -> str | None:
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos, self.end)
            n -= 1
        else:
            n = self.int16()
        if n < 0:
            return None
        if self.pos + n > self.end:
            raise MalformedRequestError("Produce response truncated in a string")
        value = bytes(self.buf[self.pos : self.pos + n]).decode("utf-8", "replace")
        self.pos += n
        return value

    def tags(self) -> None:
        if self.flexible:
            self.pos = skip_tagged_fields(self.buf, self.pos, self.end)


def decode_produce_response(frame: BytesLike, version: int) -> ProduceResponseData:
    """Parse a Produce response frame (header included, size prefix not).

    :raises MalformedRequestError: the frame is truncated or malformed.
    """
    flexible = version >= _FIRST_FLEXIBLE
    r = _Reader(frame, 4, flexible)
    r.tags()  # response header v1
    responses: dict[TopicPartition, PartitionResponse] = {}
    for _ in range(r.array_length()):
        topic = r.string() or ""
        for _ in range(r.array_length()):
            index = r.int32()
            error = r.int16()
            base_offset = r.int64()
            log_append_time = r.int64()
            log_start_offset = r.int64() if version >= 5 else -1
            record_errors: list[tuple[int, str | None]] = []
            message = None
            if version >= 8:
                for _ in range(r.array_length()):
                    batch_index = r.int32()
                    record_errors.append((batch_index, r.string()))
                    r.tags()
                message = r.string()
            r.tags()
            try:
                code = ErrorCode(error)
            except ValueError:
                code = ErrorCode.unknown_server_error
            responses[TopicPartition(topic, index)] = PartitionResponse(
                code, base_offset, log_append_time, log_start_offset, message,
                tuple(record_errors),
            )  # fmt: skip
        r.tags()
    throttle = r.int32()
    r.tags()
    if r.pos != r.end:
        raise MalformedRequestError(f"{r.end - r.pos} bytes left after the Produce response")
    return ProduceResponseData(responses, throttle)
