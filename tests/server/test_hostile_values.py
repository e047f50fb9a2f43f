"""Requests that parse but carry values no client sends: each is answered with Kafka's
error code (the connection stays open) or, when it cannot be parsed, closes its own
connection; the broker serves on, and its log gains a line per kind, not per request."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from kio.index import load_request_schema

from sluice.base.rate_limited_log import RateLimitedLog
from sluice.protocol import ApiKey, ErrorCode, Request, encode_request, encode_request_header
from sluice.protocol.responses import decode_response
from sluice.server import network
from sluice.server.apis import registry
from sluice.server.messages import build
from sluice.server.network import ClientIdentity, KafkaServer
from sluice.server.topics import EXCESSIVE_BATCH_MESSAGE
from sluice.testing import EmbeddedBroker
from support.wire import RawClient

LONG_LEGACY = "n" * (2**15 - 1)  # the longest int16 string
LONG_COMPACT = "n" * 40_000  # longer than any int16 string


def request(api_key: int, version: int, **values: Any) -> Any:
    return build(load_request_schema(api_key, version), **values)


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as embedded:
        client = RawClient(embedded.bootstrap_servers)
        created = client.request(
            request(ApiKey.CREATE_TOPICS, 5, timeout=10_000, topics=[
                {"name": "hostile", "num_partitions": 2, "replication_factor": 1}])
        )  # fmt: skip
        assert created.topics[0].error_code == ErrorCode.none  # type: ignore[attr-defined]
        client.close()
        yield embedded


@pytest.fixture
def client(broker: EmbeddedBroker) -> Iterator[RawClient]:
    raw = RawClient(broker.bootstrap_servers)
    yield raw
    raw.close()


def still_serves(client: RawClient) -> None:
    """The same connection answers an ordinary request afterwards."""
    answer: Any = client.request(request(ApiKey.METADATA, 9, topics=[{"name": "hostile"}]))
    assert answer.topics[0].error_code == ErrorCode.none


def test_a_topic_asked_for_by_id_before_v12_is_an_invalid_request(client: RawClient) -> None:
    body = request(ApiKey.METADATA, 10, topics=[{"name": None}, {"name": "hostile"}])
    answer: Any = client.request(body)
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("", ErrorCode.invalid_request), ("hostile", ErrorCode.invalid_request)
    ]  # fmt: skip
    still_serves(client)


@pytest.mark.parametrize("timestamp", [-(2**31), -5, -(2**63)])
def test_any_other_negative_timestamp_finds_the_earliest_record(
    client: RawClient, timestamp: int
) -> None:
    body = request(
        ApiKey.LIST_OFFSETS,
        1,
        replica_id=-1,
        topics=[
            {"name": "hostile", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}
        ],
    )
    answer: Any = client.request(body)  # fmt: skip
    partition = answer.topics[0].partitions[0]
    assert (partition.error_code, partition.offset) == (ErrorCode.none, -1)  # nothing yet
    still_serves(client)


@pytest.mark.parametrize(("max_bytes", "partition_max_bytes"), [(1 << 20, -1), (-(2**31), 100)])
def test_negative_fetch_sizes_are_invalid_requests(
    client: RawClient, max_bytes: int, partition_max_bytes: int
) -> None:
    body = request(
        ApiKey.FETCH,
        4,
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        topics=[
            {
                "topic": "hostile",
                "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": partition_max_bytes}
                ],
            }
        ],
    )
    answer: Any = client.request(body)  # fmt: skip
    assert answer.responses[0].partitions[0].error_code == ErrorCode.invalid_request
    still_serves(client)


def test_more_than_ten_thousand_new_partitions_is_a_policy_violation(client: RawClient) -> None:
    topics = [{"name": "huge", "num_partitions": 2**31 - 1, "replication_factor": 1},
              {"name": "small", "num_partitions": 1, "replication_factor": 1}]  # fmt: skip
    answer: Any = client.request(request(ApiKey.CREATE_TOPICS, 5, timeout=1000, topics=topics))
    assert [(t.error_code, t.error_message) for t in answer.topics] == [
        (ErrorCode.policy_violation, EXCESSIVE_BATCH_MESSAGE)
    ] * 2
    grow = [{"name": "hostile", "count": 20_000, "assignments": None}]
    answer = client.request(request(ApiKey.CREATE_PARTITIONS, 1, topics=grow, timeout_ms=1000))
    assert answer.results[0].error_code == ErrorCode.policy_violation
    still_serves(client)


@pytest.mark.parametrize(("version", "name"), [(1, LONG_LEGACY), (3, LONG_COMPACT)])
def test_error_messages_quoting_a_long_name_are_cut_short(
    client: RawClient, version: int, name: str
) -> None:
    grow = [{"name": name, "count": 3, "assignments": None}]
    answer: Any = client.request(
        request(ApiKey.CREATE_PARTITIONS, version, topics=grow, timeout_ms=1000)
    )
    result = answer.results[0]
    assert result.name == name  # the name is echoed whole, in the string it came in
    assert result.error_code == ErrorCode.unknown_topic_or_partition
    assert len(result.error_message) <= 1024
    still_serves(client)


def test_an_overlong_topic_name_is_an_invalid_topic(client: RawClient) -> None:
    topics = [{"name": LONG_COMPACT, "num_partitions": 1, "replication_factor": 1}]
    answer: Any = client.request(request(ApiKey.CREATE_TOPICS, 5, timeout=1000, topics=topics))
    assert answer.topics[0].error_code == ErrorCode.invalid_topic_exception
    assert LONG_COMPACT not in answer.topics[0].error_message
    still_serves(client)


def test_ids_too_long_to_store_are_refused(client: RawClient) -> None:
    init = request(ApiKey.INIT_PRODUCER_ID, 2, transactional_id=LONG_COMPACT,
                   transaction_timeout=10_000)  # fmt: skip
    assert client.request(init).error_code == ErrorCode.invalid_request  # type: ignore[attr-defined]
    join = request(ApiKey.JOIN_GROUP, 6, group_id=LONG_COMPACT, session_timeout=10_000,
                   rebalance_timeout=10_000, member_id="", protocol_type="consumer",
                   protocols=[{"name": "range", "metadata": b""}])  # fmt: skip
    assert client.request(join).error_code == ErrorCode.invalid_group_id  # type: ignore[attr-defined]
    still_serves(client)


def test_an_empty_transactional_id_is_an_invalid_request(client: RawClient) -> None:
    body = request(ApiKey.ADD_PARTITIONS_TO_TXN, 0, v3_and_below_transactional_id="",
                   v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
                   v3_and_below_topics=[{"name": "hostile", "partitions": [0]}])  # fmt: skip
    answer: Any = client.request(body)
    result = answer.results_by_topic_v3_and_below[0].results_by_partition[0]
    assert result.partition_error_code == ErrorCode.invalid_request
    still_serves(client)


def test_a_member_id_fits_however_long_the_client_id(broker: EmbeddedBroker) -> None:
    join = request(ApiKey.JOIN_GROUP, 0, group_id="hostile-group", session_timeout=10_000,
                   member_id="", protocol_type="consumer",
                   protocols=[{"name": "range", "metadata": b""}])  # fmt: skip
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(encode_request(1, join, client_id=LONG_LEGACY))
        size = struct.unpack(">i", _recv(sock, 4))[0]
        frame = _recv(sock, size)
    answer: Any = decode_response(frame, ApiKey.JOIN_GROUP, 0).body
    assert answer.error_code == ErrorCode.none
    assert answer.member_id.startswith(LONG_LEGACY[:1024] + "-")
    assert len(answer.member_id) == 1024 + 1 + 36  # the client id's first 1024 characters


def _recv(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "closed by the broker"
        data += chunk
    return data


@pytest.fixture
def fresh_client_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """The network layer's limiter with no history from earlier tests."""
    monkeypatch.setattr(network, "client_log", RateLimitedLog(network.log))


