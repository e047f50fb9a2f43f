"""The structural guard in front of kio's native parser: hostile lengths, unknown tags."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import random
import struct
import typing
import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.index import api_key_map
from kio.static.primitive import i16, i32, i32Timedelta, i64

from sluice.protocol import (
    ApiVersionRange,
    MalformedRequestError,
    VersionTable,
    decode_request,
    encode_request,
    encode_request_header,
    kio_version_range,
    request_type,
)
from sluice.protocol.guard import check_request
from sluice.server.apis import registry

SERVED = registry().versions  # what a broker accepts and advertises


DETERMINISTIC = settings(derandomize=True, max_examples=150, deadline=None)

# Every version kio can decode, for every API: lets the tests reach all schemas.
ALL_KIO = VersionTable(ApiVersionRange(key, *kio_version_range(key)) for key in api_key_map)  # type: ignore[misc]


def schema(api: str, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def produce_request(version: int, records: bytes) -> Any:
    m = schema("produce", version, "request")
    partition = m.PartitionProduceData(index=i32(2), records=records)
    return m.ProduceRequest(
        transactional_id="tx",
        acks=i16(-1),
        timeout=i32Timedelta.parse(timedelta(seconds=30)),
        topic_data=(m.TopicProduceData(name="orders", partition_data=(partition,)),),
    )


# -- malformed and hostile bodies ------------------------------------------------------------


def test_every_truncation_is_malformed() -> None:
    data = encode_request(1, produce_request(9, b"abc"))[4:]
    header_end = 8 + 2 + len("sluice") + 1
    for cut in range(header_end, len(data)):
        with pytest.raises(MalformedRequestError):
            decode_request(data[:cut], SERVED)


@pytest.mark.parametrize(
    "body",
    [
        b"\x00" + b"\xff\xff\x00\x00\x00\x00" + b"\xff\xff\xff\xff\x0f",  # 2**32 topics
        b"\x00" + b"\xff\xff\x00\x00\x00\x00" + b"\x80\x80\x80\x80\x7f",  # 34 bits
        b"\x00" + b"\xff\xff\x00\x00\x00\x00" + b"\x02\x02t" + b"\xff\xff\xff\xff\x0f",
    ],
)
def test_huge_array_lengths_are_rejected_not_allocated(body: bytes) -> None:
    # kio's native reader would Vec::with_capacity() these lengths and abort.
    with pytest.raises(MalformedRequestError, match="cannot fit"):
        decode_request(encode_request_header(0, 9, 1, None) + body, SERVED)


def test_huge_legacy_array_length_is_rejected() -> None:
    body = b"\xff\xff" + b"\xff\xff\x00\x00\x00\x00" + b"\x7f\xff\xff\xff"
    with pytest.raises(MalformedRequestError, match="cannot fit"):
        decode_request(encode_request_header(0, 3, 1, None) + body, SERVED)


def test_seeded_garbage_for_every_schema_is_malformed_or_decoded() -> None:
    rng = random.Random(20240611)
    outcomes = {"decoded": 0, "malformed": 0}
    for api_key in sorted(api_key_map):
        low, high = kio_version_range(api_key)  # type: ignore[misc]
        for version in range(low, high + 1):
            header = encode_request_header(api_key, version, 1, "c")
            for _ in range(30):
                body = rng.randbytes(rng.randint(0, 48))
                if rng.random() < 0.5:  # plant a big length near the start
                    at = rng.randint(0, len(body))
                    body = body[:at] + rng.choice([b"\xff\xff\xff\x7f", b"\xff" * 5]) + body[at:]
                try:
                    decode_request(header + body, ALL_KIO)
                    outcomes["decoded"] += 1
                except MalformedRequestError:
                    outcomes["malformed"] += 1
    assert outcomes["malformed"] > outcomes["decoded"] > 0


@DETERMINISTIC
@given(st.data(), st.binary(max_size=64))
def test_random_bodies_raise_only_malformed(data: st.DataObject, body: bytes) -> None:
    api_key = data.draw(st.sampled_from(sorted(api_key_map)))
    low, high = kio_version_range(api_key)  # type: ignore[misc]
    version = data.draw(st.integers(low, high))
    with contextlib.suppress(MalformedRequestError):
        decode_request(encode_request_header(api_key, version, 1, "c") + body, ALL_KIO)


# -- unknown tagged fields --------------------------------------------------------------------


def fetch_request_v15(replica_state: bool) -> Any:
    m = schema("fetch", 15, "request")
    fields: dict[str, Any] = {}
    if replica_state:
        fields["replica_state"] = m.ReplicaState(replica_id=i32(3), replica_epoch=i64(9))
    return m.FetchRequest(
        max_wait=i32Timedelta.parse(timedelta(milliseconds=500)),
        min_bytes=i32(1),
        topics=(),
        forgotten_topics_data=(),
        **fields,
    )


def test_unknown_tagged_fields_are_ignored_as_kafka_does() -> None:
    body = fetch_request_v15(replica_state=True)
    data = encode_request(1, body, client_id=None)
    known_tag = b"\x01\x0d" + struct.pack(">iq", 3, 9) + b"\x00"
    assert data.endswith(b"\x01\x01\x01" + b"\x01" + known_tag)  # sanity: kio's layout
    head = data[4 : -len(b"\x01" + known_tag)]
    # An unknown tag (7) nested in the known one, and an unknown top-level tag (9).
    # Cutting tag 7 out leaves the known tag's size (17) stale, which kio ignores.
    nested = b"\x01\x11" + struct.pack(">iq", 3, 9) + b"\x01\x07\x02ab"
    frame = head + b"\x02" + nested + b"\x09\x01z"
    assert decode_request(frame, ALL_KIO).body == body


def test_unknown_tag_in_an_array_element() -> None:
    m = schema("fetch", 12, "request")
    partition = m.FetchPartition(partition=i32(0), fetch_offset=i64(5), partition_max_bytes=i32(9))
    body = m.FetchRequest(
        max_wait=i32Timedelta.parse(timedelta(milliseconds=1)),
        min_bytes=i32(1),
        topics=(m.FetchTopic(topic="t", partitions=(partition,)),),
        forgotten_topics_data=(),
    )
    data = encode_request(1, body)[4:]
    assert data.endswith(b"\x00\x00\x01\x01\x00")
    frame = data[:-5] + b"\x02\x05\x01X\x03\x00" + b"\x00\x01\x01\x00"
    assert decode_request(frame, SERVED).body == body


def test_tagged_field_size_mismatch_is_malformed() -> None:
    data = encode_request(1, fetch_request_v15(replica_state=True), client_id=None)
    known = b"\x01\x0d" + struct.pack(">iq", 3, 9) + b"\x00"
    broken = data[4 : -len(known)] + b"\x01\x0e" + known[2:] + b"\x00"
    with pytest.raises(MalformedRequestError, match="does not match its size"):
        decode_request(broken, ALL_KIO)


def test_topic_ids_round_trip() -> None:
    m = schema("fetch", 13, "request")
    topic_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    body = m.FetchRequest(
        max_wait=i32Timedelta.parse(timedelta(milliseconds=1)),
        min_bytes=i32(1),
        topics=(m.FetchTopic(topic_id=topic_id, partitions=()),),
        forgotten_topics_data=(),
    )
    assert decode_request(encode_request(1, body)[4:], ALL_KIO).body == body


def test_check_request_returns_the_buffer_itself_when_nothing_is_cut() -> None:
    data = encode_request(1, produce_request(9, b"abc"), client_id=None)[4:]
    body_type = request_type(0, 9)
    buf, end = check_request(body_type, data, 11)
    assert buf is data
    assert end == len(data)


def test_check_request_cuts_unknown_tags_into_a_copy() -> None:
    data = encode_request(1, produce_request(9, b"abc"), client_id=None)[4:]
    assert data.endswith(b"\x00")
    tagged = data[:-1] + b"\x01\x05\x02hi" + b""
    buf, end = check_request(request_type(0, 9), tagged, 11)
    assert buf == data
    assert end == len(data)
    extra = tagged + b"trailing"
    buf, end = check_request(request_type(0, 9), extra, 11)
    assert buf == data + b"trailing"
    assert end == len(data)


# -- null where the schema allows none; durations kio cannot hold ---------------------------


def _array_paths(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths (field names and item indexes) of every array field inside an entity."""
    found = []
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        if isinstance(item, tuple):
            found.append((*path, f.name))
            for i, element in enumerate(item):
                if dataclasses.is_dataclass(element):
                    found.extend(_array_paths(element, (*path, f.name, i)))
        elif dataclasses.is_dataclass(item):
            found.extend(_array_paths(item, (*path, f.name)))
    return found


