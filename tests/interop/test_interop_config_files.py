"""``sluice broker --config config/server.properties``: the shipped file starts a broker
that serves confluent-kafka and kafka-python; Kafka keys with no effect in Sluice are
named in one warning; an unknown key stops the broker with a suggestion."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTP

from support.brokers import BrokerProcess

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("configured")
    proc = BrokerProcess(
        root / "data",
        config=CONFIG_DIR / "server.properties",
        num_network_threads="3",
        socket_send_buffer_bytes="102400",  # honoured, not named
        num_recovery_threads_per_data_dir="1",
    ).start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


def test_ignored_keys_are_named_in_one_warning(configured: BrokerProcess) -> None:
    lines = configured.log_path.read_text().splitlines()
    warnings = [line for line in lines if "have no effect in Sluice" in line]
    assert len(warnings) == 1, lines
    assert " WARNING " in warnings[0]
    assert (
        warnings[0]
        .split("are ignored: ")[1]
        .startswith("num.network.threads, num.recovery.threads.per.data.dir ")
    )


def test_confluent_kafka_and_kafka_python_round_trip(configured: BrokerProcess) -> None:
    topic = "config-file-round-trip"
    admin = AdminClient({"bootstrap.servers": configured.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": configured.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(topic, value=b"c%d" % i)
    assert producer.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=configured.bootstrap, acks="all")
    for i in range(10):
        kp.send(topic, value=b"p%d" % i).get(timeout=30)
    kp.close()

    consumer = KafkaConsumer(
        bootstrap_servers=configured.bootstrap, auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )  # fmt: skip
    consumer.assign([KpTP(topic, 0)])
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == 20:
            break
    consumer.close()
    expected = [b"c%d" % i for i in range(10)] + [b"p%d" % i for i in range(10)]
    assert got == expected

    cc = Consumer({
        "bootstrap.servers": configured.bootstrap, "group.id": "config-file-group",
        "auto.offset.reset": "earliest",
    })  # fmt: skip
    cc.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        msg = cc.poll(1.0)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
        if len(values) == 20:
            break
    cc.close()
    assert values == expected


def test_unknown_key_stops_the_broker_with_a_suggestion(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "sluice", "broker",
         "--config", str(CONFIG_DIR / "server.properties"),
         "--override", f"log.dirs={tmp_path}", "--override", "num.partition=3"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr == (
        "sluice broker: unknown broker config 'num.partition'; did you mean 'num.partitions'?\n"
    )


def test_kraft_key_is_refused(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "sluice", "broker", "--override", f"log.dirs={tmp_path}",
         "--override", "process.roles=broker,controller"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2
    assert "Sluice runs in ZooKeeper mode" in run.stderr
