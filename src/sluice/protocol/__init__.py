"""Sans-I/O Kafka wire protocol adapter, built on kio's generated message types.

The broker's network layer drives one
:class:`~sluice.protocol.server_connection.ServerConnection` per client: bytes in,
decoded requests out, answers in, encoded bytes out in request order::

    conn = ServerConnection(versions, max_frame_size)
    buf = conn.get_buffer(-1); n = sock.recv_into(buf)
    conn.buffer_updated(n)                      # FrameSizeError: close
    while (request := conn.next_request()) is not None:   # ProtocolError: close
        conn.respond(handle(request))           # or conn.defer(...), conn.answer(...)
    writelines(conn.data_to_send() or [])

A client splits what it receives with :class:`FrameDecoder` and decodes each frame.

See ``docs/protocol.md`` for the evaluation of kio and the version table.
"""

from __future__ import annotations

from .api_versions import (
    api_versions_fallback_response,
    api_versions_response,
    is_valid_client_software,
)
from .apis import (
    ApiKey,
    first_flexible_version,
    is_flexible,
    kio_version_range,
    request_header_version,
    request_type,
    response_header_version,
    response_type,
)
from .codec import (
    Request,
    decode_request,
    encode_request,
    encode_response,
    encode_response_segments,
)
from .errors import (
    ErrorCode,
    FrameSizeError,
    FrameTooLargeError,
    KafkaError,
    MalformedRequestError,
    NegativeFrameSizeError,
    ProtocolError,
    UnknownApiKeyError,
    UnsupportedApiVersionsError,
    UnsupportedVersionError,
    error_code,
)
from .fetch import encode_fetch_response
from .frames import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, encode_frame, frame_segments
from .headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    read_request_header,
)
from .versions import ApiVersionRange, VersionTable

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "ApiKey",
    "ApiVersionRange",
    "ErrorCode",
    "FrameDecoder",
    "FrameSizeError",
    "FrameTooLargeError",
    "KafkaError",
    "MalformedRequestError",
    "NegativeFrameSizeError",
    "ProtocolError",
    "Request",
    "RequestHeader",
    "UnknownApiKeyError",
    "UnsupportedApiVersionsError",
    "UnsupportedVersionError",
    "VersionTable",
    "api_versions_fallback_response",
    "api_versions_response",
    "decode_request",
    "encode_fetch_response",
    "encode_frame",
    "encode_request",
    "encode_request_header",
    "encode_response",
    "encode_response_header",
    "encode_response_segments",
    "error_code",
    "first_flexible_version",
    "frame_segments",
    "is_flexible",
    "is_valid_client_software",
    "kio_version_range",
    "parse_request_header",
    "read_request_header",
    "request_header_version",
    "request_type",
    "response_header_version",
    "response_type",
]
