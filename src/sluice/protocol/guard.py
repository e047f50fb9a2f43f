"""Structural check of a request body before kio's native parser reads it.

Why: kio's native (Rust) reader sizes every array with ``Vec::with_capacity(n)``
straight from the length on the wire, before reading any element. A 5-byte compact
array length can claim ~34 billion elements, and the allocation failure *aborts the
process* (Rust ``handle_alloc_error``), which no ``except`` can catch: one crafted
request from any client would kill the broker. Kafka's own generated parsers reject
an array whose length exceeds the bytes remaining; this module does the same.

:func:`check_request` walks the body the way kio will (the same field classification,
from ``kio.serial._introspect``, that the native reader uses), without building
objects, and verifies that every length fits in the remaining bytes. It also
rejects a non-nullable array sent as null (length -1), which kio would hand on as None
and Kafka's generated parsers refuse ("non-nullable field ... was serialized as null");
kio itself refuses null non-nullable strings and bytes. And it handles two more kio
gaps, on a copy of the buffer that is then handed to kio. kio raises on a tagged field
it does not know, where Kafka ignores unknown tags (clients built against newer specs
may send some): such fields are cut out. kio ignores the size prefix of a known tagged
field and parses the value by its schema, so sizes enclosing a cut need no rewriting.
And kio cannot read an int64 duration (OffsetCommit v2-4's ``retention_time``) beyond
about ±292,000 years, which Kafka takes as it is: such a value is clamped to that.
Nor can it read a negative non-nullable timestamp (DescribeTransactions'
``transaction_start_time`` is -1 when no transaction is open): such a value is read
as 0, the epoch, which callers take as "none".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import Field, fields
from types import NoneType, UnionType
from typing import Any, Final, TypeAlias, get_args, get_origin

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from ._wire import INT16, INT32, INT64, BytesLike
from .errors import MalformedRequestError
from .records.varint import encode_uvarint, read_uvarint

__all__ = ["check_request", "walk"]

Edit: TypeAlias = tuple[int, int, bytes]
"""Replace buf[start:end] with the bytes."""
Skip: TypeAlias = Callable[[BytesLike, int, int, list[Edit]], int]
"""Walks one value from a position, within an end bound; returns where it ends."""

_FIXED: Final[dict[str, int]] = {
    "bool": 1, "int8": 1, "uint8": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}  # fmt: skip
_VARIABLE: Final = frozenset({"string", "bytes", "records"})
_MAX_TIMEDELTA_MS: Final = (2**63 - 1) // 1000  # kio reads a duration in int64 microseconds


def _truncated() -> MalformedRequestError:
    return MalformedRequestError("request body truncated")


def _fixed(size: int) -> Skip:
    def skip(buf: BytesLike, pos: int, end: int, edits: list[Edit]) -> int:
        pos += size
        if pos > end:
            raise _truncated()
        return pos

    return skip


def _timedelta_i64(buf: BytesLike, pos: int, end: int, edits: list[Edit]) -> int:
    if end - pos < 8:
        raise _truncated()
    (ms,) = INT64.unpack_from(buf, pos)
    if not -_MAX_TIMEDELTA_MS <= ms <= _MAX_TIMEDELTA_MS:
        clamped = max(-_MAX_TIMEDELTA_MS, min(ms, _MAX_TIMEDELTA_MS))
        edits.append((pos, pos + 8, INT64.pack(clamped)))
    return pos + 8


def _datetime_i64(buf: BytesLike, pos: int, end: int, edits: list[Edit]) -> int:
    if end - pos < 8:
        raise _truncated()
    (ms,) = INT64.unpack_from(buf, pos)
    if ms < 0:
        edits.append((pos, pos + 8, INT64.pack(0)))
    return pos + 8


def _compact_bytes(buf: BytesLike, pos: int, end: int, edits: list[Edit]) -> int:
    length, pos = read_uvarint(buf, pos, end)
    if length > 1:
        pos += length - 1
        if pos > end:
            raise _truncated()
    return pos


def _legacy_string(buf: BytesLike, pos: int, end: int, edits: list[Edit]) -> int:
    if end - pos < 2:
        raise _truncated()
    (length,) = INT16.unpack_from(buf, pos)
    pos += 2 + max(length, 0)
    if pos > end:
        raise _truncated()
    return pos


def _legacy_bytes(buf: BytesLike, pos: int, end: int, edits: list[Edit]) -> int:
    if end - pos < 4:
        raise _truncated()
    (length,) = INT32.unpack_from(buf, pos)
    pos += 4 + max(length, 0)
    if pos > end:
        raise _truncated()
    return pos


def _array(item: Skip, item_min: int, compact: bool, nullable: bool, name: str) -> Skip:
    item_min = max(item_min, 1)  # even an empty item counts, as in Kafka's check

    def skip(buf: BytesLike, pos: int, end: int, edits: list[Edit]) -> int:
        if compact:
            count, pos = read_uvarint(buf, pos, end)
            count -= 1  # -1: null
        else:
            if end - pos < 4:
                raise _truncated()
            (count,) = INT32.unpack_from(buf, pos)
            pos += 4
            if count < -1:
                raise MalformedRequestError(f"negative array length {count}")
        if count < 0 and not nullable:  # kio would read None, as Kafka's parsers refuse
            raise MalformedRequestError(f"non-nullable field {name} was serialized as null")
        if count * item_min > end - pos:
            raise MalformedRequestError(
                f"array of {count} items cannot fit in the {end - pos} bytes remaining"
            )
        for _ in range(count):
            pos = item(buf, pos, end, edits)
        return pos

    return skip


class _EntityPlan:
    """How to walk one kio entity type: its regular fields, then its tagged fields."""

    __slots__ = ("flexible", "min_size", "regular", "tagged")

    def __init__(self, entity_type: type[Any]) -> None:
        self.flexible: bool = entity_type.__flexible__
        # Regular fields as (fixed size, None) or (0, walker); runs of fixed-size
        # fields are merged, so the common fields cost no call.
        self.regular: list[tuple[int, Skip | None]] = []
        self.tagged: dict[int, Skip] = {}
        self.min_size = 1 if self.flexible else 0
        for field in fields(entity_type):
            tag = get_field_tag(field)
            skip, min_size, fixed = _field_plan(field, self.flexible, tag is not None)
            if tag is not None:
                self.tagged[tag] = skip
                continue
            self.min_size += min_size
            if fixed and self.regular and self.regular[-1][1] is None:
                self.regular[-1] = (self.regular[-1][0] + fixed, None)
            else:
                self.regular.append((fixed, None) if fixed else (0, skip))

    def skip(self, buf: BytesLike, pos: int, end: int, edits: list[Edit]) -> int:
        for fixed, skip in self.regular:
            if skip is None:
                pos += fixed
                if pos > end:
                    raise _truncated()
            elif skip is _compact_bytes and pos < end and buf[pos] < 0x80:
                pos += buf[pos] or 1  # one-byte length: null (0) or length + 1
                if pos > end:
                    raise _truncated()
            else:
                pos = skip(buf, pos, end, edits)
        if not self.flexible:
            return pos
        if pos < end and buf[pos] == 0:  # the common case: no tagged fields
            return pos + 1
        section = pos
        count, pos = read_uvarint(buf, pos, end)
        if count > (end - pos) // 2:  # a tagged field takes at least 2 bytes
            raise MalformedRequestError(f"{count} tagged fields cannot fit")
        counted = pos
        unknown: list[tuple[int, int]] = []
        for _ in range(count):
            start = pos
            tag, pos = read_uvarint(buf, pos, end)
            size, pos = read_uvarint(buf, pos, end)
            stop = pos + size
            if stop > end:
                raise _truncated()
            known = self.tagged.get(tag)
            if known is None:
                unknown.append((start, stop))
            elif known(buf, pos, stop, edits) != stop:
                raise MalformedRequestError(f"tagged field {tag} does not match its size")
            pos = stop
        if unknown:
            edits.append((section, counted, encode_uvarint(count - len(unknown))))
            edits.extend((start, stop, b"") for start, stop in unknown)
        return pos


def _nullable(inner: Skip) -> Skip:
    def skip(buf: BytesLike, pos: int, end: int, edits: list[Edit]) -> int:
        if pos >= end:
            raise _truncated()
        if buf[pos] == 0xFF:  # int8 -1: null (KIP-893)
            return pos + 1
        return inner(buf, pos + 1, end, edits)

    return skip


def _field_plan(field: Field[Any], flexible: bool, tagged: bool) -> tuple[Skip, int, int]:
    """A walker for one dataclass field, the fewest bytes it takes, its fixed size or 0."""
    kind = classify_field(field)
    item: Skip
    fixed = 0
    if isinstance(kind, PrimitiveField | PrimitiveTupleField):
        kafka_type = get_schema_field_type(field)
        if kafka_type == "timedelta_i64":  # walked on its own: it may need clamping
            item, item_min = _timedelta_i64, 8
        elif kafka_type == "datetime_i64" and not is_optional(field):  # -1 read as 0
            item, item_min = _datetime_i64, 8
        elif kafka_type in _FIXED:
            fixed = _FIXED[kafka_type]
            item, item_min = _fixed(fixed), fixed
        elif kafka_type not in _VARIABLE:
            raise TypeError(f"unknown kafka_type {kafka_type!r} in {field.name}")
        elif flexible:
            item, item_min = _compact_bytes, 1
        elif kafka_type == "string":
            item, item_min = _legacy_string, 2
        else:
            item, item_min = _legacy_bytes, 4
    elif isinstance(kind, EntityField):
        plan = _plan(kind.type_)
        item, item_min = plan.skip, plan.min_size
        if is_optional(field):  # as kio's reader: even for tagged fields
            item, item_min = _nullable(item), 1
    elif isinstance(kind, EntityTupleField):
        plan = _plan(kind.type_)
        item, item_min = plan.skip, plan.min_size
    else:  # pragma: no cover - classify_field is exhaustive
        raise TypeError(f"unclassifiable field {field.name}")
    if kind.is_array:
        skip = _array(item, item_min, flexible, _nullable_array(field), field.name)
        return skip, (1 if flexible else 4), 0
    return item, item_min, fixed


def _nullable_array(field: Field[Any]) -> bool:
    """Whether an array field may be null: kio types it ``tuple[...] | None``
    (``tuple[str | None, ...]`` is a non-nullable array of nullable strings)."""
    return get_origin(field.type) is UnionType and NoneType in get_args(field.type)


_PLANS: dict[type[Any], _EntityPlan] = {}


def _plan(entity_type: type[Any]) -> _EntityPlan:
    plan = _PLANS.get(entity_type)
    if plan is None:
        plan = _PLANS[entity_type] = _EntityPlan(entity_type)
    return plan


def walk(entity_type: type[Any], buf: BytesLike, offset: int) -> tuple[int, list[Edit]]:
    """Walk an encoded ``entity_type`` at ``offset``; return its end and the edits.

    :raises MalformedRequestError: on any length that overruns the buffer, or a
        non-nullable array sent as null.
    """
    edits: list[Edit] = []
    return _plan(entity_type).skip(buf, offset, len(buf), edits), edits


def check_request(entity_type: type[Any], buf: BytesLike, offset: int) -> tuple[BytesLike, int]:
    """Check a request body before kio parses it; return the buffer to parse and its end.

    The buffer is ``buf`` itself unless unknown tagged fields had to be cut out or a
    duration clamped, in which case it is a new ``bytes`` with the same layout up to
    ``offset``.

    :raises MalformedRequestError: on any length that overruns the buffer, or a
        non-nullable array sent as null.
    """
    end, edits = walk(entity_type, buf, offset)
    if not edits:
        return buf, end
    edits.sort()
    out = bytearray()
    previous = 0
    for start, stop, replacement in edits:
        out += buf[previous:start]
        out += replacement
        previous = stop
    out += buf[previous:]
    return bytes(out), end - (len(buf) - len(out))  # all edits lie before ``end``
