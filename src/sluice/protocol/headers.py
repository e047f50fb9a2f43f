"""Request and response headers, parsed and written by hand.

Request header versions (RequestHeader.json):

* v0: api_key int16, api_version int16, correlation_id int32
  (only ControlledShutdown v0 used it; Kafka 4.0 removed that API);
* v1: v0 + client_id, a nullable *legacy* string (int16 length), for non-flexible
  request versions;
* v2: v1 + tagged fields, for flexible request versions. client_id stays a legacy
  string even here, a special case Kafka keeps for compatibility.

Response header v0 is the correlation id alone; v1 adds tagged fields. Which version
an (API, version) uses is decided in :mod:`sluice.protocol.apis`.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from . import apis
from ._wire import INT16, INT32, BytesLike
from .errors import MalformedRequestError, UnknownApiKeyError
from .records.varint import read_uvarint

__all__ = [
    "RequestHeader",
    "encode_request_header",
    "encode_response_header",
    "parse_request_header",
    "read_request_header",
    "skip_tagged_fields",
]

_FIXED: Final = struct.Struct(">hhi")
_KEY_VERSION: Final = struct.Struct(">hh")
_EMPTY_TAGS: Final = b"\x00"


class RequestHeader(NamedTuple):
    """A parsed request header and the header version it was read with."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


def skip_tagged_fields(buf: BytesLike, pos: int, end: int) -> int:
    """Skip a tagged-field section (count, then tag/size/bytes triples); return the end.

    :raises MalformedRequestError: if the section overruns ``end``.
    """
    count, pos = read_uvarint(buf, pos, end)
    if count > (end - pos) // 2:  # every field takes at least 2 bytes (tag, size)
        raise MalformedRequestError(f"{count} tagged fields cannot fit in {end - pos} bytes")
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        if size > end - pos:
            raise MalformedRequestError("tagged field overruns the buffer")
        pos += size
    return pos


def read_request_header(
    buf: BytesLike, header_version: int, offset: int = 0
) -> tuple[RequestHeader, int]:
    """Read a request header of the given version at ``offset``.

    Returns the header and the offset of the request body. As in Kafka, a client id
    that is not valid UTF-8 is decoded with replacement characters, and any negative
    length means a null client id.

    :raises MalformedRequestError: if the buffer is too short.
    """
    if header_version not in (0, 1, 2):
        raise ValueError(f"no request header version {header_version}")
    end = len(buf)
    if end - offset < _FIXED.size:
        raise MalformedRequestError(f"request header truncated ({end - offset} bytes)")
    api_key, api_version, correlation_id = _FIXED.unpack_from(buf, offset)
    pos = offset + _FIXED.size
    client_id: str | None = None
    if header_version >= 1:
        if end - pos < INT16.size:
            raise MalformedRequestError("request header truncated in client_id length")
        (length,) = INT16.unpack_from(buf, pos)
        pos += INT16.size
        if length >= 0:
            if end - pos < length:
                raise MalformedRequestError("request header truncated in client_id")
            client_id = bytes(buf[pos : pos + length]).decode("utf-8", "replace")
            pos += length
    if header_version >= 2:
        if pos < end and buf[pos] == 0:  # no tagged fields, the usual case
            pos += 1
        else:
            pos = skip_tagged_fields(buf, pos, end)
    return RequestHeader(api_key, api_version, correlation_id, client_id, header_version), pos


def parse_request_header(buf: BytesLike, offset: int = 0) -> tuple[RequestHeader, int]:
    """Read a request header, choosing its version from the API key and version.

    :raises UnknownApiKeyError: if kio (Kafka 4.1) does not know the API key.
    :raises MalformedRequestError: if the buffer is too short.
    """
    end = len(buf)
    if end - offset < _KEY_VERSION.size:
        raise MalformedRequestError(f"request header truncated ({end - offset} bytes)")
    api_key, api_version = _KEY_VERSION.unpack_from(buf, offset)
    if apis.kio_version_range(api_key) is None:
        correlation_id = None
        if end - offset >= _FIXED.size:
            (correlation_id,) = INT32.unpack_from(buf, offset + _KEY_VERSION.size)
        raise UnknownApiKeyError(api_key, api_version, correlation_id)
    return read_request_header(buf, apis.request_header_version(api_key, api_version), offset)


def encode_request_header(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    header_version: int | None = None,
) -> bytes:
    """Encode a request header (the version is Kafka's choice unless given)."""
    if header_version is None:
        header_version = apis.request_header_version(api_key, api_version)
    out = _FIXED.pack(api_key, api_version, correlation_id)
    if header_version >= 1:
        if client_id is None:
            out += INT16.pack(-1)
        else:
            raw = client_id.encode()
            out += INT16.pack(len(raw)) + raw
    if header_version >= 2:
        out += _EMPTY_TAGS
    return out


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Encode a response header: v0 is the correlation id, v1 adds (no) tagged fields."""
    if header_version == 0:
        return INT32.pack(correlation_id)
    if header_version == 1:
        return INT32.pack(correlation_id) + _EMPTY_TAGS
    raise ValueError(f"no response header version {header_version}")
