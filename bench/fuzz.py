"""Hostile-input fuzzer: every API and version a broker serves, valid requests and
mutations of them, sent over real sockets to an embedded broker.

For each (API, version) the broker accepts (``sluice.server.apis.registry()``) it builds
plausible valid requests from kio's dataclasses (topics and groups that exist, small
partition numbers, valid record batches for Produce), encodes them, and mutates the
bytes knowing where every field lies (:func:`layout`). First a sweep (:func:`sweep`):
every integer field of a valid request set to each of its extreme values, every
non-nullable array, string and bytes field sent as null, every string empty and at the
longest its encoding allows, one field at a time. Then random rounds (:func:`cases`):
lengths that lie, extreme integers, strings of 250 to 40,000 characters, invalid UTF-8,
arrays repeated into thousands, flipped bytes, truncated and extended bodies, unknown or
damaged tagged fields, damaged headers. Each request is followed on its connection by an
ApiVersions v0 probe, which tells whether it was answered, went unanswered (acks=0) or
closed the connection. The broker's log is captured (INFO and above): lines are counted
by level and source, and every record carrying a traceback is classified by exception
type and innermost frame. At the end Sluice's own producer and consumer check that the
broker still serves.

    python bench/fuzz.py                          # the sweep, then random rounds: 10 minutes
    python bench/fuzz.py --seconds 60 --seed 7 --json report.json --verbose

It exits non-zero if any traceback was logged or the broker no longer serves. A
mutation may ask for a great deal (10,000 partitions, say): run it under a memory limit
(``ulimit -v 6000000``) on a shared machine. ``tests/server/test_fuzz_requests.py`` runs
a bounded version (the sweep and 4,000 random requests, under a minute).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import io
import itertools
import json
import logging
import random
import socket
import struct
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from sluice.protocol import ApiKey, encode_request_header, request_type
from sluice.protocol.records.builder import build_batch
from sluice.protocol.records.varint import encode_uvarint, read_uvarint

TOPICS = ("fuzz-a", "fuzz-b")
GROUP = "fuzz-group"
PROBE_CORRELATION_ID = 0x7E57_AB1E
_PROBE_HEADER = encode_request_header(ApiKey.API_VERSIONS, 0, PROBE_CORRELATION_ID, "probe")
PROBE = struct.pack(">i", len(_PROBE_HEADER)) + _PROBE_HEADER

_FIXED = {
    "bool": (1, False), "int8": (1, True), "uint8": (1, False), "int16": (2, True),
    "uint16": (2, False), "error_code": (2, True), "int32": (4, True), "uint32": (4, False),
    "timedelta_i32": (4, True), "int64": (8, True), "uint64": (8, False),
    "timedelta_i64": (8, True), "datetime_i64": (8, True), "float64": (8, False),
    "uuid": (16, False),
}  # fmt: skip


# -- where each field of an encoded request lies ------------------------------------------


@dataclasses.dataclass(slots=True)
class Span:
    """One encoded field: ``buf[start:end]``; ``width`` is an integer's size or a length
    prefix's (legacy); compact lengths are varints."""

    start: int
    end: int
    kind: str  # "int", "string", "bytes", "array", "struct", "tags"
    width: int
    compact: bool
    nullable: bool


def layout(entity_type: type, buf: bytes, pos: int = 0) -> list[Span]:
    """The fields of an encoded ``entity_type`` (a valid one) at ``pos``, outermost first."""
    spans: list[Span] = []
    _walk_entity(entity_type, buf, pos, spans)
    return spans


def _walk_entity(entity_type: type, buf: bytes, pos: int, spans: list[Span]) -> int:
    flexible = entity_type.__flexible__  # type: ignore[attr-defined]
    for field in dataclasses.fields(entity_type):
        if get_field_tag(field) is None:
            pos = _walk_field(field, flexible, buf, pos, spans)
    if flexible:
        span = Span(pos, pos, "tags", 0, True, False)
        spans.append(span)
        count, pos = read_uvarint(buf, pos, len(buf))
        for _ in range(count):
            _tag, pos = read_uvarint(buf, pos, len(buf))
            size, pos = read_uvarint(buf, pos, len(buf))
            pos += size
        span.end = pos
    return pos


