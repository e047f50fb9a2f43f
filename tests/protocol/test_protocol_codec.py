"""Decoding requests and encoding responses through kio, with Sluice's checks around it."""

from __future__ import annotations

import importlib
import struct
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.index import api_key_map
from kio.serial import entity_reader
from kio.static.primitive import i16, i32, i32Timedelta, i64

from sluice.protocol import (
    ApiKey,
    ApiVersionRange,
    ErrorCode,
    FrameDecoder,
    UnknownApiKeyError,
    UnsupportedApiVersionsError,
    UnsupportedVersionError,
    VersionTable,
    decode_request,
    encode_request,
    encode_request_header,
    encode_response,
    encode_response_segments,
    kio_version_range,
    request_type,
)
from sluice.server.apis import registry

SERVED = registry().versions  # what a broker accepts and advertises


DETERMINISTIC = settings(derandomize=True, max_examples=150, deadline=None)
FEW = settings(derandomize=True, max_examples=15, deadline=None)

# Every version kio can decode, for every API: lets the tests reach all schemas.
ALL_KIO = VersionTable(ApiVersionRange(key, *kio_version_range(key)) for key in api_key_map)  # type: ignore[misc]


def schema(api: str, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def frame_of(data: bytes) -> memoryview:
    (frame,) = FrameDecoder().feed(data)
    return frame


def body_of(data: bytes, client_id: str | None = "sluice") -> bytes:
    """The body of an encoded request frame, after the size prefix and header."""
    header_size = 10 + (len(client_id.encode()) if client_id else 0)
    flexible = data[4 + header_size : 4 + header_size + 1] == b"\x00"
    return data[4 + header_size + (1 if flexible else 0) :]


def produce_request(version: int, records: bytes) -> Any:
    m = schema("produce", version, "request")
    partition = m.PartitionProduceData(index=i32(2), records=records)
    return m.ProduceRequest(
        transactional_id="tx" if version >= 3 else None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(timedelta(seconds=30)),
        topic_data=(m.TopicProduceData(name="orders", partition_data=(partition,)),),
    )


# -- round trips ------------------------------------------------------------------------

ROUND_TRIP_CASES = [
    (ApiKey.PRODUCE, (3, 7, 8, 9, 11)),
    (ApiKey.FETCH, (4, 7, 11, 12, 13, 16)),
    (ApiKey.METADATA, (0, 1, 4, 8, 9, 10, 12)),
    (ApiKey.API_VERSIONS, (0, 1, 2, 3, 4)),
    (ApiKey.LIST_OFFSETS, (1, 2, 4, 5, 6, 7)),
    (ApiKey.CREATE_TOPICS, (2, 4, 5, 7)),
]


@pytest.mark.parametrize(
    ("api_key", "api_version"),
    [(key, version) for key, versions in ROUND_TRIP_CASES for version in versions],
)
def test_round_trip_generated_requests(api_key: int, api_version: int) -> None:
    body_type = request_type(api_key, api_version)

    @FEW
    @given(st.from_type(body_type), st.integers(-(2**31), 2**31 - 1))
    def check(body: Any, correlation_id: int) -> None:
        request = decode_request(frame_of(encode_request(correlation_id, body)), ALL_KIO)
        assert request.body == body
        assert request.header.correlation_id == correlation_id
        assert request.header.client_id == "sluice"
        assert (request.api_key, request.api_version) == (api_key, api_version)

    check()


@settings(derandomize=True, max_examples=80, deadline=None)
@given(st.data())
def test_round_trip_every_kio_request_schema(data: st.DataObject) -> None:
    api_key = data.draw(st.sampled_from(sorted(api_key_map)))
    low, high = kio_version_range(api_key)  # type: ignore[misc]
    version = data.draw(st.integers(low, high))
    body = data.draw(st.from_type(request_type(api_key, version)))
    assert decode_request(frame_of(encode_request(7, body)), ALL_KIO).body == body


@pytest.mark.parametrize("version", [3, 9])
def test_produce_records_are_opaque_bytes(version: int) -> None:
    records = bytes(range(256)) * 64
    body = produce_request(version, records)
    request = decode_request(frame_of(encode_request(1, body, client_id=None)), SERVED)
    decoded = request.body.topic_data[0].partition_data[0].records  # type: ignore[attr-defined]
    assert isinstance(decoded, memoryview) and decoded.readonly  # a view of the frame
    assert decoded == records
    assert request.header.client_id is None
    assert request.response_type is schema("produce", version, "response").ProduceResponse


def test_decode_accepts_bytes_bytearray_and_memoryview() -> None:
    data = encode_request(3, produce_request(9, b"r" * 10))
    for frame in (data[4:], bytearray(data[4:]), memoryview(data)[4:]):
        assert decode_request(frame, SERVED).header.correlation_id == 3


def test_trailing_bytes_are_ignored_as_kafka_does() -> None:
    data = encode_request(3, produce_request(9, b"r"))
    assert decode_request(data[4:] + b"junk", SERVED).body == produce_request(9, b"r")


# -- response headers and tagged fields ---------------------------------------------------


def api_versions_response_v3(**tags: Any) -> Any:
    m = schema("api_versions", 3, "response")
    return m.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=(m.ApiVersion(api_key=i16(18), min_version=i16(0), max_version=i16(4)),),
        throttle_time=i32Timedelta.parse(timedelta(0)),
        **tags,
    )


