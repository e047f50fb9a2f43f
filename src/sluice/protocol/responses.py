"""Decoding response frames into kio dataclasses, for clients.

The mirror of :func:`~sluice.protocol.codec.decode_request`: a client knows which
API and version it asked for (it keeps them with the correlation id), so the
response header version follows from them exactly as Kafka decides it (v1, with
tagged fields, for flexible versions, except ApiVersions, always v0). The body is
checked by :mod:`.guard` before kio's native parser reads it, so a malformed or
hostile response raises :class:`~.errors.MalformedRequestError` instead of aborting
the process, and tagged fields newer than kio are skipped as Kafka does.
"""

from __future__ import annotations

from typing import NamedTuple

from kio.serial import entity_reader
from kio.static.protocol import ResponsePayload

from . import apis, guard
from ._wire import INT32, BytesLike
from .errors import MalformedRequestError
from .headers import skip_tagged_fields

__all__ = ["Response", "decode_response", "response_correlation_id"]


class Response(NamedTuple):
    """A decoded response: the correlation id of its request and kio's dataclass."""

    correlation_id: int
    body: ResponsePayload


def response_correlation_id(frame: BytesLike) -> int:
    """The correlation id at the start of a response frame (every header version).

    :raises MalformedRequestError: if the frame is shorter than 4 bytes.
    """
    if len(frame) < INT32.size:
        raise MalformedRequestError(f"response header truncated ({len(frame)} bytes)")
    return int(INT32.unpack_from(frame, 0)[0])


def decode_response(frame: BytesLike, api_key: int, api_version: int) -> Response:
    """Decode one response frame (without its size prefix) of the given API and version.

    :raises MalformedRequestError: if the header or body cannot be parsed, or bytes
        are left over after the body.
    :raises KeyError: if kio has no schema for (``api_key``, ``api_version``).
    """
    if not isinstance(frame, bytes):
        frame = memoryview(frame).toreadonly()  # kio's reader refuses writable buffers
    correlation_id = response_correlation_id(frame)
    offset = INT32.size
    if apis.response_header_version(api_key, api_version) >= 1:
        offset = skip_tagged_fields(frame, offset, len(frame))
    body_type = apis.response_type(api_key, api_version)
    buf, _end = guard.check_request(body_type, frame, offset)
    try:
        body, size = entity_reader(body_type)(buf, offset)
    except Exception as exc:  # kio raises its own errors, ValueError, KeyError...
        raise MalformedRequestError(f"cannot decode {body_type.__qualname__}: {exc}") from exc
    if offset + size != len(buf):
        raise MalformedRequestError(
            f"{len(buf) - offset - size} bytes left after {body_type.__qualname__}"
        )
    return Response(correlation_id, body)