def _array_is_nullable(field: dataclasses.Field[Any]) -> bool:
    return type(None) in getattr(field.type, "__args__", ()) and "tuple" in str(field.type)


def _walk_field(
    field: dataclasses.Field[Any], flexible: bool, buf: bytes, pos: int, spans: list[Span]
) -> int:
    kind = classify_field(field)
    if not kind.is_array:
        return _walk_value(field, kind, flexible, buf, pos, spans)
    span = Span(pos, pos, "array", 4, flexible, _array_is_nullable(field))
    spans.append(span)
    if flexible:
        count, pos = read_uvarint(buf, pos, len(buf))
        count -= 1
    else:
        (count,) = struct.unpack_from(">i", buf, pos)
        pos += 4
    for _ in range(max(count, 0)):
        pos = _walk_value(field, kind, flexible, buf, pos, spans)
    span.end = pos
    return pos


def _walk_value(
    field: dataclasses.Field[Any], kind: Any, flexible: bool, buf: bytes, pos: int,
    spans: list[Span],
) -> int:  # fmt: skip
    if isinstance(kind, EntityField | EntityTupleField):
        start = pos
        if isinstance(kind, EntityField) and is_optional(field):
            if buf[pos] == 0xFF:
                return pos + 1
            pos += 1
        end = _walk_entity(kind.type_, buf, pos, spans)
        spans.append(Span(start, end, "struct", 0, flexible, False))
        return end
    kafka_type = get_schema_field_type(field)
    if kafka_type in _FIXED:
        width, signed = _FIXED[kafka_type]
        kind_name = "int" if kafka_type not in ("uuid", "float64", "bool") else kafka_type
        spans.append(Span(pos, pos + width, kind_name, width, False, signed))
        return pos + width
    nullable = not kind.is_array and is_optional(field)
    kind_name = "string" if kafka_type == "string" else "bytes"
    if flexible:
        length, after = read_uvarint(buf, pos, len(buf))
        end = after + max(length - 1, 0)
    else:
        width = 2 if kafka_type == "string" else 4
        (length,) = struct.unpack_from(">h" if width == 2 else ">i", buf, pos)
        end = pos + width + max(length, 0)
    spans.append(Span(pos, end, kind_name, 2 if kafka_type == "string" else 4, flexible, nullable))
    return end


# -- plausible valid requests ----------------------------------------------------------


