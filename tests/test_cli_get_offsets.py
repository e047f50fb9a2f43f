"""``sluice get-offsets`` in-process against one embedded broker, its answers checked
against what confluent-kafka and kafka-python read for the same partitions; the
filter and time parsing as plain units; once as a subprocess piped into ``head``."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import sluice
from sluice.cli import main
from sluice.cli.arguments import UsageError
from sluice.cli.get_offsets import parse_time, parse_topic_partitions

PARTITIONS = 3
PER_PARTITION = 4
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def topic(broker: sluice.EmbeddedBroker) -> Iterator[str]:
    """A topic of 3 partitions; partition p holds 4 records of timestamps
    BASE_TS + 10 * i + p (i = 0..3), so partition 0's records are at 0, 10, 20, 30."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"offsets-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(timeout=15)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            producer.produce(name, b"v", partition=p, timestamp=BASE_TS + 10 * i + p)
    assert producer.flush(15) == 0
    yield name


def _run(
    capsys: pytest.CaptureFixture[str], broker: sluice.EmbeddedBroker, *args: str
) -> tuple[int, list[str], str]:
    capsys.readouterr()
    code = main(["get-offsets", "--bootstrap-server", broker.bootstrap_servers, *args])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def _parse(lines: list[str]) -> dict[tuple[str, int], int]:
    out = {}
    for line in lines:
        topic, partition, offset = line.rsplit(":", 2)
        out[(topic, int(partition))] = int(offset)
    return out


def _confluent_offsets(bootstrap: str, topic: str, ts: int | None) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        if ts is None:
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(PARTITIONS)
            }
        found = consumer.offsets_for_times(
            [TopicPartition(topic, p, ts) for p in range(PARTITIONS)], timeout=10
        )
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
    finally:
        consumer.close()


def _kafka_python(bootstrap: str) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(bootstrap_servers=bootstrap)


def test_latest_and_earliest_match_the_clients(
    capsys: pytest.CaptureFixture[str], broker: sluice.EmbeddedBroker, topic: str
) -> None:
    from kafka import TopicPartition

    code, lines, err = _run(capsys, broker, "--topic", topic)
    assert code == 0, err
    assert lines == [f"{topic}:{p}:{PER_PARTITION}" for p in range(PARTITIONS)]
    assert _parse(lines) == {
        (topic, p): o for p, o in _confluent_offsets(broker.bootstrap_servers, topic, None).items()
    }
    code, lines, err = _run(capsys, broker, "--topic", topic, "--time", "-2")
    assert code == 0, err
    consumer = _kafka_python(broker.bootstrap_servers)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        begin = consumer.beginning_offsets(tps)
        end = consumer.end_offsets(tps)
    finally:
        consumer.close()
    assert _parse(lines) == {(tp.topic, tp.partition): o for tp, o in begin.items()}
    assert set(begin.values()) == {0}
    code, lines, _ = _run(capsys, broker, "--topic", topic, "--time", "latest")
    assert _parse(lines) == {(tp.topic, tp.partition): o for tp, o in end.items()}


def test_timestamps_match_offsets_for_times(
    capsys: pytest.CaptureFixture[str], broker: sluice.EmbeddedBroker, topic: str
) -> None:
    from kafka import TopicPartition

    ts = BASE_TS + 11  # the first record at/after it: p0's +20 (i=2), p1's +11, p2's +12
    code, lines, err = _run(capsys, broker, "--topic", topic, "--time", str(ts))
    assert code == 0, err
    assert _parse(lines) == {(topic, 0): 2, (topic, 1): 1, (topic, 2): 1}
    expected = _confluent_offsets(broker.bootstrap_servers, topic, ts)
    assert _parse(lines) == {(topic, p): o for p, o in expected.items()}
    consumer = _kafka_python(broker.bootstrap_servers)
    try:
        found = consumer.offsets_for_times({TopicPartition(topic, p): ts for p in range(3)})
    finally:
        consumer.close()
    assert _parse(lines) == {(tp.topic, tp.partition): o.offset for tp, o in found.items()}
    # After every record: no offset, so no line (as Kafka leaves such partitions out).
    code, lines, err = _run(capsys, broker, "--topic", topic, "--time", str(BASE_TS + 10**6))
    assert (code, lines) == (0, [])


