"""A hand-written decoder for the Produce request envelope, the broker's hottest request.

kio's general reader copies every partition's ``records`` into a new ``bytes`` (one
full copy of everything produced) and :mod:`sluice.protocol.guard` walks the body once
more before it. This decoder reads the few envelope fields itself and leaves each
partition's records as a read-only view of the request frame, building the same kio
dataclasses the general path builds, so handlers cannot tell the two apart.

It is deliberately narrow: any deviation from the common shape (a length that overruns
the frame, a negative or absurd count, a tagged field, invalid UTF-8, a non-empty
request tail) returns None and the caller falls back to the general codec, which then
gives the exact error (or result) it always gave. ``tests/protocol`` checks, on
random requests and random corruptions of them, that whatever this decoder accepts
the general codec decodes to an equal request.
"""

from __future__ import annotations

import datetime
import struct
import sys
from typing import Any

from .apis import ApiKey, request_type
from .errors import MalformedRequestError
from .records.varint import read_uvarint

__all__ = ["decode_produce_request"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I16_I32 = struct.Struct(">hi")

_CLASSES: dict[int, tuple[Any, Any, Any]] = {}


def _classes(version: int) -> tuple[Any, Any, Any]:
    """(ProduceRequest, TopicProduceData, PartitionProduceData) of kio for ``version``."""
    found = _CLASSES.get(version)
    if found is None:
        request_cls = request_type(ApiKey.PRODUCE, version)
        module = sys.modules[request_cls.__module__]
        found = (request_cls, module.TopicProduceData, module.PartitionProduceData)
        _CLASSES[version] = found
    return found


class _Unusual(Exception):
    """The request is not of the common shape: let the general codec decide."""


def _count(value: int, pos: int, end: int) -> int:
    if value < 0 or value > end - pos:  # each element takes at least one byte
        raise _Unusual
    return value


def _decode_legacy(buf: memoryview, pos: int, end: int, version: int) -> Any:
    request_cls, topic_cls, partition_cls = _classes(version)
    if end - pos < 2:
        raise _Unusual
    (length,) = _I16.unpack_from(buf, pos)
    pos += 2
    transactional_id = None
    if length >= 0:
        if length > end - pos:
            raise _Unusual
        transactional_id = str(buf[pos : pos + length], "utf-8")
        pos += length
    elif length != -1:
        raise _Unusual
    if end - pos < 10:
        raise _Unusual
    acks, timeout_ms = _I16_I32.unpack_from(buf, pos)
    pos += 6
    (topic_count,) = _I32.unpack_from(buf, pos)
    pos += 4
    topics = []
    for _ in range(_count(topic_count, pos, end)):
        if end - pos < 2:
            raise _Unusual
        (length,) = _I16.unpack_from(buf, pos)
        pos += 2
        if length < 0 or length > end - pos:
            raise _Unusual
        name = str(buf[pos : pos + length], "utf-8")
        pos += length
        if end - pos < 4:
            raise _Unusual
        (partition_count,) = _I32.unpack_from(buf, pos)
        pos += 4
        partitions = []
        for _ in range(_count(partition_count, pos, end)):
            if end - pos < 8:
                raise _Unusual
            index, size = struct.unpack_from(">ii", buf, pos)
            pos += 8
            if size < 0:
                if size != -1:
                    raise _Unusual
                records = None
            else:
                if size > end - pos:
                    raise _Unusual
                records = buf[pos : pos + size]
                pos += size
            partitions.append(partition_cls(index=index, records=records))
        topics.append(topic_cls(name=name, partition_data=tuple(partitions)))
    if pos != end:
        raise _Unusual
    return _request(request_cls, transactional_id, acks, timeout_ms, topics)


def _request(
    request_cls: Any, transactional_id: str | None, acks: int, timeout_ms: int, topics: list[Any]
) -> Any:
    return request_cls(
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=tuple(topics),
    )


def _no_tags(buf: memoryview, pos: int, end: int) -> int:
    if pos >= end or buf[pos] != 0:  # tagged fields present: leave them to the general path
        raise _Unusual
    return pos + 1


def _decode_flexible(buf: memoryview, pos: int, end: int, version: int) -> Any:
    request_cls, topic_cls, partition_cls = _classes(version)
    length, pos = read_uvarint(buf, pos, end)
    transactional_id = None
    if length:
        length -= 1
        if length > end - pos:
            raise _Unusual
        transactional_id = str(buf[pos : pos + length], "utf-8")
        pos += length
    if end - pos < 6:
        raise _Unusual
    acks, timeout_ms = _I16_I32.unpack_from(buf, pos)
    pos += 6
    topic_count, pos = read_uvarint(buf, pos, end)
    topics = []
    for _ in range(_count(topic_count - 1, pos, end)):
        length, pos = read_uvarint(buf, pos, end)
        length -= 1
        if length < 0 or length > end - pos:
            raise _Unusual
        name = str(buf[pos : pos + length], "utf-8")
        pos += length
        partition_count, pos = read_uvarint(buf, pos, end)
        partitions = []
        for _ in range(_count(partition_count - 1, pos, end)):
            if end - pos < 4:
                raise _Unusual
            (index,) = _I32.unpack_from(buf, pos)
            pos += 4
            size, pos = read_uvarint(buf, pos, end)
            records = None
            if size:
                size -= 1
                if size > end - pos:
                    raise _Unusual
                records = buf[pos : pos + size]
                pos += size
            pos = _no_tags(buf, pos, end)
            partitions.append(partition_cls(index=index, records=records))
        pos = _no_tags(buf, pos, end)
        topics.append(topic_cls(name=name, partition_data=tuple(partitions)))
    pos = _no_tags(buf, pos, end)
    if pos != end:
        raise _Unusual
    return _request(request_cls, transactional_id, acks, timeout_ms, topics)


_FIRST = 3  # the oldest version the broker accepts (magic v2 batches)
_FIRST_FLEXIBLE = 9
_LAST = 11


def decode_produce_request(frame: memoryview | bytes, offset: int, version: int) -> Any | None:
    """The ProduceRequest body at ``offset`` of ``frame`` (read-only) for ``version``
    (3-11), with records as views of the frame; None when the general codec should decide."""
    if not _FIRST <= version <= _LAST:
        return None
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    try:
        if version >= _FIRST_FLEXIBLE:
            return _decode_flexible(buf, offset, len(buf), version)
        return _decode_legacy(buf, offset, len(buf), version)
    except (_Unusual, MalformedRequestError, UnicodeDecodeError):
        return None
