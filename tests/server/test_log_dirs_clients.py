"""DescribeLogDirs and AlterReplicaLogDirs on a broker with two log dirs, through real
clients: kafka-python's describe_log_dirs / alter_replica_log_dirs, Sluice's admin and
``sluice log-dirs``, with confluent-kafka producing under acks=all while a partition
moves and aiokafka reading everything back (confluent-kafka has no log-dir admin API).
Nothing acknowledged is lost and every record keeps its offset."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.cli import main as cli_main
from sluice.client import Admin
from sluice.client.admin import TopicPartitionReplica
from sluice.client.errors import KafkaException
from sluice.protocol import ErrorCode
from sluice.testing import EmbeddedBroker
from support.clients import create_topic
from support.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "a", tmp_path / "b"


@pytest.fixture
def two_dir_broker(dirs: tuple[Path, Path]) -> Iterator[EmbeddedBroker]:
    a, b = dirs
    with EmbeddedBroker({"log.dirs": f"{a},{b}"}, log_dir=a) as broker:
        yield broker


def _kafka_python_admin(bootstrap: str) -> Any:
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)


def _where(admin: Any, topic: str, partition: int) -> dict[str, dict[str, Any]]:
    """kafka-python's view: log dir -> the partition's entry there."""
    (broker,) = admin.describe_log_dirs(topic_partitions={topic: [partition]})
    found = {}
    for d in broker["log_dirs"]:
        assert d["error_code"] == 0
        for t in d["topics"]:
            for p in t["partitions"]:
                found[d["log_dir"]] = p
    return found


def test_describe_log_dirs_with_kafka_python(
    two_dir_broker: EmbeddedBroker, dirs: tuple[Path, Path]
) -> None:
    bootstrap = two_dir_broker.bootstrap_servers
    create_topic(bootstrap, "described", 4)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(400):
        producer.produce("described", b"v" * 100, partition=i % 4)
    assert producer.flush(30) == 0
    admin = _kafka_python_admin(bootstrap)
    try:
        (broker,) = admin.describe_log_dirs()
        assert broker["broker"] == 0
        by_dir = {d["log_dir"]: d for d in broker["log_dirs"]}
        assert set(by_dir) == {str(d.absolute()) for d in dirs}
        placed: dict[str, list[int]] = {}
        for path, d in by_dir.items():
            assert d["error_code"] == 0
            assert d["total_bytes"] >= d["usable_bytes"] > 0
            for t in d["topics"]:
                if t["name"] != "described":
                    continue
                for p in t["partitions"]:
                    placed.setdefault(path, []).append(p["partition_index"])
                    log_dir = Path(path) / f"described-{p['partition_index']}"
                    on_disk = sum(f.stat().st_size for f in log_dir.glob("*.log"))
                    assert p["partition_size"] == on_disk > 0
                    assert p["offset_lag"] == 0 and p["is_future_key"] is False
        # Kafka's rule: each new log in the dir with the fewest logs
        assert sorted(len(ps) for ps in placed.values()) == [2, 2]
        only = _where(admin, "described", 1)
        assert len(only) == 1
    finally:
        admin.close()


def test_a_partition_moves_under_produce_load_without_losing_anything(
    two_dir_broker: EmbeddedBroker, dirs: tuple[Path, Path]
) -> None:
    bootstrap = two_dir_broker.bootstrap_servers
    create_topic(bootstrap, "moving", 1)
    from confluent_kafka import Producer

    acked: list[tuple[int, bytes]] = []
    errors: list[object] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1, "batch.size": 16384}
        )

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                acked.append((msg.offset(), msg.value()))

        i = 0
        while not stop.is_set():
            producer.produce("moving", b"m-%08d" % i + b"." * 200, on_delivery=delivered)
            producer.poll(0)
            i += 1
            if i % 500 == 0:
                producer.flush(10)
        assert producer.flush(30) == 0

    thread = threading.Thread(target=produce)
    thread.start()
    admin = _kafka_python_admin(bootstrap)
    try:
        wait_until(lambda: len(acked) > 50_000, 60, "50000 records acknowledged")
        (source,) = _where(admin, "moving", 0)
        (target,) = {str(d.absolute()) for d in dirs} - {source}
        count_at_alter = len(acked)
        result = admin.alter_replica_log_dirs({("moving", 0, 0): target})
        assert [e.__name__ for e in result.values()] == ["NoError"]

        def moved() -> bool:
            where = _where(admin, "moving", 0)
            return list(where) == [target] and not where[target]["is_future_key"]

        wait_until(moved, 60, "the partition moved")
        count_after_move = len(acked)
        assert count_after_move > count_at_alter  # appends went on during the move
        wait_until(lambda: len(acked) > count_after_move + 2000, 30, "appends after the move")
    finally:
        stop.set()
        thread.join(60)
        admin.close()
    assert errors == []
    assert not os.path.exists(os.path.join(source, "moving-0"))
    assert sorted(os.listdir(target)).count("moving-0") == 1
    read = _read_all_aiokafka(bootstrap, "moving", max(o for o, _ in acked) + 1)
    assert [o for o, _ in read] == list(range(len(read)))  # offsets unchanged, no gap
    by_offset = dict(read)
    assert all(by_offset.get(offset) == value for offset, value in acked)


def _read_all_aiokafka(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[tuple[int, bytes]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got: list[tuple[int, bytes]] = []
            while not got or got[-1][0] < end - 1:
                batch = await asyncio.wait_for(consumer.getmany(tp, timeout_ms=1000), 30)
                got += [(m.offset, m.value) for m in batch.get(tp, [])]
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


def test_sluice_admin_and_the_log_dirs_tool(
    two_dir_broker: EmbeddedBroker, dirs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = two_dir_broker.bootstrap_servers
    create_topic(bootstrap, "tool", 2)
    a, b = (str(d.absolute()) for d in dirs)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        described = admin.describe_log_dirs(partitions=[("tool", 0), ("tool", 1)])
        assert set(described[0]) == {a, b}
        (source,) = [p for p, d in described[0].items() if ("tool", 0) in d.replicas]
        target = b if source == a else a
        admin.alter_replica_log_dirs({TopicPartitionReplica("tool", 0, 0): target})
        wait_until(
            lambda: ("tool", 0) in admin.describe_log_dirs()[0][target].replicas,
            30,
            "the move",
        )
        with pytest.raises(KafkaException) as raised:
            admin.alter_replica_log_dirs({TopicPartitionReplica("tool", 0, 0): "/not/a/log/dir"})
        assert raised.value.code == ErrorCode.log_dir_not_found
        with pytest.raises(KafkaException) as raised:
            admin.alter_replica_log_dirs({TopicPartitionReplica("nope", 0, 0): a})
        assert raised.value.code == ErrorCode.unknown_topic_or_partition
    status = cli_main(["log-dirs", "--bootstrap-server", bootstrap, "--describe",
                       "--topic-list", "tool"])  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert status == 0
    assert out[0] == "Querying brokers for log directories information"
    assert out[1] == "Received log directory information from brokers 0"
    doc = json.loads(out[2])
    assert doc["version"] == 1 and [br["broker"] for br in doc["brokers"]] == [0]
    log_dirs = {d["logDir"]: d for d in doc["brokers"][0]["logDirs"]}
    assert set(log_dirs) == {a, b}
    assert all(d["error"] is None for d in log_dirs.values())
    assert {p["partition"] for p in log_dirs[target]["partitions"]} >= {"tool-0"}
    entry = next(p for p in log_dirs[target]["partitions"] if p["partition"] == "tool-0")
    assert list(entry) == ["partition", "size", "offsetLag", "isFuture"]
    assert cli_main(["log-dirs", "--bootstrap-server", bootstrap]) == 2
    assert "Command must include option '--describe'" in capsys.readouterr().err
    assert cli_main(["log-dirs", "--bootstrap-server", bootstrap, "--describe",
                     "--broker-list", "0,7"]) == 1  # fmt: skip
    assert "do not exist from --broker-list: 7" in capsys.readouterr().err


def test_an_offline_log_dir_is_described_with_kafka_storage_error(
    two_dir_broker: EmbeddedBroker, dirs: tuple[Path, Path]
) -> None:
    bootstrap = two_dir_broker.bootstrap_servers
    create_topic(bootstrap, "ok", 1)
    broker = two_dir_broker.broker
    _, b = dirs
    broker.log_dir_failure_channel.maybe_add_offline_log_dir(b, "testing", OSError(5, "EIO"))
    admin = _kafka_python_admin(bootstrap)
    try:

        def described() -> dict[str, Any]:
            (found,) = admin.describe_log_dirs()
            return {d["log_dir"]: d for d in found["log_dirs"]}

        wait_until(lambda: described()[str(b.absolute())]["error_code"] == 56, 10, "offline")
        offline = described()[str(b.absolute())]
        assert offline["topics"] == [] and offline["total_bytes"] == -1
        result = admin.alter_replica_log_dirs({("ok", 0, 0): str(b)})
        assert [e.__name__ for e in result.values()] == ["KafkaStorageError"]
    finally:
        admin.close()