class Generator:
    """Builds plausible valid kio request dataclasses: existing topics and groups, small
    partitions and counts, valid record batches."""

    def __init__(self, rng: random.Random, min_items: int = 0) -> None:
        self.rng = rng
        self.min_items = min_items  # per array, down to the third level

    def request(self, api_key: int, version: int) -> Any:
        return self.entity(request_type(api_key, version), depth=0)

    def entity(self, entity_type: type, depth: int) -> Any:
        values = {}
        for field in dataclasses.fields(entity_type):
            if get_field_tag(field) is not None and self.rng.random() < 0.7:
                continue  # keep the default
            values[field.name] = self.field(field, depth)
        return entity_type(**values)

    def field(self, field: dataclasses.Field[Any], depth: int) -> Any:
        kind = classify_field(field)
        rng = self.rng
        if kind.is_array:
            if _array_is_nullable(field) and not self.min_items and rng.random() < 0.2:
                return None
            count = max(rng.choice((0, 1, 1, 1, 2, 3)), self.min_items) if depth < 3 else 0
            return tuple(self.value(field, kind, depth) for _ in range(count))
        if is_optional(field) and rng.random() < 0.15:
            return None
        return self.value(field, kind, depth)

    def value(self, field: dataclasses.Field[Any], kind: Any, depth: int) -> Any:
        if isinstance(kind, EntityField | EntityTupleField):
            return self.entity(kind.type_, depth + 1)
        return self.primitive(get_schema_field_type(field), field.name)

    def primitive(self, kafka_type: str, name: str) -> Any:
        rng = self.rng
        if kafka_type == "string":
            return self.string(name)
        if kafka_type == "records":
            if rng.random() < 0.8:
                records = [(b"k", b"v" * rng.randint(0, 40)) for _ in range(rng.randint(1, 3))]
                return build_batch(records, int(time.time() * 1000))
            return rng.randbytes(rng.randint(0, 70))
        if kafka_type == "bytes":
            return rng.randbytes(rng.randint(0, 16))
        if kafka_type == "bool":
            return rng.random() < 0.5
        if kafka_type == "uuid":
            return uuid.UUID(int=rng.getrandbits(128)) if rng.random() < 0.5 else uuid.UUID(int=0)
        if kafka_type == "float64":
            return rng.random()
        if kafka_type == "error_code":
            return ErrorCode.none
        if kafka_type in ("timedelta_i32", "timedelta_i64"):
            return datetime.timedelta(milliseconds=rng.choice((0, 10, 100, 300, -1)))
        if kafka_type == "datetime_i64":
            return datetime.datetime.now(datetime.UTC)
        return self.integer(kafka_type, name)

    def integer(self, kafka_type: str, name: str) -> int:
        rng = self.rng
        if "partition" in name or name in ("index", "partition_index"):
            return rng.choice((0, 0, 1, 2, 7))
        if name in ("num_partitions", "count"):
            return rng.choice((1, 2, 3, -1))
        if name == "replication_factor":
            return rng.choice((1, -1))
        if name == "acks":
            return rng.choice((-1, 1, 0))
        if "epoch" in name or "producer_id" in name or name.endswith("_id"):
            return rng.choice((-1, 0, 1))
        if "offset" in name:
            return rng.choice((0, 1, -1, -2, 5))
        if "timestamp" in name:
            return rng.choice((-1, -2, -3, 0, int(time.time() * 1000)))
        if "bytes" in name:
            return rng.choice((1, 1024, 1 << 20))
        if kafka_type.startswith("u"):
            return rng.randint(0, 10)
        return rng.choice((0, 1, -1, 5, 100))

    def string(self, name: str) -> str:
        rng = self.rng
        if "topic" in name or name in ("name", "resource_name"):
            return rng.choice((*TOPICS, *TOPICS, "fuzz-new-" + str(rng.randint(0, 9)), ""))
        if "group" in name:
            return GROUP
        if "transactional_id" in name:
            return "fuzz-txn"
        if name == "client_software_name":
            return rng.choice(("fuzz", "bad name!"))
        if name == "protocol_type":
            return "consumer"
        if name in ("key", "config_name"):
            return rng.choice(("retention.ms", "cleanup.policy", "segment.bytes", "nope"))
        if name == "value":
            return rng.choice(("1000", "compact", "-1", "x"))
        return "".join(rng.choice("abcxyz-._") for _ in range(rng.randint(0, 8)))