def test_max_timestamp(
    capsys: pytest.CaptureFixture[str], broker: sluice.EmbeddedBroker, topic: str
) -> None:
    code, lines, err = _run(capsys, broker, "--topic", topic, "--time", "max-timestamp")
    assert code == 0, err
    assert lines == [f"{topic}:{p}:{PER_PARTITION - 1}" for p in range(PARTITIONS)]
    assert _run(capsys, broker, "--topic", topic, "--time", "-3")[1] == lines


def test_partition_filters(
    capsys: pytest.CaptureFixture[str], broker: sluice.EmbeddedBroker, topic: str
) -> None:
    code, lines, _ = _run(capsys, broker, "--topic", topic, "--partitions", "0,2")
    assert (code, lines) == (0, [f"{topic}:0:4", f"{topic}:2:4"])
    code, lines, _ = _run(capsys, broker, "--topic-partitions", f"{topic}:1-")
    assert lines == [f"{topic}:1:4", f"{topic}:2:4"]
    code, lines, _ = _run(capsys, broker, "--topic-partitions", f"{topic}:-1,{topic}:2")
    assert lines == [f"{topic}:0:4", f"{topic}:2:4"]
    # Every topic (a regex matching all), then without the internal ones.
    _, lines, _ = _run(capsys, broker, "--partitions", "0")
    assert {"__consumer_offsets:0:0", f"{topic}:0:4"} <= set(lines)
    _, lines, _ = _run(capsys, broker, "--partitions", "0", "--exclude-internal-topics")
    assert f"{topic}:0:4" in lines
    assert not [line for line in lines if line.startswith("__")]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--topic", "no-such-topic-.*"], 1, "Could not match any topic-partitions"),
        (["--time", "yesterday"], 2, "Malformed time argument yesterday"),
        (["--topic-partitions", "a:1", "--topic", "a"], 2, "cannot be used with --topic"),
        (["--partitions", "x"], 2, "comma-separated list of partition ids"),
    ],
)
def test_errors(
    capsys: pytest.CaptureFixture[str],
    broker: sluice.EmbeddedBroker,
    args: list[str],
    code: int,
    message: str,
) -> None:
    got, lines, err = _run(capsys, broker, *args)
    assert (got, lines) == (code, [])
    assert err.startswith("sluice get-offsets: error: ") and message in err


def test_a_closed_stdout_pipe_prints_no_traceback(
    broker: sluice.EmbeddedBroker, topic: str
) -> None:
    """Like ``| head -1`` with head gone before the output: every write meets EPIPE."""
    argv = [sys.executable, "-m", "sluice", "get-offsets"]
    argv += ["--bootstrap-server", broker.bootstrap_servers]
    src = os.path.join(os.path.dirname(sluice.__file__), os.pardir)
    env = {**os.environ, "PYTHONPATH": os.path.abspath(src)}
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, env=env, timeout=60)
    finally:
        os.close(write_end)
    assert done.returncode == 0
    assert done.stderr == b""


def test_topic_partition_patterns() -> None:
    rules = parse_topic_partitions("t1:1,t2:0-3,t3,t4:5-,t5:-3,:7")
    assert rules.matches("t1", 1) and not rules.matches("t1", 0)
    assert rules.matches("t2", 2) and not rules.matches("t2", 3)
    assert rules.matches("t3", 99)
    assert rules.matches("t4", 5) and not rules.matches("t4", 4)
    assert rules.matches("t5", 2) and not rules.matches("t5", 3)
    assert rules.matches("anything", 7) and not rules.matches("anything", 6)
    assert not rules.matches("t11", 1)  # a topic regex matches the whole name
    assert parse_topic_partitions("t.*").matches("topic", 0)
    for bad in ("t:x", "t:1:2", "t:", "[:1"):
        with pytest.raises(UsageError):
            parse_topic_partitions(bad)


def test_time_values() -> None:
    assert parse_time("latest") == parse_time("-1") == "latest"
    assert parse_time("earliest") == parse_time("-2") == "earliest"
    assert parse_time("max-timestamp") == parse_time("-3") == -3
    assert parse_time("1700000000000") == 1_700_000_000_000
    for bad in ("-4", "soon", ""):
        with pytest.raises(UsageError):
            parse_time(bad)