def _with_null(value: Any, path: tuple[Any, ...]) -> tuple[Any, dataclasses.Field[Any]]:
    """``value`` with the array at ``path`` set to None, and that array's field."""
    name = path[0]
    field = next(f for f in dataclasses.fields(value) if f.name == name)
    if len(path) == 1:
        return dataclasses.replace(value, **{name: None}), field
    inner = getattr(value, name)
    if isinstance(inner, tuple):
        element, field = _with_null(inner[path[1]], path[2:])
        items = (*inner[: path[1]], element, *inner[path[1] + 1 :])
        return dataclasses.replace(value, **{name: items}), field
    nested, field = _with_null(inner, path[1:])
    return dataclasses.replace(value, **{name: nested}), field


SERVED_SCHEMAS = sorted(
    (key, version)
    for key, spec in SERVED.items()
    for version in range(spec.min_version, spec.max_version + 1)
)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.data())
def test_null_arrays_decode_only_where_the_schema_allows_null(data: st.DataObject) -> None:
    api_key, version = data.draw(st.sampled_from(SERVED_SCHEMAS))
    body = data.draw(st.from_type(request_type(api_key, version)))
    paths = _array_paths(body)
    if not paths:
        return
    nulled, field = _with_null(body, data.draw(st.sampled_from(paths)))
    frame = encode_request(1, nulled)[4:]  # kio writes None as length -1 (compact: 0)
    if type(None) in typing.get_args(field.type):
        assert decode_request(frame, SERVED).body == nulled
    else:
        with pytest.raises(MalformedRequestError, match=f"non-nullable field {field.name} "):
            decode_request(frame, SERVED)