def test_unparseable_requests_close_their_connection_and_log_one_line(
    broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture, fresh_client_log: None
) -> None:
    # DeleteRecords v2 with its non-nullable topics array null (compact 0), 200 times.
    body = encode_request_header(ApiKey.DELETE_RECORDS, 2, 1, "hostile") + b"\x00" + b"\x00" * 5
    with caplog.at_level(logging.DEBUG, logger="sluice.server"):
        for _ in range(200):
            raw = RawClient(broker.bootstrap_servers)
            raw.send_raw(struct.pack(">i", len(body)) + body)
            assert raw.is_closed_by_broker()
            raw.close()
    rejects = [r for r in caplog.records if "rejected request" in r.getMessage()]
    assert sum(r.levelno == logging.DEBUG for r in rejects) == 200
    assert sum(r.levelno >= logging.INFO for r in rejects) == 1
    assert "non-nullable field topics was serialized as null" in rejects[0].getMessage()
    fresh = RawClient(broker.bootstrap_servers)
    still_serves(fresh)
    fresh.close()


def test_a_response_that_cannot_be_encoded_closes_only_its_connection(
    caplog: pytest.LogCaptureFixture, fresh_client_log: None
) -> None:
    def unencodable(_ctx: Any, request: Request) -> Any:
        return build(request.response_type, throttle_time=0, brokers=[], cluster_id=None,
                     controller_id=-1, topics=[{"name": LONG_COMPACT, "error_code": 0,
                                                "partitions": []}])  # fmt: skip

    async def scenario() -> tuple[bytes, bytes]:
        handlers = {ApiKey.METADATA: unencodable, ApiKey.API_VERSIONS: _api_versions}
        versions = registry().versions.restrict(handlers)
        server = KafkaServer("127.0.0.1", 0, handlers, versions, 1 << 20, 0, ClientIdentity())
        await server.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(encode_request(1, request(ApiKey.METADATA, 4, topics=None)))
            closed = await asyncio.wait_for(reader.read(), 5)  # EOF: no answer
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(encode_request(2, request(ApiKey.API_VERSIONS, 0)))
            answered = await asyncio.wait_for(reader.readexactly(8), 5)
            writer.close()
        finally:
            await server.stop_accepting()
            await server.drain_and_close(5)
        return closed, answered

    with caplog.at_level(logging.INFO):
        closed, answered = asyncio.run(scenario())
        gc.collect()  # an unretrieved task exception would be reported now
    assert closed == b""
    assert struct.unpack(">ii", answered)[1] == 2
    lines = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(lines) == 1 and lines[0].name == network.__name__, lines
    assert "String is too long" in lines[0].getMessage()
    assert "never retrieved" not in caplog.text


def _api_versions(_ctx: Any, request: Request) -> Any:
    return build(request.response_type, error_code=0, api_keys=[], throttle_time=0)