def test_api_versions_response_uses_header_v0_even_when_flexible() -> None:
    data = encode_response(0x0A0B0C0D, api_versions_response_v3())
    # size, correlation id, then the body at once: no tagged-field byte in the header.
    assert data == (
        struct.pack(">i", len(data) - 4)
        + b"\x0a\x0b\x0c\x0d"  # header v0
        + b"\x00\x00"  # error code
        + b"\x02"  # one api key (compact array)
        + b"\x00\x12\x00\x00\x00\x04\x00"  # ApiVersions 0-4, no tags
        + b"\x00\x00\x00\x00"  # throttle time
        + b"\x00"  # no tagged fields: the features hold their defaults
    )


def test_flexible_responses_use_header_v1() -> None:
    m = schema("metadata", 9, "response")
    response = m.MetadataResponse(
        throttle_time=i32Timedelta.parse(timedelta(0)), brokers=(), topics=()
    )
    data = encode_response(5, response)
    assert data[4:9] == b"\x00\x00\x00\x05\x00"
    legacy = schema("metadata", 8, "response").MetadataResponse(
        throttle_time=i32Timedelta.parse(timedelta(0)), brokers=(), topics=()
    )
    assert encode_response(5, legacy)[4:12] == b"\x00\x00\x00\x05\x00\x00\x00\x00"


def test_non_default_tagged_fields_are_emitted() -> None:
    m = schema("api_versions", 3, "response")
    data = encode_response(1, api_versions_response_v3(finalized_features_epoch=i64(7)))
    assert data.endswith(b"\x01\x01\x08" + struct.pack(">q", 7))
    features = (m.SupportedFeatureKey(name="f", min_version=i16(1), max_version=i16(2)),)
    data = encode_response(1, api_versions_response_v3(supported_features=features))
    assert data.endswith(b"\x01\x00\x08\x02\x02f\x00\x01\x00\x02\x00")


def test_default_tagged_fields_are_omitted_in_fetch_v12_partitions() -> None:
    # librdkafka 2.0.2 (Debian's kcat) mis-skips non-empty tagged fields, so the
    # defaults (diverging_epoch, current_leader, snapshot_id) must not be sent.
    m = schema("fetch", 12, "response")
    partition = m.PartitionData(
        partition_index=i32(0),
        error_code=ErrorCode.none,
        high_watermark=i64(10),
        aborted_transactions=None,
        records=b"RR",
    )
    response = m.FetchResponse(
        throttle_time=i32Timedelta.parse(timedelta(0)),
        error_code=ErrorCode.none,
        responses=(m.FetchableTopicResponse(topic="t", partitions=(partition,)),),
    )
    expected_body = (
        b"\x00\x00\x00\x00"  # throttle
        + b"\x00\x00"  # error code
        + b"\x00\x00\x00\x00"  # session id
        + b"\x02"  # one topic
        + b"\x02t"  # name
        + b"\x02"  # one partition
        + struct.pack(">ihqqq", 0, 0, 10, -1, -1)
        + b"\x00"  # aborted transactions: null
        + struct.pack(">i", -1)  # preferred read replica
        + b"\x03RR"  # records
        + b"\x00"  # partition: no tagged fields
        + b"\x00"  # topic: no tagged fields
        + b"\x00"  # response: no tagged fields
    )
    data = encode_response(9, response, use_kio=True)
    assert data == struct.pack(">i", len(data) - 4) + b"\x00\x00\x00\x09\x00" + expected_body
    assert b"".join(encode_response_segments(9, response)) == data
    assert encode_response(9, response) == data


