"""Wire primitives shared by the hand-written parts of the codec."""

from __future__ import annotations

import struct
from typing import Final, TypeAlias

from .errors import MalformedRequestError

__all__ = [
    "INT16",
    "INT32",
    "INT64",
    "BytesLike",
    "encode_uvarint",
    "read_uvarint",
]

BytesLike: TypeAlias = bytes | bytearray | memoryview
"""What the codec accepts as input: any byte buffer (memoryviews must be of bytes)."""

INT16: Final = struct.Struct(">h")
INT32: Final = struct.Struct(">i")
INT64: Final = struct.Struct(">q")

_MAX_VARINT_BYTES: Final = 5


def read_uvarint(buf: BytesLike, pos: int, end: int) -> tuple[int, int]:
    """Read an unsigned varint at ``pos`` (at most 5 bytes, as Kafka allows).

    Returns (value, new position).

    :raises MalformedRequestError: if the buffer ends first or the varint is too long.
    """
    value = 0
    shift = 0
    while pos < end:  # unrolled by the interpreter's fast paths; at most 5 rounds
        byte = buf[pos]
        pos += 1
        if byte < 0x80:
            return value | (byte << shift), pos
        value |= (byte & 0x7F) << shift
        shift += 7
        if shift == 7 * _MAX_VARINT_BYTES:
            raise MalformedRequestError("varint is longer than 5 bytes")
    raise MalformedRequestError("buffer ends inside a varint")


def encode_uvarint(value: int) -> bytes:
    """Encode a non-negative int as an unsigned varint."""
    if value < 0x80:
        return _SMALL_VARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_VARINTS: Final = tuple(bytes((value,)) for value in range(0x80))
