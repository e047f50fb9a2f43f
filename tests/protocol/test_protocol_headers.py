"""Request and response headers: versions chosen as Kafka does, parsing v0/v1/v2."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.request_header.v1.header import RequestHeader as KioHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as KioHeaderV2
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from sluice.protocol import (
    ApiKey,
    MalformedRequestError,
    ProtocolError,
    RequestHeader,
    UnknownApiKeyError,
    encode_request_header,
    encode_response_header,
    first_flexible_version,
    is_flexible,
    kio_version_range,
    parse_request_header,
    read_request_header,
    request_header_version,
    request_type,
    response_header_version,
    response_type,
)
from sluice.protocol.apis import FIRST_FLEXIBLE_VERSIONS, kio_first_flexible_version

DETERMINISTIC = settings(derandomize=True, max_examples=200, deadline=None)


def test_read_header_v0_has_no_client_id() -> None:
    data = struct.pack(">hhi", 7, 0, 99) + b"body"
    header, offset = read_request_header(data, 0)
    assert header == RequestHeader(7, 0, 99, None, 0)
    assert data[offset:] == b"body"


def test_read_header_v1() -> None:
    data = struct.pack(">hhih", 3, 8, 12345, 5) + b"rdkaf" + b"body"
    header, offset = read_request_header(data, 1)
    assert header == RequestHeader(3, 8, 12345, "rdkaf", 1)
    assert data[offset:] == b"body"


def test_read_header_v1_null_client_id() -> None:
    data = struct.pack(">hhih", 3, 8, -7, -1)
    header, offset = read_request_header(data, 1)
    assert header.client_id is None
    assert header.correlation_id == -7
    assert offset == len(data)


def test_read_header_v2_skips_tagged_fields() -> None:
    tags = b"\x02" + b"\x00\x03abc" + b"\x05\x00"  # two unknown tagged fields
    data = struct.pack(">hhih", 18, 3, 1, 2) + b"me" + tags + b"body"
    header, offset = read_request_header(data, 2)
    assert header == RequestHeader(18, 3, 1, "me", 2)
    assert data[offset:] == b"body"


def test_client_id_is_a_legacy_string_even_in_header_v2() -> None:
    encoded = io.BytesIO()
    kio_header = KioHeaderV2(
        request_api_key=i16(3), request_api_version=i16(12), correlation_id=i32(5), client_id="c"
    )
    entity_writer(KioHeaderV2)(encoded, kio_header)
    assert encoded.getvalue() == encode_request_header(3, 12, 5, "c")
    assert encoded.getvalue()[8:11] == b"\x00\x01c"
    header, offset = parse_request_header(encoded.getvalue())
    assert header == RequestHeader(3, 12, 5, "c", 2)
    assert offset == len(encoded.getvalue())


def test_header_v1_matches_kio() -> None:
    encoded = io.BytesIO()
    kio_header = KioHeaderV1(
        request_api_key=i16(0), request_api_version=i16(3), correlation_id=i32(5), client_id=None
    )
    entity_writer(KioHeaderV1)(encoded, kio_header)
    assert encoded.getvalue() == encode_request_header(0, 3, 5, None)


def test_invalid_utf8_client_id_is_replaced_like_java() -> None:
    data = struct.pack(">hhih", 3, 1, 1, 2) + b"\xff\xfe"
    header, _ = read_request_header(data, 1)
    assert header.client_id == "\ufffd\ufffd"


def test_negative_client_id_length_means_null() -> None:
    header, _ = read_request_header(struct.pack(">hhih", 3, 1, 1, -5), 1)
    assert header.client_id is None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x03\x00",
        struct.pack(">hhi", 3, 1, 1),  # no client id length
        struct.pack(">hhih", 3, 1, 1, 4) + b"abc",  # client id cut short
        struct.pack(">hhih", 3, 12, 1, -1),  # v2 without tagged fields
        struct.pack(">hhih", 3, 12, 1, -1) + b"\x01\x00\x05ab",  # tag overruns
        struct.pack(">hhih", 3, 12, 1, -1) + b"\x80\x80\x80\x80\x80\x01",  # varint too long
    ],
)
def test_truncated_headers_are_malformed(data: bytes) -> None:
    with pytest.raises(MalformedRequestError):
        parse_request_header(data)


def test_unknown_api_key() -> None:
    with pytest.raises(UnknownApiKeyError) as caught:
        parse_request_header(struct.pack(">hhih", 999, 2, 77, -1))
    assert (caught.value.api_key, caught.value.api_version, caught.value.correlation_id) == (
        999,
        2,
        77,
    )
    assert "999" in str(caught.value)
    # Keys Kafka 4.0 removed (LeaderAndIsr..ControlledShutdown) are unknown too.
    with pytest.raises(UnknownApiKeyError) as short:
        parse_request_header(struct.pack(">hh", 7, 0))
    assert short.value.correlation_id is None


@pytest.mark.parametrize(
    ("api_key", "api_version", "expected"),
    [
        (ApiKey.METADATA, 8, 1),
        (ApiKey.METADATA, 9, 2),
        (ApiKey.PRODUCE, 8, 1),
        (ApiKey.PRODUCE, 9, 2),
        (ApiKey.FETCH, 11, 1),
        (ApiKey.FETCH, 12, 2),
        (ApiKey.API_VERSIONS, 2, 1),
        (ApiKey.API_VERSIONS, 3, 2),
        (ApiKey.API_VERSIONS, 99, 2),  # newer than known: flexible ranges are open-ended
        (ApiKey.SASL_HANDSHAKE, 1, 1),  # never flexible
        (ApiKey.PRODUCE, 0, 1),  # removed version, still a legacy header
        (7, 0, 0),  # ControlledShutdown v0, the only user of header v0
    ],
)
def test_request_header_version(api_key: int, api_version: int, expected: int) -> None:
    assert request_header_version(api_key, api_version) == expected


def test_api_versions_response_header_is_always_v0() -> None:
    for version in range(0, 10):
        assert response_header_version(ApiKey.API_VERSIONS, version) == 0
    assert response_header_version(ApiKey.METADATA, 9) == 1
    assert response_header_version(ApiKey.METADATA, 8) == 0


def test_header_versions_agree_with_kio_for_every_schema() -> None:
    checked = 0
    for api_key in api_key_map:
        span = kio_version_range(api_key)
        assert span is not None
        for version in range(span[0], span[1] + 1):
            request = request_type(api_key, version)
            response = response_type(api_key, version)
            assert request_header_version(api_key, version) == request.__header_schema__.__version__
            assert response_header_version(api_key, version) == (
                response.__header_schema__.__version__
            )
            assert is_flexible(api_key, version) == request.__flexible__
            checked += 1
    assert checked == sum(len(schema_name_map[name]) for name in api_key_map.values())


def test_first_flexible_versions() -> None:
    assert first_flexible_version(ApiKey.PRODUCE) == 9
    assert first_flexible_version(ApiKey.FETCH) == 12
    assert first_flexible_version(ApiKey.METADATA) == 9
    assert first_flexible_version(ApiKey.API_VERSIONS) == 3
    assert first_flexible_version(ApiKey.SASL_HANDSHAKE) is None
    assert first_flexible_version(12345) is None


def test_first_flexible_versions_table_matches_kio() -> None:
    # The table spares the broker kio's schema imports on each API's first request.
    assert set(FIRST_FLEXIBLE_VERSIONS) == set(api_key_map)
    for api_key, first in FIRST_FLEXIBLE_VERSIONS.items():
        assert kio_first_flexible_version(api_key) == first, api_key


def test_api_key_enum_matches_kio() -> None:
    assert {key.value: key.name.lower() for key in ApiKey} == dict(api_key_map)


def test_response_headers() -> None:
    assert encode_response_header(0x01020304, 0) == b"\x01\x02\x03\x04"
    assert encode_response_header(-1, 1) == b"\xff\xff\xff\xff\x00"
    with pytest.raises(ValueError):
        encode_response_header(1, 2)


@DETERMINISTIC
@given(st.binary(max_size=48))
def test_random_bytes_raise_only_protocol_errors(data: bytes) -> None:
    try:
        header, offset = parse_request_header(data)
    except (MalformedRequestError, UnknownApiKeyError):
        return
    assert 8 <= offset <= len(data)
    assert header.header_version in (1, 2)


@DETERMINISTIC
@given(st.binary(max_size=48), st.sampled_from([0, 1, 2]))
def test_random_bytes_at_any_header_version(data: bytes, version: int) -> None:
    try:
        read_request_header(data, version)
    except ProtocolError as exc:
        assert isinstance(exc, MalformedRequestError)


@DETERMINISTIC
@given(
    st.sampled_from(sorted(api_key_map)),
    st.integers(0, 20),
    st.integers(-(2**31), 2**31 - 1),
    st.none() | st.text(max_size=20),
)
def test_encode_then_parse(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> None:
    data = encode_request_header(api_key, api_version, correlation_id, client_id) + b"rest"
    header, offset = parse_request_header(data)
    assert header == RequestHeader(
        api_key,
        api_version,
        correlation_id,
        client_id,
        request_header_version(api_key, api_version),
    )
    assert data[offset:] == b"rest"
