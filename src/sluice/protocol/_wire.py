"""Wire primitives shared by the hand-written parts of the codec (varints are in
:mod:`sluice.protocol.records.varint`)."""

from __future__ import annotations

import struct
from typing import Final, TypeAlias

__all__ = [
    "INT16",
    "INT32",
    "INT64",
    "BytesLike",
]

BytesLike: TypeAlias = bytes | bytearray | memoryview
"""What the codec accepts as input: any byte buffer (memoryviews must be of bytes)."""

INT16: Final = struct.Struct(">h")
INT32: Final = struct.Struct(">i")
INT64: Final = struct.Struct(">q")
