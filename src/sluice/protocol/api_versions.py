"""Building ApiVersions responses from a :class:`~sluice.protocol.versions.VersionTable`."""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from typing import Any, Final

from kio.static.primitive import i16, i32Timedelta
from kio.static.protocol import ResponsePayload

from . import apis
from .apis import ApiKey
from .errors import ErrorCode
from .versions import VersionTable

__all__ = [
    "api_versions_fallback_response",
    "api_versions_response",
    "is_valid_client_software",
]

_SOFTWARE: Final = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_versions_response(
    versions: VersionTable,
    api_version: int,
    *,
    error_code: ErrorCode = ErrorCode.none,
    throttle_time_ms: int = 0,
) -> ResponsePayload:
    """The ApiVersions response (of ``api_version``) advertising ``versions``.

    Features (v3+ tagged fields) are left at their defaults, so they are not sent.
    """
    response_type: type[Any] = apis.response_type(ApiKey.API_VERSIONS, api_version)
    entry_type = getattr(sys.modules[response_type.__module__], "ApiVersion")  # noqa: B009
    api_keys = tuple(
        entry_type(api_key=i16(key), min_version=i16(low), max_version=i16(high))
        for key, low, high in versions.advertised()
    )
    fields: dict[str, object] = {"error_code": error_code, "api_keys": api_keys}
    if api_version >= 1:
        fields["throttle_time"] = i32Timedelta.parse(timedelta(milliseconds=throttle_time_ms))
    response: ResponsePayload = response_type(**fields)
    return response


def api_versions_fallback_response(versions: VersionTable) -> ResponsePayload:
    """The ApiVersions v0 response with UNSUPPORTED_VERSION, for a too-new request.

    It lists every advertised API; clients read the ApiVersions entry and retry with
    its maximum (Kafka itself lists only that entry, which is a subset of this).
    """
    return api_versions_response(versions, 0, error_code=ErrorCode.unsupported_version)


def is_valid_client_software(name: str, version: str) -> bool:
    """Kafka's check of ApiVersions v3+ ``client_software_name``/``_version`` (KIP-511).

    When it fails, Kafka answers with INVALID_REQUEST, and librdkafka retries with
    ApiVersions v0.
    """
    return bool(_SOFTWARE.fullmatch(name) and _SOFTWARE.fullmatch(version))
