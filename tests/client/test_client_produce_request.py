"""The hand-written Produce request/response codec against kio's generated one."""

from __future__ import annotations

import datetime
import io
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from sluice.base import TopicPartition
from sluice.client.net.requests import build
from sluice.client.producer.produce_request import decode_produce_response, encode_produce_request
from sluice.protocol import ApiKey, ErrorCode, MalformedRequestError, encode_response
from sluice.protocol.apis import request_type, response_type

VERSIONS = range(3, 12)
BATCH_A = b"\x00" * 70 + b"batch-a"
BATCH_B = b"\x01" * 65


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("transactional_id", [None, "txn-1"])
def test_request_decodes_with_kio(version: int, transactional_id: str | None) -> None:
    topic_data = {"alpha": [(0, BATCH_A), (3, memoryview(BATCH_B))], "beta": [(1, BATCH_B)]}
    body = b"".join(
        bytes(s) for s in encode_produce_request(version, -1, 1500, topic_data, transactional_id)
    )
    request, size = entity_reader(request_type(ApiKey.PRODUCE, version))(body, 0)
    assert size == len(body)
    assert request.transactional_id == transactional_id
    assert request.acks == -1
    assert request.timeout == datetime.timedelta(milliseconds=1500)
    decoded = {
        t.name: [(p.index, bytes(p.records)) for p in t.partition_data] for t in request.topic_data
    }
    assert decoded == {"alpha": [(0, BATCH_A), (3, BATCH_B)], "beta": [(1, BATCH_B)]}


def test_request_body_references_batches_without_copying() -> None:
    batch = bytearray(BATCH_A)
    view = memoryview(batch)
    segments = encode_produce_request(11, 1, 100, {"t": [(0, view)]})
    assert any(segment is view for segment in segments)


def _kio_response(version: int, partitions: list[dict[str, Any]]) -> bytes:
    response = build(
        response_type(ApiKey.PRODUCE, version),
        responses=[{"name": "alpha", "partition_responses": partitions}],
        throttle_time=7,
    )
    return encode_response(42, response, use_kio=True)[4:]  # drop the size prefix


@pytest.mark.parametrize("version", VERSIONS)
def test_response_parses_like_kio(version: int) -> None:
    partitions = [
        {
            "index": 0,
            "error_code": ErrorCode.none,
            "base_offset": 1234,
            "log_append_time": None,
            "log_start_offset": 5,
            "record_errors": [],
            "error_message": None,
        },
        {
            "index": 2,
            "error_code": ErrorCode.invalid_record,
            "base_offset": -1,
            "log_append_time": datetime.datetime.fromtimestamp(1_700_000_000, datetime.UTC),
            "log_start_offset": -1,
            "record_errors": [{"batch_index": 3, "batch_index_error_message": "bad"}],
            "error_message": "nope",
            "current_leader": {"leader_id": 4, "leader_epoch": 9},
        },
    ]
    frame = _kio_response(version, partitions)
    data = decode_produce_response(frame, version)
    assert data.throttle_time_ms == 7
    first = data.responses[TopicPartition("alpha", 0)]
    assert (first.error, first.base_offset, first.log_append_time) == (ErrorCode.none, 1234, -1)
    second = data.responses[TopicPartition("alpha", 2)]
    assert second.error is ErrorCode.invalid_record
    assert second.log_append_time == 1_700_000_000_000
    if version >= 5:
        assert first.log_start_offset == 5
    if version >= 8:
        assert second.error_message == "nope"
        assert second.record_errors == ((3, "bad"),)
    kio_body, _ = entity_reader(response_type(ApiKey.PRODUCE, version))(
        frame, 4 + (1 if version >= 9 else 0)
    )
    assert len(kio_body.responses[0].partition_responses) == 2


@pytest.mark.parametrize("version", [8, 11])
def test_truncated_or_padded_responses_are_malformed(version: int) -> None:
    frame = _kio_response(version, [])
    with pytest.raises(MalformedRequestError):
        decode_produce_response(frame[:-3], version)
    with pytest.raises(MalformedRequestError):
        decode_produce_response(frame + b"\x00", version)


@pytest.mark.parametrize("version", VERSIONS)
def test_request_is_byte_identical_to_kios_writer(version: int) -> None:
    cls = request_type(ApiKey.PRODUCE, version)
    request = build(
        cls,
        transactional_id=None,
        acks=1,
        timeout=100,
        topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": BATCH_A}]}],
    )
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, request)
    segments = encode_produce_request(version, 1, 100, {"t": [(0, BATCH_A)]})
    ours = b"".join(bytes(s) for s in segments)
    assert ours == buffer.getvalue()
