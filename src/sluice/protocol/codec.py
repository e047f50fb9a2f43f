"""Decoding request frames into kio dataclasses, and encoding responses.

A request frame (the bytes after the size prefix, see :mod:`.frames`) is parsed in
four steps by :func:`decode_request`:

1. the header, by hand (:mod:`.headers`), its version chosen from the API key and
   version exactly as Kafka does;
2. the version check against a :class:`~.versions.VersionTable`. An unknown API key
   raises :class:`~.errors.UnknownApiKeyError`; an API or version the table does not
   accept raises :class:`~.errors.UnsupportedVersionError`, except for ApiVersions,
   which raises :class:`~.errors.UnsupportedApiVersionsError` carrying the framed v0
   fallback response to send;
3. a structural check of the body (:mod:`.guard`), which protects kio's native
   parser from lengths that would abort the process and drops unknown tagged fields;
4. kio's native parser, whose result is kio's frozen dataclass for that version.

Responses are encoded by kio's (pure Python) writer, which omits tagged fields that
hold their default value, as Kafka does. Fetch responses have a hand-written encoder
(:mod:`.fetch`) that returns buffers without copying record batches; use
:func:`encode_response_segments` to get it where it applies.
"""

from __future__ import annotations

import io
from typing import Any, Final, NamedTuple

from kio.serial import entity_reader, entity_writer
from kio.static.protocol import RequestPayload, ResponsePayload

from . import apis, guard
from ._wire import INT32, BytesLike
from .api_versions import api_versions_fallback_response
from .apis import ApiKey
from .errors import (
    MalformedRequestError,
    UnsupportedApiVersionsError,
    UnsupportedVersionError,
)
from .fetch import encode_fetch_response
from .frames import encode_frame
from .headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
)
from .produce_fast import decode_produce_request
from .produce_response import EncodedResponse
from .versions import VersionTable

__all__ = [
    "Request",
    "decode_request",
    "encode_request",
    "encode_response",
    "encode_response_segments",
]

_PLACEHOLDER: Final = b"\x00\x00\x00\x00"


class Request(NamedTuple):
    """A decoded request: its header and kio's dataclass for the body."""

    header: RequestHeader
    body: RequestPayload

    @property
    def api_key(self) -> int:
        """The request's API key."""
        return self.header.api_key

    @property
    def api_version(self) -> int:
        """The request's API version (the response must use the same)."""
        return self.header.api_version

    @property
    def response_type(self) -> type[ResponsePayload]:
        """kio's response dataclass for this request's API and version."""
        return apis.response_type(self.header.api_key, self.header.api_version)


def decode_request(frame: BytesLike, versions: VersionTable) -> Request:
    """Decode one request frame (without its size prefix), accepting the APIs and versions
    of ``versions`` (the broker's: the ones its API modules declare).

    :raises UnknownApiKeyError: the API key is not a Kafka API (close the connection).
    :raises UnsupportedApiVersionsError: an ApiVersions version above the table's;
        write ``exc.response`` and keep the connection.
    :raises UnsupportedVersionError: an API or version the table does not accept
        (close the connection).
    :raises MalformedRequestError: the header or body cannot be parsed (close it).
    """
    if not isinstance(frame, bytes):
        frame = memoryview(frame).toreadonly()  # kio's reader refuses writable buffers
    header, offset = parse_request_header(frame)
    entry = versions.get(header.api_key)
    if entry is None or not entry.accepts(header.api_version):
        supported = None if entry is None else (entry.min_version, entry.max_version)
        if header.api_key == ApiKey.API_VERSIONS and supported is not None:
            fallback = api_versions_fallback_response(versions)
            response = encode_response(header.correlation_id, fallback)
            raise UnsupportedApiVersionsError(header, supported, response)
        raise UnsupportedVersionError(header, supported)
    if header.api_key == ApiKey.PRODUCE:  # records stay views of the frame; no copy
        body = decode_produce_request(frame, offset, header.api_version)
        if body is not None:
            return Request(header, body)
    body_type = apis.request_type(header.api_key, header.api_version)
    buf, end = guard.check_request(body_type, frame, offset)
    try:
        body, size = entity_reader(body_type)(buf, offset)
    except Exception as exc:  # kio raises its own errors, ValueError, KeyError...
        raise MalformedRequestError(f"cannot decode {body_type.__qualname__}: {exc}") from exc
    if offset + size != end:  # pragma: no cover - the guard walks exactly as kio reads
        raise MalformedRequestError("request body length mismatch")
    return Request(header, body)


def encode_response(
    correlation_id: int, response: ResponsePayload | EncodedResponse, *, use_kio: bool = False
) -> bytes:
    """Encode a response with its header, framed (size prefix included).

    The header version follows Kafka: v1 for flexible versions, v0 otherwise and
    always for ApiVersions. Fetch responses go through the hand-written encoder
    (byte-identical, faster) unless ``use_kio`` asks for kio's general writer.
    """
    if isinstance(response, EncodedResponse):
        return _frame_encoded(correlation_id, response)
    if not use_kio and int(response.__api_key__) == ApiKey.FETCH:
        return b"".join(encode_fetch_response(correlation_id, response))
    header_version = apis.response_header_version(response.__api_key__, response.__version__)
    buffer = io.BytesIO()
    buffer.write(_PLACEHOLDER)
    buffer.write(encode_response_header(correlation_id, header_version))
    writer: Any = entity_writer(type(response))
    writer(buffer, response)
    view = buffer.getbuffer()
    INT32.pack_into(view, 0, len(view) - INT32.size)
    del view  # release the export so getvalue() may share the buffer
    return buffer.getvalue()


def encode_response_segments(
    correlation_id: int, response: ResponsePayload | EncodedResponse
) -> list[BytesLike]:
    """Encode a framed response as a list of buffers, for ``writelines``/``sendmsg``.

    Fetch responses go through the hand-written encoder, which references record
    batches instead of copying them; anything else is one buffer from
    :func:`encode_response`.
    """
    if isinstance(response, EncodedResponse):
        return [_frame_encoded(correlation_id, response)]
    if int(response.__api_key__) == ApiKey.FETCH:
        return encode_fetch_response(correlation_id, response)
    return [encode_response(correlation_id, response)]


def _frame_encoded(correlation_id: int, response: EncodedResponse) -> bytes:
    header_version = apis.response_header_version(response.api_key, response.api_version)
    header = encode_response_header(correlation_id, header_version)
    return INT32.pack(len(header) + len(response.body)) + header + response.body


def encode_request(
    correlation_id: int, body: RequestPayload, client_id: str | None = "sluice"
) -> bytes:
    """Encode a request with its header, framed (for clients, tools and tests)."""
    header = encode_request_header(body.__api_key__, body.__version__, correlation_id, client_id)
    buffer = io.BytesIO()
    writer: Any = entity_writer(type(body))
    writer(buffer, body)
    return encode_frame(header + buffer.getvalue())
