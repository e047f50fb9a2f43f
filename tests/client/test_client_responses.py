"""sluice.protocol.responses.decode_response: response frames into kio dataclasses."""

from __future__ import annotations

import pytest

from sluice.client.net.requests import build
from sluice.protocol import ApiKey, ErrorCode, MalformedRequestError, encode_response
from sluice.protocol.apis import response_type
from sluice.protocol.responses import decode_response, response_correlation_id


def _metadata(version: int) -> bytes:
    body = build(
        response_type(ApiKey.METADATA, version),
        throttle_time=0,
        brokers=[{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        cluster_id="c",
        controller_id=1,
        topics=[
            {
                "error_code": ErrorCode.none,
                "name": "t",
                "topic_id": None,
                "partitions": [
                    {"error_code": ErrorCode.none, "partition_index": 0, "leader_id": 1,
                     "leader_epoch": 3, "replica_nodes": [1], "isr_nodes": [1]},
                ],
            }
        ],
    )  # fmt: skip
    return encode_response(77, body)[4:]


@pytest.mark.parametrize("version", [1, 5, 9, 12])
def test_metadata_responses_of_flexible_and_classic_versions(version: int) -> None:
    response = decode_response(_metadata(version), ApiKey.METADATA, version)
    assert response.correlation_id == 77
    body = response.body
    assert [(b.node_id, b.host, b.port) for b in body.brokers] == [(1, "h", 9092)]
    assert body.topics[0].name == "t"
    assert body.topics[0].partitions[0].leader_id == 1


def test_api_versions_always_uses_header_v0() -> None:
    body = build(
        response_type(ApiKey.API_VERSIONS, 3),
        error_code=ErrorCode.none,
        api_keys=[{"api_key": 0, "min_version": 3, "max_version": 11}],
        throttle_time=0,
    )
    frame = encode_response(5, body)[4:]
    response = decode_response(frame, ApiKey.API_VERSIONS, 3)
    assert response.body.api_keys[0].max_version == 11


def test_malformed_frames_raise_instead_of_crashing() -> None:
    frame = _metadata(12)
    with pytest.raises(MalformedRequestError):
        decode_response(frame[:-5], ApiKey.METADATA, 12)
    with pytest.raises(MalformedRequestError, match="left after"):
        decode_response(frame + b"\x00\x00", ApiKey.METADATA, 12)
    with pytest.raises(MalformedRequestError):
        response_correlation_id(b"\x00")
    # A huge array length must not reach kio's native reader.
    hostile = frame[:4] + b"\x00" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(MalformedRequestError):
        decode_response(hostile, ApiKey.METADATA, 12)


def test_accepts_memoryviews_of_writable_buffers() -> None:
    frame = memoryview(bytearray(_metadata(9)))
    assert decode_response(frame, ApiKey.METADATA, 9).correlation_id == 77