def test_produce_v10_with_default_tags_encodes_like_v9() -> None:
    def response(version: int) -> Any:
        m = schema("produce", version, "response")
        partition = m.PartitionProduceResponse(
            index=i32(0), error_code=ErrorCode.none, base_offset=i64(42), record_errors=()
        )
        return m.ProduceResponse(
            responses=(m.TopicProduceResponse(name="t", partition_responses=(partition,)),),
            throttle_time=i32Timedelta.parse(timedelta(0)),
        )

    assert encode_response(1, response(10)) == encode_response(1, response(9))


def test_segments_of_other_responses_are_one_buffer() -> None:
    response = api_versions_response_v3()
    assert encode_response_segments(4, response) == [encode_response(4, response)]


# -- unknown keys and unsupported versions -------------------------------------------------


def test_unknown_api_key() -> None:
    frame = encode_request_header(4, 5, 6, "c", header_version=1) + b"\x00" * 16
    with pytest.raises(UnknownApiKeyError) as caught:
        decode_request(frame, SERVED)
    assert caught.value.correlation_id == 6


@pytest.mark.parametrize(
    ("api_key", "api_version", "supported"),
    [
        (ApiKey.PRODUCE, 2, (3, 11)),  # removed in Kafka 4.0, yet advertised from 0
        (ApiKey.PRODUCE, 13, (3, 11)),  # kio knows it; the table does not accept it
        (ApiKey.FETCH, 3, (4, 17)),
        (ApiKey.FETCH, 18, (4, 17)),
        (ApiKey.METADATA, 14, (0, 12)),
        (ApiKey.DESCRIBE_DELEGATION_TOKEN, 1, None),  # a Kafka API Sluice does not serve
    ],
)
def test_unsupported_versions_raise(
    api_key: int, api_version: int, supported: tuple[int, int] | None
) -> None:
    frame = encode_request_header(api_key, api_version, 9, "c") + b"\x00" * 32
    with pytest.raises(UnsupportedVersionError) as caught:
        decode_request(frame, SERVED)
    assert not isinstance(caught.value, UnsupportedApiVersionsError)
    assert caught.value.supported == supported
    assert caught.value.header.correlation_id == 9
    assert caught.value.code is ErrorCode.unsupported_version


def test_a_restricted_table_rejects_the_other_apis() -> None:
    table = SERVED.restrict([ApiKey.API_VERSIONS, ApiKey.METADATA])
    with pytest.raises(UnsupportedVersionError):
        decode_request(encode_request(1, produce_request(9, b""))[4:], table)


@pytest.mark.parametrize("api_version", [5, 6, 127, -1])
def test_newer_api_versions_gets_the_v0_fallback(api_version: int) -> None:
    # librdkafka/kafka-python/aiokafka send their newest ApiVersions; an older broker
    # answers v0 with UNSUPPORTED_VERSION and its supported range, and they retry.
    frame = encode_request_header(18, api_version, 0x01020304, "rdkafka") + b"\x05junk\x00"
    with pytest.raises(UnsupportedApiVersionsError) as caught:
        decode_request(frame, SERVED)
    assert caught.value.supported == (0, 4)
    response = caught.value.response
    (size,) = struct.unpack_from(">i", response)
    assert size == len(response) - 4
    assert response[4:8] == b"\x01\x02\x03\x04"  # response header v0
    v0 = schema("api_versions", 0, "response").ApiVersionsResponse
    body, consumed = entity_reader(v0)(response, 8)
    assert 8 + consumed == len(response)
    assert body.error_code is ErrorCode.unsupported_version
    advertised = {(e.api_key, e.min_version, e.max_version) for e in body.api_keys}
    assert (18, 0, 4) in advertised
    assert advertised == set(SERVED.advertised())


def test_no_fallback_when_api_versions_is_not_served() -> None:
    frame = encode_request_header(18, 9, 1, "c") + b"\x00"
    with pytest.raises(UnsupportedVersionError) as caught:
        decode_request(frame, SERVED.without(ApiKey.API_VERSIONS))
    assert not isinstance(caught.value, UnsupportedApiVersionsError)
