"""Bad input: each gets the right error or a closed connection; the broker keeps serving
and everything acknowledged before is still readable."""

from __future__ import annotations

import datetime
import os
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v9 import request as produce_req
from kio.static.primitive import i8, i16, i32, i64

from sluice.protocol import ErrorCode
from support.brokers import BrokerProcess
from support.records import record_batch
from support.wire import RawClient

TIMEOUT = datetime.timedelta(seconds=10)


def produce(client: RawClient, topic: str, records: bytes, partition: int = 0) -> object:
    body = produce_req.ProduceRequest(
        transactional_id=None, acks=i16(-1), timeout=TIMEOUT,
        topic_data=(produce_req.TopicProduceData(name=topic, partition_data=(
            produce_req.PartitionProduceData(index=i32(partition), records=records),)),),
    )  # fmt: skip
    return client.request(body)


def produce_error(client: RawClient, topic: str, records: bytes, partition: int = 0) -> ErrorCode:
    response = produce(client, topic, records, partition)
    return response.responses[0].partition_responses[0].error_code  # type: ignore[attr-defined]


def fetch(client: RawClient, topic: str, offset: int) -> object:
    body = fetch_req.FetchRequest(
        replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=0), min_bytes=i32(1),
        max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(fetch_req.FetchTopic(topic=topic, partitions=(fetch_req.FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(offset),
            last_fetched_epoch=i32(-1), log_start_offset=i64(-1),
            partition_max_bytes=i32(1 << 20)),)),),
        forgotten_topics_data=(), rack_id="",
    )  # fmt: skip
    return client.request(body)


def metadata(client: RawClient) -> object:
    return client.request(
        MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
    )


@pytest.fixture(scope="module")
def acknowledged(broker: BrokerProcess) -> tuple[str, list[bytes]]:
    """Data written and acknowledged before the abuse starts."""
    client = RawClient(broker.bootstrap)
    values = [b"before-%d" % i for i in range(5)]
    assert produce_error(client, "acknowledged", record_batch(values)) == ErrorCode.none
    client.close()
    return "acknowledged", values


def assert_still_serving(broker: BrokerProcess, acknowledged: tuple[str, list[bytes]]) -> None:
    client = RawClient(broker.bootstrap)
    assert metadata(client).brokers[0].port == broker.port  # type: ignore[attr-defined]
    response = fetch(client, acknowledged[0], 0)
    data = response.responses[0].partitions[0]  # type: ignore[attr-defined]
    assert data.error_code == ErrorCode.none and data.high_watermark == len(acknowledged[1])
    for value in acknowledged[1]:
        assert value in data.records
    client.close()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(frame(os.urandom(64)), id="random-bytes"),
        pytest.param(frame(b"\x00\x03\x00"), id="truncated-header"),
        pytest.param(struct.pack(">i", -5), id="negative-size"),
        pytest.param(struct.pack(">i", 2**31 - 1), id="huge-size"),
        pytest.param(frame(struct.pack(">hhi", 999, 0, 1) + b"\xff\xff"), id="unknown-api-key"),
        pytest.param(frame(struct.pack(">hhi", 0, 99, 1) + b"\xff\xff"), id="unsupported-version"),
    ],
)
def test_malformed_frames_close_the_connection(
    broker: BrokerProcess, acknowledged: tuple[str, list[bytes]], raw: bytes
) -> None:
    client = RawClient(broker.bootstrap)
    client.send_raw(raw)
    assert client.is_closed_by_broker()
    client.close()
    assert_still_serving(broker, acknowledged)


def test_truncated_frame_then_disconnect(
    broker: BrokerProcess, acknowledged: tuple[str, list[bytes]]
) -> None:
    client = RawClient(broker.bootstrap)
    client.send_raw(struct.pack(">i", 100) + b"\x00" * 10)
    client.close()
    assert_still_serving(broker, acknowledged)


def test_api_versions_too_new_gets_unsupported_version_v0(broker: BrokerProcess) -> None:
    client = RawClient(broker.bootstrap)
    # Header v2 (flexible, as for any ApiVersions >= 3): client id, then no tagged fields.
    client.send_raw(frame(struct.pack(">hhi", 18, 99, 7) + b"\x00\x04test\x00"))
    response = client.read_frame()
    assert response is not None and response[:4] == struct.pack(">i", 7)
    assert struct.unpack(">h", response[4:6])[0] == ErrorCode.unsupported_version
    # The connection stays usable for the retry at a supported version.
    reply = client.request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1")
    )
    assert reply.error_code == ErrorCode.none  # type: ignore[attr-defined]
    client.close()


def test_corrupt_batch_gets_corrupt_message(
    broker: BrokerProcess, acknowledged: tuple[str, list[bytes]]
) -> None:
    batch = bytearray(record_batch([b"payload"]))
    batch[-3] ^= 0xFF  # inside the CRC-covered records
    client = RawClient(broker.bootstrap)
    assert produce_error(client, acknowledged[0], bytes(batch)) == ErrorCode.corrupt_message
    half = record_batch([b"a" * 100])[:60]  # a torn batch
    assert produce_error(client, acknowledged[0], half) == ErrorCode.corrupt_message
    assert produce_error(client, acknowledged[0], b"\x00" * 30) != ErrorCode.none
    client.close()
    assert_still_serving(broker, acknowledged)


def test_oversized_batch_gets_message_too_large(broker: BrokerProcess) -> None:
    client = RawClient(broker.bootstrap)
    big = record_batch([b"x" * 1_100_000])  # over max.message.bytes (1048588)
    assert produce_error(client, "oversized", big) == ErrorCode.message_too_large
    client.close()


@pytest.mark.parametrize("name", ["bad name", "", "x" * 300, "a/b"])
def test_invalid_topic_name(broker: BrokerProcess, name: str) -> None:
    client = RawClient(broker.bootstrap)
    assert produce_error(client, name, record_batch([b"v"])) == ErrorCode.invalid_topic_exception
    client.close()


def test_produce_to_missing_partition(
    broker: BrokerProcess, acknowledged: tuple[str, list[bytes]]
) -> None:
    client = RawClient(broker.bootstrap)
    code = produce_error(client, acknowledged[0], record_batch([b"v"]), partition=7)
    assert code == ErrorCode.unknown_topic_or_partition
    client.close()


def test_fetch_out_of_range(broker: BrokerProcess, acknowledged: tuple[str, list[bytes]]) -> None:
    client = RawClient(broker.bootstrap)
    data = fetch(client, acknowledged[0], 10_000).responses[0].partitions[0]  # type: ignore[attr-defined]
    assert data.error_code == ErrorCode.offset_out_of_range
    assert data.high_watermark == len(acknowledged[1])
    client.close()
    assert_still_serving(broker, acknowledged)
