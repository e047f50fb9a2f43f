"""Kafka's variable-length integers: the one varint codec of Sluice.

Two kinds are used on the wire:

* unsigned varints (``UNSIGNED_VARINT``): the lengths and counts of flexible protocol
  versions (compact strings, arrays, tagged fields), at most 5 bytes;
* signed, zig-zag encoded varints and varlongs: every length and delta inside a v2
  record (``DefaultRecord``), at most 10 bytes.

Both put 7 bits in a byte, low bits first, with the top bit set on every byte but the
last. Small values come from precomputed tables, as they dominate real traffic.
"""

from __future__ import annotations

from typing import Final

from sluice.protocol._wire import BytesLike
from sluice.protocol.errors import MalformedRequestError

__all__ = [
    "SMALL_VARINTS",
    "SMALL_VARINT_LIMIT",
    "encode_uvarint",
    "encode_varint",
    "read_uvarint",
    "read_varint",
    "skip_varint",
]

_MAX_UVARINT_BYTES: Final = 5
_MAX_VARLONG_SHIFT: Final = 63


def read_uvarint(buf: BytesLike, pos: int, end: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` (at most 5 bytes, as Kafka allows) and the position
    after it.

    :raises MalformedRequestError: if ``end`` comes first or the varint is too long.
    """
    value = 0
    shift = 0
    while pos < end:
        byte = buf[pos]
        pos += 1
        if byte < 0x80:
            return value | (byte << shift), pos
        value |= (byte & 0x7F) << shift
        shift += 7
        if shift == 7 * _MAX_UVARINT_BYTES:
            raise MalformedRequestError("varint is longer than 5 bytes")
    raise MalformedRequestError("buffer ends inside a varint")


def encode_uvarint(value: int) -> bytes:
    """A non-negative int as an unsigned varint."""
    if value < 0x80:
        return _SMALL_UVARINTS[value]
    return _seven_bits_a_byte(value)


def _seven_bits_a_byte(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(buf: BytesLike, pos: int) -> tuple[int, int]:
    """The zig-zag varint or varlong at ``pos`` and the position after it.

    :raises IndexError: if the buffer ends inside it.
    :raises ValueError: if it is longer than a varlong.
    """
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > _MAX_VARLONG_SHIFT:
            raise ValueError("varint is longer than 10 bytes")


def skip_varint(buf: BytesLike, pos: int) -> int:
    """The position after the varint at ``pos``, without decoding it."""
    while buf[pos] & 0x80:
        pos += 1
    return pos + 1


def _zigzag(value: int) -> bytes:
    return _seven_bits_a_byte((value << 1) ^ (value >> 63))


SMALL_VARINT_LIMIT: Final = 1 << 14
"""Values in ``[0, SMALL_VARINT_LIMIT)`` are encoded from a table."""

SMALL_VARINTS: Final[tuple[bytes, ...]] = tuple(_zigzag(n) for n in range(SMALL_VARINT_LIMIT))
"""``SMALL_VARINTS[n]`` is the zig-zag varint of ``n``: the record builder indexes it
directly on its per-record path."""

_SMALL_UVARINTS: Final = tuple(bytes((value,)) for value in range(0x80))


def encode_varint(value: int) -> bytes:
    """A signed int (up to 64 bits) as a zig-zag varint/varlong."""
    if 0 <= value < SMALL_VARINT_LIMIT:
        return SMALL_VARINTS[value]
    return _zigzag(value)
