"""The hand-written Fetch response encoder, byte for byte against kio's general codec."""

from __future__ import annotations

import dataclasses
import importlib
import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.static.primitive import i32, i32Timedelta, i64

from sluice.protocol import (
    ErrorCode,
    encode_fetch_response,
    encode_response,
    encode_response_segments,
)
from sluice.protocol.fetch import INLINE_RECORDS_MAX


def encode_response_kio(correlation_id: int, response: Any) -> bytes:
    """kio's general codec, the reference for the hand-written encoder."""
    return encode_response(correlation_id, response, use_kio=True)


DETERMINISTIC = settings(derandomize=True, max_examples=60, deadline=None)
VERSIONS = range(4, 19)


def schema(version: int) -> Any:
    return importlib.import_module(f"kio.schema.fetch.v{version}.response")


def map_partitions(response: Any, change: Any) -> Any:
    topics = tuple(
        dataclasses.replace(topic, partitions=tuple(change(p) for p in topic.partitions))
        for topic in response.responses
    )
    return dataclasses.replace(response, responses=topics)


def response_with(version: int, records: Any, **partition_fields: Any) -> Any:
    m = schema(version)
    partition = m.PartitionData(
        partition_index=i32(3),
        error_code=ErrorCode.none,
        high_watermark=i64(100),
        aborted_transactions=None,
        records=records,
        **partition_fields,
    )
    name: dict[str, Any] = {"topic_id": uuid.UUID(int=7)} if version >= 13 else {"topic": "t"}
    fields: dict[str, Any] = {}
    if version >= 7:
        fields = {"error_code": ErrorCode.none, "session_id": i32(77)}
    return m.FetchResponse(
        throttle_time=i32Timedelta.parse(timedelta(milliseconds=12)),
        responses=(m.FetchableTopicResponse(partitions=(partition,), **name),),
        **fields,
    )


@DETERMINISTIC
@given(st.data(), st.integers(-(2**31), 2**31 - 1))
def test_generated_responses_match_kio(data: st.DataObject, correlation_id: int) -> None:
    version = data.draw(st.sampled_from(VERSIONS))
    response = data.draw(st.from_type(schema(version).FetchResponse))
    expected = encode_response_kio(correlation_id, response)
    assert b"".join(encode_fetch_response(correlation_id, response)) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_large_records_are_referenced_not_copied(version: int) -> None:
    big = bytes(range(256)) * (2 * INLINE_RECORDS_MAX // 256)
    small = b"s" * (INLINE_RECORDS_MAX - 1)
    response = response_with(version, big)
    segments = encode_fetch_response(5, response)
    assert any(segment is big for segment in segments)
    assert b"".join(segments) == encode_response_kio(5, response)
    inline = encode_fetch_response(5, response_with(version, small))
    assert len(inline) == 1


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_memoryview_records(version: int) -> None:
    backing = bytearray(b"x" * 10_000)
    view = memoryview(backing)[100:9_100]
    segments = encode_fetch_response(1, response_with(version, view))
    assert any(segment is view for segment in segments)
    assert b"".join(segments) == encode_response_kio(1, response_with(version, bytes(view)))


@pytest.mark.parametrize("version", [12, 13, 16, 18])
def test_non_default_tagged_fields_match_kio(version: int) -> None:
    m = schema(version)
    response = response_with(
        version,
        b"r" * 10,
        diverging_epoch=m.EpochEndOffset(epoch=i32(4), end_offset=i64(-1)),
        current_leader=m.LeaderIdAndEpoch(leader_id=i32(2), leader_epoch=i32(8)),
        snapshot_id=m.SnapshotId(end_offset=i64(-1), epoch=i32(0)),
    )
    if version >= 16:
        endpoints = (
            m.NodeEndpoint(node_id=i32(2), host="b2", port=i32(9092), rack=None),
            m.NodeEndpoint(node_id=i32(3), host="b3", port=i32(9093), rack="r1"),
        )
        response = dataclasses.replace(response, node_endpoints=endpoints)
    assert b"".join(encode_fetch_response(1, response)) == encode_response_kio(1, response)


@pytest.mark.parametrize("version", VERSIONS)
def test_segments_entry_point_uses_the_fast_path(version: int) -> None:
    big = b"b" * INLINE_RECORDS_MAX
    segments = encode_response_segments(2, response_with(version, big))
    assert any(segment is big for segment in segments)


def test_null_records_and_aborted_transactions() -> None:
    for version in VERSIONS:
        m = schema(version)
        aborted = (m.AbortedTransaction(producer_id=i64(9), first_offset=i64(1)),)
        response = map_partitions(
            response_with(version, None),
            lambda p, a=aborted: dataclasses.replace(p, aborted_transactions=a),
        )
        assert b"".join(encode_fetch_response(1, response)) == encode_response_kio(1, response)


def test_rejects_other_responses() -> None:
    other = importlib.import_module("kio.schema.api_versions.v0.response").ApiVersionsResponse(
        error_code=ErrorCode.none, api_keys=()
    )
    with pytest.raises(ValueError):
        encode_fetch_response(1, other)


def test_overlong_legacy_topic_name() -> None:
    response = dataclasses.replace(
        response_with(11, b""),
        responses=(schema(11).FetchableTopicResponse(topic="x" * 40_000, partitions=()),),
    )
    with pytest.raises(ValueError):
        encode_fetch_response(1, response)


@pytest.mark.parametrize("version", [4, 12, 13])
def test_encode_response_uses_the_fast_path_for_fetch(version: int) -> None:
    response = response_with(version, b"q" * (INLINE_RECORDS_MAX + 1))
    assert encode_response(3, response) == encode_response_kio(3, response)


def test_is_file_region_agrees_with_the_protocol_check(tmp_path: Any) -> None:
    """The per-type answer equals ``isinstance(x, FileRegion)``, asked twice per type."""
    import mmap

    from sluice.log.file_records import FileRecords
    from sluice.protocol.fetch import FileRegion, is_file_region, segment_size

    records = FileRecords.open(tmp_path / "0.log")
    records.append(b"abcdef")
    mapped = mmap.mmap(-1, 16)
    candidates: list[Any] = [
        b"x",
        bytearray(b"xy"),
        memoryview(b"xyz"),
        records.slice(1, 4),
        mapped,
        object(),
        "s",
    ]
    for _ in range(2):
        for value in candidates:
            assert is_file_region(value) == isinstance(value, FileRegion)
    assert [segment_size(v) for v in candidates[:5]] == [1, 2, 3, 4, 16]
    mapped.close()
    records.close()