@pytest.mark.parametrize(
    ("field_name", "api", "version"),
    [("topics", "create_topics", 2), ("topics", "delete_records", 2), ("partitions", "fetch", 4)],
)
def test_a_null_non_nullable_array_is_malformed(field_name: str, api: str, version: int) -> None:
    header = encode_request_header(api_key_of(api), version, 1, "c")
    compact = version >= 2 and api == "delete_records"
    null = b"\x00" if compact else b"\xff\xff\xff\xff"
    if api == "fetch":  # replica_id, max_wait, min_bytes, max_bytes, isolation, one topic
        body = struct.pack(">iiiib", -1, 0, 1, 100, 0) + struct.pack(">i", 1) + b"\x00\x01t" + null
    elif api == "create_topics":
        body = null + struct.pack(">ib", 1000, 0)
    else:
        body = null + struct.pack(">i", 1000) + b"\x00"
    with pytest.raises(MalformedRequestError, match=f"non-nullable field {field_name} "):
        decode_request(header + body, SERVED)


def api_key_of(api: str) -> int:
    return {"create_topics": 19, "delete_records": 21, "fetch": 1}[api]


@pytest.mark.parametrize(
    ("wire", "decoded"),
    [
        (-1, -1),
        (2**40, 2**40),
        ((2**63 - 1) // 1000, (2**63 - 1) // 1000),
        (2**63 - 1, (2**63 - 1) // 1000),
        (-(2**63), -((2**63 - 1) // 1000)),
    ],
)
def test_an_int64_duration_beyond_what_kio_holds_is_clamped(wire: int, decoded: int) -> None:
    m = schema("offset_commit", 2, "request")
    partition = m.OffsetCommitRequestPartition(
        partition_index=i32(0), committed_offset=i64(5), committed_metadata=""
    )
    body = m.OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=i32(-1), member_id="",
        retention_time=timedelta(0),
        topics=(m.OffsetCommitRequestTopic(name="t", partitions=(partition,)),),
    )  # fmt: skip
    frame = bytearray(encode_request(1, body)[4:])
    at = frame.index(b"\x00" * 8, 8 + 2 + 6 + 2 + 1 + 4 + 2)  # retention_time, after the ids
    frame[at : at + 8] = struct.pack(">q", wire)
    request = decode_request(bytes(frame), SERVED)
    assert request.body.retention_time == timedelta(milliseconds=decoded)  # type: ignore[attr-defined]
    assert request.body.topics == body.topics  # type: ignore[attr-defined]
