"""A response's ``throttle_time_ms``, read and raised, whatever the API.

Every Kafka response carries the time the client is throttled for (kio's
``throttle_time``, a ``timedelta``; the hand-encoded Produce answer writes it as its
last int32, before the tagged fields from v9). The broker's network layer reads it to
mute a throttled connection, and raises it when the request quota calls for a longer
throttle than the API's own. :class:`NoResponse` is an answer that writes nothing but
still throttles (an acks=0 Produce over its quota).
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
from typing import Any, Final

from .apis import ApiKey
from .produce_response import EncodedResponse

__all__ = ["NoResponse", "throttle_time_ms", "with_throttle_time"]

_INT32: Final = struct.Struct(">i")
_PRODUCE_FIRST_FLEXIBLE: Final = 9


class NoResponse:
    """No answer is written, but the connection is throttled for ``throttle_time_ms``."""

    __slots__ = ("throttle_time_ms",)

    def __init__(self, throttle_time_ms: int) -> None:
        self.throttle_time_ms = throttle_time_ms


def _produce_offset(response: EncodedResponse) -> int:
    """Where the hand-encoded Produce answer holds its throttle time."""
    tagged = 1 if response.api_version >= _PRODUCE_FIRST_FLEXIBLE else 0
    return len(response.body) - 4 - tagged


def throttle_time_ms(response: Any) -> int:
    """The throttle time ``response`` carries (0 for None or an answer without one)."""
    if response is None:
        return 0
    if isinstance(response, NoResponse):
        return response.throttle_time_ms
    if isinstance(response, EncodedResponse):
        if response.api_key != ApiKey.PRODUCE:
            return 0
        return int(_INT32.unpack_from(response.body, _produce_offset(response))[0])
    throttle = getattr(response, "throttle_time", None)
    if isinstance(throttle, datetime.timedelta):
        return int(throttle.total_seconds() * 1000)
    return 0


def with_throttle_time(response: Any, ms: int) -> Any:
    """``response`` carrying ``ms`` as its throttle time (as it is if it has none)."""
    if response is None:
        return None
    if isinstance(response, NoResponse):
        return NoResponse(ms)
    if isinstance(response, EncodedResponse):
        if response.api_key != ApiKey.PRODUCE:
            return response
        body = bytearray(response.body)
        _INT32.pack_into(body, _produce_offset(response), ms)
        return EncodedResponse(response.api_key, response.api_version, bytes(body))
    if isinstance(getattr(response, "throttle_time", None), datetime.timedelta):
        return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=ms))
    return response
