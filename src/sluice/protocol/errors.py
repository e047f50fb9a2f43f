"""Kafka error codes and the exceptions raised by the protocol layer.

:class:`ErrorCode` is kio's enum, re-exported unchanged: kio's request and response
dataclasses are typed with it and its encoder writes ``error_code.value``, so a second,
hand-written enum could not be used in them. It covers every code Apache Kafka 4.1
defines (-1 .. 133), each with Kafka's ``Errors`` name in lower case
(``ErrorCode.not_leader_or_follower``) and Kafka's ``retriable`` flag. Use
:func:`error_code` to look a code up by Kafka's upper-case name or by number.

Exceptions: :class:`KafkaError` is the base of every exception that maps to a Kafka
error code. :class:`ProtocolError` and its subclasses mean the peer broke the wire
protocol; the network layer must close the connection, as Kafka does (the one
exception being :class:`UnsupportedApiVersionsError`, which carries the response to
send before carrying on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

if TYPE_CHECKING:
    from .headers import RequestHeader

__all__ = [
    "ErrorCode",
    "FrameSizeError",
    "FrameTooLargeError",
    "KafkaError",
    "MalformedRequestError",
    "NegativeFrameSizeError",
    "ProtocolError",
    "UnknownApiKeyError",
    "UnsupportedApiVersionsError",
    "UnsupportedVersionError",
    "error_code",
]


def error_code(name_or_value: str | int) -> ErrorCode:
    """Return the :class:`ErrorCode` for Kafka's name (any case) or numeric value.

    >>> error_code("NOT_LEADER_OR_FOLLOWER") is ErrorCode.not_leader_or_follower
    True

    :raises ValueError: for a name or number Kafka does not define.
    """
    if isinstance(name_or_value, str):
        try:
            return ErrorCode[name_or_value.lower()]
        except KeyError:
            raise ValueError(f"unknown Kafka error name {name_or_value!r}") from None
    return ErrorCode(name_or_value)


class KafkaError(Exception):
    """Base class of exceptions that carry a Kafka error code.

    Subclasses set a class-level default :attr:`code`; an instance may override it
    with the ``code`` keyword.
    """

    code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, message: str = "", *, code: ErrorCode | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(message or self.default_message())

    def default_message(self) -> str:
        """The message used when none is given: the error code's name."""
        return self.code.name.upper()

    @property
    def error_name(self) -> str:
        """Kafka's name of the error code, e.g. ``CORRUPT_MESSAGE``."""
        return self.code.name.upper()

    @property
    def retriable(self) -> bool:
        """Whether Kafka marks this error code as retriable for clients."""
        return bool(self.code.retriable)


class ProtocolError(KafkaError):
    """The peer violated the wire protocol: close the connection."""

    code = ErrorCode.invalid_request


class FrameSizeError(ProtocolError):
    """A frame's int32 size prefix is negative or larger than the maximum."""

    def __init__(self, size: int, max_frame_size: int, message: str) -> None:
        super().__init__(message)
        self.size = size
        self.max_frame_size = max_frame_size


class NegativeFrameSizeError(FrameSizeError):
    """A frame's size prefix is negative."""

    def __init__(self, size: int, max_frame_size: int) -> None:
        super().__init__(size, max_frame_size, f"invalid frame size {size} (negative)")


class FrameTooLargeError(FrameSizeError):
    """A frame's size prefix exceeds ``socket.request.max.bytes``."""

    def __init__(self, size: int, max_frame_size: int) -> None:
        super().__init__(
            size,
            max_frame_size,
            f"frame size {size} is larger than the maximum of {max_frame_size} bytes "
            "(socket.request.max.bytes)",
        )


class MalformedRequestError(ProtocolError):
    """A request header or body could not be parsed."""


class UnknownApiKeyError(ProtocolError):
    """The request's API key is not one this broker knows.

    ``api_version`` and ``correlation_id`` are filled in when the frame was long
    enough to hold them (they sit at fixed offsets in every header version).
    """

    def __init__(
        self, api_key: int, api_version: int | None = None, correlation_id: int | None = None
    ) -> None:
        super().__init__(f"unknown API key {api_key}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class UnsupportedVersionError(ProtocolError):
    """The request's version of a known API is outside the range this broker accepts."""

    code = ErrorCode.unsupported_version

    def __init__(self, header: RequestHeader, supported: tuple[int, int] | None) -> None:
        span = f"{supported[0]}-{supported[1]}" if supported else "none"
        super().__init__(
            f"unsupported version {header.api_version} of API key {header.api_key} "
            f"(supported: {span})"
        )
        self.header = header
        self.supported = supported


class UnsupportedApiVersionsError(UnsupportedVersionError):
    """An ApiVersions request newer than this broker knows (KIP-511 fallback).

    Kafka answers it, instead of closing the connection, with an ApiVersions v0
    response carrying UNSUPPORTED_VERSION and the supported API ranges; clients
    (librdkafka, kafka-python, aiokafka, the Java client) then retry with the highest
    ApiVersions version listed. :attr:`response` is that response, already framed:
    write it to the connection and keep the connection open.
    """

    def __init__(
        self, header: RequestHeader, supported: tuple[int, int] | None, response: bytes
    ) -> None:
        super().__init__(header, supported)
        self.response = response
