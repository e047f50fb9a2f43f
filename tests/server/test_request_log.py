"""The request log (logger ``sluice.request``): a DEBUG line per request answered, with
the API, version, ids, client, principal, listener, time and sizes, for the requests of
confluent-kafka and kafka-python; nothing when the logger is above DEBUG."""

from __future__ import annotations

import json
import logging
import re

import pytest

import sluice
from sluice.cli.log_format import JsonFormatter
from support.clients import consume_kafka_python, create_topic, produce

pytestmark = pytest.mark.integration

LINE = re.compile(
    r"Completed request:RequestHeader\(apiKey=(?P<api>\w+), apiVersion=(?P<version>\d+), "
    r"clientId=(?P<client>[^,]*), correlationId=(?P<correlation>-?\d+)\) from connection "
    r"127\.0\.0\.1:(?P<port>\d+)-127\.0\.0\.1:\d+;totalTime:(?P<ms>[\d.]+),"
    r"requestBytes:(?P<request_bytes>\d+),responseBytes:(?P<response_bytes>\d+),"
    r"securityProtocol:PLAINTEXT,principal:User:ANONYMOUS,listener:PLAINTEXT,"
    r"clientAddress:/127\.0\.0\.1$"
)


def _completed(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "sluice.request"]


def test_request_log_shows_each_request_of_both_clients(
    broker: sluice.EmbeddedBroker, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="sluice.request")
    create_topic(broker.bootstrap_servers, topic, 1)
    produce(broker.bootstrap_servers, topic, [b"a" * 100, b"b" * 100], 1)  # confluent-kafka
    assert len(consume_kafka_python(broker.bootstrap_servers, topic, 2)) == 2  # kafka-python
    records = _completed(caplog)
    lines = [(LINE.match(r.getMessage()), r) for r in records]
    assert all(m is not None for m, _ in lines), [r.getMessage() for r in records]
    by_api: dict[str, list[tuple[re.Match[str], logging.LogRecord]]] = {}
    for match, record in lines:
        assert match is not None
        assert int(match["port"]) == broker.port
        by_api.setdefault(match["api"], []).append((match, record))
    assert {"API_VERSIONS", "METADATA", "CREATE_TOPICS", "PRODUCE", "FETCH"} <= set(by_api)
    clients = {m["client"] for m, _ in by_api["METADATA"]}
    assert "rdkafka" in clients and any(c.startswith("kafka-python") for c in clients)
    produce_match, produce_record = by_api["PRODUCE"][0]
    assert int(produce_match["request_bytes"]) > 200  # the two values are in it
    assert int(produce_match["response_bytes"]) > 0
    fetched = max(int(m["response_bytes"]) for m, _ in by_api["FETCH"])
    assert fetched > 200  # the records went back out
    # the structured fields a JSON line carries
    fields = json.loads(JsonFormatter().format(produce_record))
    assert fields["logger"] == "sluice.request" and fields["level"] == "DEBUG"
    assert fields["api_key"] == "PRODUCE"
    assert fields["client_id"] == "rdkafka"
    assert fields["correlation_id"] == int(produce_match["correlation"])
    assert fields["request_bytes"] == int(produce_match["request_bytes"])
    assert fields["principal"] == "User:ANONYMOUS" and fields["listener"] == "PLAINTEXT"
    assert fields["client_address"] == "/127.0.0.1"
    assert fields["total_time_ms"] >= 0


def test_no_request_log_above_debug(
    broker: sluice.EmbeddedBroker, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sluice.request")
    create_topic(broker.bootstrap_servers, topic, 1)
    produce(broker.bootstrap_servers, topic, [b"x"], 1)
    assert _completed(caplog) == []
