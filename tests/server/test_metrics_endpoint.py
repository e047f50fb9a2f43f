"""The broker's Prometheus endpoint (metrics.port) against known traffic from
confluent-kafka and kafka-python, the consumer lag against ``sluice consumer-groups
--describe``, the endpoint's HTTP bounds, and ``sluice broker --dev``."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import kafka
import pytest
from confluent_kafka import Consumer, Producer
from prometheus_client.parser import text_string_to_metric_families

import sluice
from sluice.cli import broker as cli_broker
from sluice.cli import main
from sluice.config import BrokerConfig, ConfigError
from support.waiting import wait_until

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"metrics.port": 0, "num.partitions": 1}


def scrape(broker: sluice.EmbeddedBroker) -> Samples:
    assert broker.broker is not None and broker.broker.metrics_endpoint is not None
    with urllib.request.urlopen(broker.broker.metrics_endpoint.url, timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = answer.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):  # the whole text parses
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_counters_follow_known_traffic(broker: sluice.EmbeddedBroker, topic: str) -> None:
    before = scrape(broker)
    produce_requests = value(before, "kafka_network_requestmetrics_requests_total",
                             request="Produce")  # fmt: skip
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 50})
    for i in range(37):
        producer.produce(topic, f"confluent-{i}".encode() * 3)
    assert producer.flush(15) == 0
    after_confluent = scrape(broker)
    assert value(after_confluent, "kafka_server_brokertopicmetrics_messagesin_total",
                 topic=topic) == 37  # fmt: skip
    size = value(after_confluent, "kafka_log_log_size", topic=topic, partition="0")
    assert size > 37 * 30
    # Bytes in are the batches appended: all the log holds.
    assert value(after_confluent, "kafka_server_brokertopicmetrics_bytesin_total",
                 topic=topic) == size  # fmt: skip
    assert value(after_confluent, "kafka_log_log_logendoffset", topic=topic, partition="0") == 37

    pure = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=50)
    for i in range(23):
        pure.send(topic, f"pure-{i}".encode())
    pure.flush(15)
    pure.close()
    after = scrape(broker)
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 60
    size = value(after, "kafka_log_log_size", topic=topic, partition="0")
    assert value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == size
    requests = value(after, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert requests >= produce_requests + 2  # at least one per client
    for stage in ("totaltimems", "localtimems", "remotetimems", "requestqueuetimems",
                  "responsesendtimems"):  # fmt: skip
        name = f"kafka_network_requestmetrics_{stage}_count"
        assert value(after, name, request="Produce") == requests, stage
    assert value(after, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce",
                 le="+Inf") == requests  # fmt: skip
    assert value(after, "kafka_network_requestmetrics_requests_total", request="Metadata") > 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": topic,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 20
        while got < 60 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
    finally:
        consumer.close()
    assert got == 60
    read = scrape(broker)
    assert value(read, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= size
    assert value(read, "kafka_network_requestmetrics_requests_total", request="Fetch") > 0
    assert value(read, "kafka_server_socket_server_metrics_connection_count",
                 listener="PLAINTEXT") >= 0  # fmt: skip
    assert value(read, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(read, "process_resident_memory_bytes") > 0
    assert ("kafka_server_delayedoperationpurgatory_purgatorysize",
            (("delayedOperation", "Produce"),)) in read  # fmt: skip


def test_lag_matches_consumer_groups_describe(
    broker: sluice.EmbeddedBroker, topic: str, group: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = broker.bootstrap_servers
    assert main(["topics", "create", "--bootstrap-server", bootstrap, "--topic", topic,
                 "--partitions", "2"]) == 0  # fmt: skip
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, b"v", partition=i % 2)
    assert producer.flush(15) == 0
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                   enable_auto_commit=False)  # fmt: skip
    try:
        consumer.commit({
            kafka.TopicPartition(topic, 0): kafka.structs.OffsetAndMetadata(2, "", -1),
            kafka.TopicPartition(topic, 1): kafka.structs.OffsetAndMetadata(5, "", -1),
        })  # fmt: skip
    finally:
        consumer.close()
    capsys.readouterr()
    assert main(["consumer-groups", "--bootstrap-server", bootstrap, "--describe",
                 "--group", group]) == 0  # fmt: skip
    printed = {}
    for line in capsys.readouterr().out.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 6 and fields[1] == topic:
            printed[fields[2]] = int(fields[5])
    assert printed == {"0": 3, "1": 0}
    samples = scrape(broker)
    for partition, lag in printed.items():
        labels = {"consumergroup": group, "topic": topic, "partition": partition}
        assert value(samples, "kafka_consumergroup_lag", **labels) == lag
    assert value(samples, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic,
                 partition="1") == 5  # fmt: skip


def test_the_endpoint_is_bounded(broker: sluice.EmbeddedBroker) -> None:
    assert broker.broker is not None and broker.broker.metrics_endpoint is not None
    endpoint = broker.broker.metrics_endpoint
    host, port = endpoint.server.host, endpoint.server.port
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("HEAD", "/metrics")
    head = conn.getresponse()
    assert head.status == 200 and int(head.headers["Content-Length"]) > 1000
    head.read()
    conn.request("GET", "/nothing")
    missing = conn.getresponse()
    assert missing.status == 404
    missing.read()
    conn.request("POST", "/metrics", body=b"x" * 10)
    assert conn.getresponse().status == 413  # no request bodies at all
    conn.close()
    held = [socket.create_connection((host, port), timeout=10) for _ in range(16)]
    try:
        wait_until(lambda: endpoint.server.connection_count == 16, 10, "16 connections held")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(endpoint.url, timeout=10)
        assert refused.value.code == 503
    finally:
        for sock in held:
            sock.close()
    wait_until(lambda: scrape(broker), 10, "a scrape once the connections are gone")


def test_metrics_config() -> None:
    assert BrokerConfig({})["metrics.port"] == -1  # off by default
    with pytest.raises(ConfigError, match=r"metrics\.port"):
        BrokerConfig({"metrics.port": "-2"})
    with pytest.raises(ConfigError, match=r"metrics\.port"):
        BrokerConfig({"metrics.port": "70000"})


def test_dev_turns_metrics_on_unless_told_otherwise(tmp_path: Path) -> None:
    assert (
        cli_broker.broker_config(None, [], dev=True)["metrics.port"] == cli_broker.DEV_METRICS_PORT
    )
    assert cli_broker.broker_config(None, [], dev=False)["metrics.port"] == -1
    assert cli_broker.broker_config(None, ["metrics.port=0"], dev=True)["metrics.port"] == 0
    props = tmp_path / "server.properties"
    props.write_text("metrics.port=9999\n")
    assert cli_broker.broker_config(str(props), [], dev=True)["metrics.port"] == 9999
    assert (
        cli_broker.broker_config(None, [], dev=True)["console.port"] == cli_broker.DEV_CONSOLE_PORT
    )
    assert cli_broker.broker_config(None, [], dev=False)["console.port"] == -1


@pytest.mark.integration
def test_broker_dev_prints_the_metrics_and_console_urls(tmp_path: Path) -> None:
    src = str(Path(sluice.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": src}
    argv = [sys.executable, "-m", "sluice", "broker", "--dev",
            "--override", "listeners=PLAINTEXT://127.0.0.1:0",
            "--override", f"log.dirs={tmp_path / 'data'}", "--override", "metrics.port=0",
            "--override", "console.port=0",
            "--override", "offsets.topic.num.partitions=1"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once the broker serves
        match = re.fullmatch(r"metrics: (http://127\.0\.0\.1:\d+/metrics)\n", line)
        assert match, line
        with urllib.request.urlopen(match.group(1), timeout=10) as answer:
            assert b"kafka_controller_kafkacontroller_activecontrollercount 1.0" in answer.read()
        line = proc.stdout.readline()
        match = re.fullmatch(r"console: (http://127\.0\.0\.1:\d+/)\n", line)
        assert match, line
        with urllib.request.urlopen(match.group(1), timeout=10) as answer:
            assert b"<html" in answer.read().lower()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_dashboard_and_docs_name_served_families(broker: sluice.EmbeddedBroker) -> None:
    """docs/grafana-dashboard.json queries and docs/metrics.md describes only what the
    endpoint serves (a family with no series yet still has its HELP line)."""
    assert broker.broker is not None and broker.broker.metrics_endpoint is not None
    with urllib.request.urlopen(broker.broker.metrics_endpoint.url, timeout=10) as answer:
        text = answer.read().decode()
    served = set()
    for family in text_string_to_metric_families(text):
        served.add(family.name)
        served.update(sample.name for sample in family.samples)
        if family.type == "counter":
            served.add(family.name + "_total")
        if family.type == "histogram":
            served.update(family.name + s for s in ("_bucket", "_sum", "_count"))
    docs = Path(__file__).resolve().parents[2] / "docs"
    pattern = re.compile(r"\b(?:kafka|process|sluice)_[a-z_]+\b")
    dashboard = json.loads((docs / "grafana-dashboard.json").read_text())
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in pattern.findall(target["expr"])}  # fmt: skip
    assert queried and queried <= served, queried - served
    described = set(pattern.findall((docs / "metrics.md").read_text()))
    assert {name for name in described if not name.endswith("_")} - served == set()
    assert "kafka_server_brokertopicmetrics_messagesin_total" in described


def test_fetches_sent_with_sendfile_are_timed(
    broker: sluice.EmbeddedBroker, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answers of 64 KiB or more go out with sendfile: each is recorded once its sendfile
    ends, in every histogram."""
    from sluice.server.network import KafkaConnectionProtocol

    sendfiles = []
    send_file = KafkaConnectionProtocol._send_file

    async def counted(self: Any, segments: list[Any]) -> None:
        sendfiles.append(len(segments))
        await send_file(self, segments)

    monkeypatch.setattr(KafkaConnectionProtocol, "_send_file", counted)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
    for _ in range(40):
        producer.produce(topic, b"s" * 10_000)
    assert producer.flush(15) == 0
    before = value(scrape(broker), "kafka_network_requestmetrics_requests_total", request="Fetch")
    fetches = broker.control(1, lambda request: None, keep=True)  # counts, lets them through
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers,
                                   auto_offset_reset="earliest", group_id=None,
                                   fetch_max_wait_ms=100)  # fmt: skip
    try:
        got = 0
        deadline = time.monotonic() + 20
        while got < 40 and time.monotonic() < deadline:
            got += sum(len(r) for r in consumer.poll(500).values())
        consumer.poll(200)  # one more fetch round after the data
        handled = fetches.seen
        samples = scrape(broker)
    finally:
        fetches.remove()
        consumer.close()
    assert got == 40 and sendfiles and handled >= 1
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= 400_000
    answered = value(samples, "kafka_network_requestmetrics_requests_total", request="Fetch")
    assert handled - 1 <= answered - before <= handled  # the last may still wait
    for stage in ("responsesendtimems", "totaltimems", "remotetimems"):
        name = f"kafka_network_requestmetrics_{stage}_count"
        assert value(samples, name, request="Fetch") == answered, stage
