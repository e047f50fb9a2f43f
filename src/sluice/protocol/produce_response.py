"""A hand-written encoder for the Produce response, answered once per produce request.

The general path builds kio dataclasses from dicts (:func:`sluice.protocol.build.build`)
and hands them to kio's writer; for a one-partition answer that is most of the broker's
Python work per produce request. :func:`encode_produce_response` writes the same bytes
straight from the per-partition results, for versions 3-11 (``tests/protocol`` compares
it with kio's writer byte for byte). It never writes ``record_errors`` entries or the
tagged fields ``current_leader`` / ``node_endpoints`` (the broker sets none of them),
so each is written empty, as kio writes an empty or default value.

:class:`EncodedResponse` carries the body to the network layer, which frames it with
the response header like any other response.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from ._wire import INT16, INT32
from .apis import ApiKey
from .records.varint import encode_uvarint

__all__ = ["EncodedResponse", "PartitionResult", "encode_produce_response"]

FIRST_VERSION = 3
LAST_VERSION = 11
_FIRST_FLEXIBLE = 9
_PARTITION = struct.Struct(">ihq")  # index, error code, base offset
_INT64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response body already encoded for ``api_key`` / ``api_version``."""

    api_key: int
    api_version: int
    body: bytes


PartitionResult = tuple[int, int, int, int, int, str | None]
"""(partition index, error code, base offset, log append time or -1, log start offset,
error message or None)."""


def _legacy_string(value: str) -> bytes:
    raw = value.encode()
    return INT16.pack(len(raw)) + raw


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return encode_uvarint(len(raw) + 1) + raw


def encode_produce_response(
    version: int, topics: Iterable[tuple[str, list[PartitionResult]]], throttle_ms: int = 0
) -> EncodedResponse:
    """The ProduceResponse body of ``version`` (3-11) for ``topics``' partition results."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        raise ValueError(f"no fast ProduceResponse encoder for v{version}")
    flexible = version >= _FIRST_FLEXIBLE
    topics = list(topics)
    out = bytearray(encode_uvarint(len(topics) + 1) if flexible else INT32.pack(len(topics)))
    for name, partitions in topics:
        if flexible:
            out += _compact_string(name)
            out += encode_uvarint(len(partitions) + 1)
        else:
            out += _legacy_string(name)
            out += INT32.pack(len(partitions))
        for index, error, base_offset, append_time, start_offset, message in partitions:
            out += _PARTITION.pack(index, error, base_offset)
            out += _INT64.pack(append_time)
            if version >= 5:
                out += _INT64.pack(start_offset)
            if version >= 8:
                if flexible:
                    out += b"\x01"  # record_errors: empty compact array
                    out += _compact_string(message)
                    out += b"\x00"  # tagged fields (current_leader left at its default)
                else:
                    out += INT32.pack(0)
                    out += INT16.pack(-1) if message is None else _legacy_string(message)
        if flexible:
            out += b"\x00"
    out += INT32.pack(throttle_ms)
    if flexible:
        out += b"\x00"  # tagged fields (no node_endpoints)
    return EncodedResponse(ApiKey.PRODUCE, version, bytes(out))