def encode_body(body: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    return out.getvalue()


# -- mutations -------------------------------------------------------------------------


def _int_bytes(width: int, signed: bool, value: int) -> bytes:
    return value.to_bytes(width, "big", signed=signed)


def _length_prefix(span: Span, length: int) -> bytes:
    """The prefix announcing ``length`` items or bytes (-1: null)."""
    if span.compact:
        return encode_uvarint(length + 1)
    width = 4 if span.kind in ("array", "bytes") else 2
    return length.to_bytes(width, "big", signed=True)


def _prefix_end(span: Span, body: bytes) -> int:
    if span.compact:
        return read_uvarint(body, span.start, len(body))[1]
    return span.start + (4 if span.kind in ("array", "bytes") else 2)


def _extremes(width: int, signed: bool) -> list[int]:
    if signed:
        low, high = -(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1
        return [low, low + 1, -1, -2, 0, 1, high, high - 1]
    return [0, 1, (1 << (8 * width)) - 1]


Mutation = Callable[[random.Random, bytes, list[Span]], "bytes | None"]


def _pick(rng: random.Random, spans: list[Span], *kinds: str) -> Span | None:
    chosen = [span for span in spans if span.kind in kinds]
    return rng.choice(chosen) if chosen else None


def null_length(rng: random.Random, body: bytes, spans: list[Span]) -> bytes | None:
    """A non-nullable array, string or bytes field sent as null."""
    span = _pick(rng, [s for s in spans if not s.nullable], "array", "string", "bytes")
    if span is None:
        return None
    return body[: span.start] + _length_prefix(span, -1) + body[span.end :]


def lying_length(rng: random.Random, body: bytes, spans: list[Span]) -> bytes | None:
    """A length prefix that does not match what follows (the content is kept)."""
    span = _pick(rng, spans, "array", "string", "bytes")
    if span is None:
        return None
    prefix_end = _prefix_end(span, body)
    value = rng.choice((-2, -1000, 2**15 - 1, 2**31 - 2, 1, 3, 1000))
    if span.compact:
        value = max(value, -1)
    elif span.kind == "string":
        value = max(min(value, 2**15 - 1), -(2**15))
    return body[: span.start] + _length_prefix(span, value) + body[prefix_end:]


def extreme_int(rng: random.Random, body: bytes, spans: list[Span]) -> bytes | None:
    """An integer field set to its minimum, maximum, -1, 0, ..."""
    span = _pick(rng, spans, "int")
    if span is None:
        return None
    value = _int_bytes(span.width, span.nullable, rng.choice(_extremes(span.width, span.nullable)))
    return body[: span.start] + value + body[span.end :]


def huge_string(rng: random.Random, body: bytes, spans: list[Span]) -> bytes | None:
    """A string of 250 to 40,000 characters (the most the encoding allows)."""
    span = _pick(rng, spans, "string")
    if span is None:
        return None
    limit = 40_000 if span.compact else 2**15 - 1
    size = rng.choice((250, 256, 1000, 32_767, limit))
    text = rng.choice(("a", "é", "x.", "-")) * size
    data = text.encode()[: min(size, limit)]
    return body[: span.start] + _length_prefix(span, len(data)) + data + body[span.end :]


def bad_utf8(rng: random.Random, body: bytes, spans: list[Span]) -> bytes | None:
    """A string that is not UTF-8."""
    span = _pick(rng, spans, "string")
    if span is None:
        return None
    data = rng.choice((b"\xff\xfe", b"a\xc3", b"\xed\xa0\x80", b"\x00"))
    return body[: span.start] + _length_prefix(span, len(data)) + data + body[span.end :]


def many_items(rng: random.Random, body: bytes, spans: list[Span]) -> bytes | None:
    """An array's items repeated into thousands."""
    arrays = [s for s in spans if s.kind == "array"]
    span = _pick(rng, [s for s in arrays if s.end > _prefix_end(s, body)], "array")
    if span is None:
        return None
    prefix_end = _prefix_end(span, body)
    count = read_uvarint(body, span.start, len(body))[0] - 1 if span.compact else (
        struct.unpack_from(">i", body, span.start)[0]
    )  # fmt: skip
    items = body[prefix_end : span.end]
    times = max(1, min(rng.choice((100, 1000, 10_000)), 200_000 // max(len(items), 1)))
    return (
        body[: span.start] + _length_prefix(span, count * times) + items * times + body[span.end :]
    )


def unknown_tags(rng: random.Random, body: bytes, spans: list[Span]) -> bytes | None:
    """Tagged fields no schema knows (Kafka ignores them), or a damaged tag section."""
    span = _pick(rng, spans, "tags")
    if span is None:
        return None
    tags = [
        (rng.randint(0, 40), rng.randbytes(rng.randint(0, 9))) for _ in range(rng.randint(1, 3))
    ]
    section = encode_uvarint(len(tags)) + b"".join(
        encode_uvarint(tag) + encode_uvarint(len(value)) + value for tag, value in tags
    )
    if rng.random() < 0.3:
        section = section[:-1]
    return body[: span.start] + section + body[span.end :]


def flip_bytes(rng: random.Random, body: bytes, spans: list[Span]) -> bytes | None:
    if not body:
        return None
    data = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data)


def truncate(rng: random.Random, body: bytes, spans: list[Span]) -> bytes | None:
    return body[: rng.randrange(len(body))] if body else None


def extend(rng: random.Random, body: bytes, spans: list[Span]) -> bytes | None:
    return body + rng.randbytes(rng.randint(1, 12))


def garbage(rng: random.Random, body: bytes, spans: list[Span]) -> bytes | None:
    return rng.randbytes(rng.randint(0, 64))


MUTATIONS: dict[str, Mutation] = {
    "null": null_length, "length": lying_length, "int": extreme_int, "string": huge_string,
    "utf8": bad_utf8, "many": many_items, "tags": unknown_tags, "flip": flip_bytes,
    "truncate": truncate, "extend": extend, "garbage": garbage,
}  # fmt: skip


def header_mutation(rng: random.Random, api_key: int, version: int, client_id: str) -> bytes:
    """A damaged request header: unknown API key or version, odd client ids."""
    choice = rng.randrange(5)
    if choice == 0:
        return encode_request_header(rng.choice((-1, 99, 1000, 32767)), 0, 1, client_id, 1)
    if choice == 1:
        return encode_request_header(api_key, rng.choice((-1, 99, 32767)), 1, client_id, 1)
    if choice == 2:
        return encode_request_header(api_key, version, 1, "c" * 32_767)
    if choice == 3:
        header = encode_request_header(api_key, version, 1, "ab")
        return header.replace(b"\x00\x02ab", b"\x00\x02\xff\xfe", 1)
    return encode_request_header(api_key, version, -(2**31), None)


# -- talking to the broker -------------------------------------------------------------


class Target:
    """One connection at a time to the broker; reconnects after the broker closes it."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.address = (host, port)
        self.timeout_s = timeout_s
        self.sock: socket.socket | None = None
        self.connections = 0

    def exchange(self, frame: bytes) -> str:
        """Send one framed request and a probe: "answered", "unanswered" (none before
        the probe's answer), "closed" or "timeout" (the connection is then dropped)."""
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=self.timeout_s)
            self.connections += 1
        answered = False
        try:
            self.sock.sendall(frame + PROBE)
            while True:
                response = self._read_frame()
                if response is None:
                    self.close()
                    return "closed"
                if struct.unpack_from(">i", response)[0] == PROBE_CORRELATION_ID:
                    return "answered" if answered else "unanswered"
                answered = True
        except TimeoutError:
            self.close()
            return "timeout"
        except OSError:
            self.close()
            return "closed"

    def _read_frame(self) -> bytes | None:
        head = self._read_exact(4)
        if head is None:
            return None
        return self._read_exact(struct.unpack(">i", head)[0])

    def _read_exact(self, size: int) -> bytes | None:
        assert self.sock is not None
        chunks, got = [], 0
        while got < size:
            chunk = self.sock.recv(min(size - got, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


# -- the broker's log ------------------------------------------------------------------


class LogCapture(logging.Handler):
    """Counts the broker's log records by level and classifies those with a traceback."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.levels: collections.Counter[str] = collections.Counter()
        self.tracebacks: collections.Counter[str] = collections.Counter()
        self.samples: dict[str, str] = {}
        self.sources: collections.Counter[str] = collections.Counter()  # by format string
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.levels[record.levelname] += 1
        self.sources[f"{record.levelname} {record.name}: {str(record.msg)[:60]}"] += 1
        message = self.last = record.getMessage()
        exc_info = record.exc_info
        if exc_info is None and "exception was never retrieved" not in message:
            return
        kind = _traceback_kind(exc_info, message)
        self.tracebacks[kind] += 1
        if kind not in self.samples:
            frames = "" if exc_info is None else "".join(traceback.format_tb(exc_info[2])[-3:])
            self.samples[kind] = f"{message[:300]}\n{frames}"

    @property
    def lines(self) -> int:
        return sum(self.levels.values())


def _traceback_kind(exc_info: Any, message: str) -> str:
    if exc_info is None or exc_info[1] is None:
        return message[:80]
    exc = exc_info[1]
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/sluice/" in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
    return f"{type(exc).__name__} at {where}"


# -- the run ---------------------------------------------------------------------------


@dataclasses.dataclass
class Report:
    requests: int = 0
    outcomes: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    by_mutation: dict[str, collections.Counter[str]] = dataclasses.field(default_factory=dict)
    closed_on_valid: list[str] = dataclasses.field(default_factory=list)
    connections: int = 0
    seconds: float = 0.0
    log_lines: int = 0
    log_levels: dict[str, int] = dataclasses.field(default_factory=dict)
    log_sources: dict[str, int] = dataclasses.field(default_factory=dict)
    tracebacks: dict[str, int] = dataclasses.field(default_factory=dict)
    samples: dict[str, str] = dataclasses.field(default_factory=dict)
    serves_after: bool = False

    @property
    def traceback_count(self) -> int:
        return sum(self.tracebacks.values())

    def summary(self, verbose: bool = False) -> str:
        lines = [
            f"{self.requests} requests on {self.connections} connections in {self.seconds:.0f} s: "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items())),
            f"log lines (INFO and above): {self.log_lines} "
            + str(dict(sorted(self.log_levels.items()))),
            *(f"  {count:6d}  {source}" for source, count in self.log_sources.items()),
            f"tracebacks: {self.traceback_count} of {len(self.tracebacks)} kinds",
        ]
        for kind, count in sorted(self.tracebacks.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {count:6d}  {kind}")
        if self.samples and verbose:
            lines.append("first of each kind:")
            lines.extend(f"  {sample}" for sample in self.samples.values())
        lines.append(f"valid requests that closed the connection: {len(self.closed_on_valid)}")
        lines.extend(f"  {label}" for label in self.closed_on_valid[:20])
        lines.append(f"broker still serves a producer and a consumer: {self.serves_after}")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["outcomes"] = dict(self.outcomes)
        data["by_mutation"] = {k: dict(v) for k, v in self.by_mutation.items()}
        data["traceback_count"] = self.traceback_count
        return data


def served_versions() -> list[tuple[int, int]]:
    from sluice.server.apis import registry

    return [
        (key, version)
        for key, spec in registry().specs.items()
        for version in range(spec.versions.min_version, spec.versions.max_version + 1)
    ]


def cases(seed: int, mutations_per_version: int) -> Iterator[tuple[str, bool, bytes]]:
    """(label, is valid, framed request) in rounds over every served API version: one
    valid request, then mutations of others. Endless; deterministic for a seed."""
    rng = random.Random(seed)
    generator = Generator(rng)
    correlation_id = 0
    for round_number in range(1 << 62):
        for api_key, version in served_versions():
            name = f"{ApiKey(api_key).name}v{version}"
            for attempt in range(1 + mutations_per_version):
                correlation_id = (correlation_id + 1) & 0x3FFF_FFFF
                header = encode_request_header(api_key, version, correlation_id, "fuzz")
                body = encode_body(generator.request(api_key, version))
                if attempt == 0:
                    yield f"{name} valid #{round_number}", True, _frame(header + body)
                    continue
                if rng.random() < 0.08:
                    bad_header = header_mutation(rng, api_key, version, "fuzz")
                    yield f"{name} header", False, _frame(bad_header + body)
                    continue
                spans = layout(request_type(api_key, version), body)
                label, mutated = _mutate(rng, body, spans)
                yield f"{name} {label}", False, _frame(header + mutated)


def sweep(seed: int) -> Iterator[tuple[str, bool, bytes]]:
    """(label, is valid, framed request): for every served API version, one valid request,
    then every integer field of it set to each extreme value, every non-nullable array,
    string and bytes field sent as null, and every string empty and at the longest its
    encoding allows, one field at a time. Finite; deterministic for a seed."""
    rng = random.Random(seed)
    generator = Generator(rng, min_items=1)
    for api_key, version in served_versions():
        name = f"{ApiKey(api_key).name}v{version}"
        header = encode_request_header(api_key, version, 1, "fuzz")
        body = encode_body(generator.request(api_key, version))
        yield f"{name} valid", True, _frame(header + body)
        for span in layout(request_type(api_key, version), body):
            for label, mutated in _sweep_span(span, body):
                yield f"{name} sweep-{label}", False, _frame(header + mutated)


def _sweep_span(span: Span, body: bytes) -> Iterator[tuple[str, bytes]]:
    head, tail = body[: span.start], body[span.end :]
    if span.kind == "int":
        for value in _extremes(span.width, span.nullable):
            yield "int", head + _int_bytes(span.width, span.nullable, value) + tail
    if span.kind in ("array", "string", "bytes") and not span.nullable:
        yield "null", head + _length_prefix(span, -1) + tail
    if span.kind == "string":
        data = b"n" * (40_000 if span.compact else 2**15 - 1)
        yield "string", head + _length_prefix(span, len(data)) + data + tail
        yield "empty", head + _length_prefix(span, 0) + tail


def _mutate(rng: random.Random, body: bytes, spans: list[Span]) -> tuple[str, bytes]:
    names = list(MUTATIONS)
    for _ in range(8):
        label = rng.choice(names)
        mutated = MUTATIONS[label](rng, body, spans)
        if mutated is not None and mutated != body:
            return label, mutated
    return "garbage", rng.randbytes(rng.randint(1, 32))


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def prepare(bootstrap: str) -> None:
    """The topics and group the plausible requests name."""
    from sluice.client import Admin, NewTopic

    admin = Admin({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic(topic, 3, 1) for topic in TOPICS])
    finally:
        admin.close()


def serves_clients(bootstrap: str) -> bool:
    """A producer and a consumer (Sluice's own) still work."""
    from sluice.client import Consumer, Producer

    topic = "fuzz-after"
    producer = Producer({"bootstrap.servers": bootstrap})
    try:
        producer.send(topic, b"still-serving").get(timeout=20)
    finally:
        producer.close()
    consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([(topic, 0)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for record in consumer.poll(0.5):
                if record.value == b"still-serving":
                    return True
    finally:
        consumer.close()
    return False


def run(
    bootstrap: str,
    capture: LogCapture,
    requests: Iterable[tuple[str, bool, bytes]],
    *,
    seconds: float = 600,
    max_requests: int | None = None,
    timeout_s: float = 2.0,
) -> Report:
    """Send ``requests`` (from :func:`sweep`, :func:`cases` or both) to the broker at
    ``bootstrap``, whose log goes to ``capture``, until they end, ``seconds`` pass or
    ``max_requests`` are sent; then check that it still serves clients."""
    host, port = bootstrap.rsplit(":", 1)
    target = Target(host, int(port), timeout_s)
    report = Report()
    start = time.monotonic()
    try:
        for label, valid, frame in requests:
            if time.monotonic() - start > seconds:
                break
            if max_requests is not None and report.requests >= max_requests:
                break
            outcome = target.exchange(frame)
            report.requests += 1
            report.outcomes[outcome] += 1
            mutation = label.split(" ", 1)[1].split(" #")[0]
            report.by_mutation.setdefault(mutation, collections.Counter())[outcome] += 1
            if valid and outcome == "closed":
                report.closed_on_valid.append(f"{label}: {capture.last[:200]}")
    finally:
        target.close()
    report.seconds = time.monotonic() - start
    report.connections = target.connections
    report.serves_after = serves_clients(bootstrap)
    report.log_lines = capture.lines
    report.log_levels = dict(capture.levels)
    report.log_sources = dict(capture.sources.most_common(12))
    report.tracebacks = dict(capture.tracebacks)
    report.samples = dict(capture.samples)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--requests", type=int, default=None, help="stop after this many")
    parser.add_argument("--mutations", type=int, default=6, help="per valid request")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    parser.add_argument("--verbose", action="store_true", help="show a traceback of each kind")
    args = parser.parse_args(argv)

    from sluice.testing import EmbeddedBroker

    capture = LogCapture()
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    root.addHandler(capture)
    with EmbeddedBroker() as broker:
        prepare(broker.bootstrap_servers)
        capture.levels.clear()
        capture.sources.clear()
        requests = itertools.chain(sweep(args.seed), cases(args.seed, args.mutations))
        report = run(
            broker.bootstrap_servers, capture, requests, seconds=args.seconds,
            max_requests=args.requests,
        )  # fmt: skip
    print(report.summary(args.verbose))
    if args.json is not None:
        args.json.write_text(json.dumps(report.as_json(), indent=2, default=str))
    return 1 if report.traceback_count or not report.serves_after else 0


if __name__ == "__main__":
    sys.exit(main())
