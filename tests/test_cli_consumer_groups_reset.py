"""``sluice consumer-groups --reset-offsets`` and ``--describe --members/--state``
against an embedded broker, with groups made by confluent-kafka and kafka-python."""

from __future__ import annotations

import datetime
import io
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP

import sluice
from sluice.cli import main
from sluice.cli.offset_reset import (
    ResetError,
    ResetSpec,
    parse_datetime,
    parse_duration,
    parse_topic_scope,
    plan,
)


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def run(
    broker: sluice.EmbeddedBroker,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Run]:
    def call(*argv: str) -> Result:
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        capsys.readouterr()
        code = main(["consumer-groups", "--bootstrap-server", broker.bootstrap_servers, *argv])
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    yield call


Run = Callable[..., Result]


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip()]


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    """Create ``topic`` and write ``per_partition`` records to each partition, with
    timestamps 1000, 2000, ... ms."""
    from sluice.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, b"v%d" % i, partition=p, timestamp=(i + 1) * 1000)
    assert producer.flush(15) == 0


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[CTP(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([CTP(topic, p) for p in range(partitions)], timeout=10)
        return [tp.offset for tp in tps]
    finally:
        consumer.close()


def only_broker_id(bootstrap: str) -> int:
    from sluice.client import Admin

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        (node,) = admin.describe_cluster().brokers
        return node.node_id


@pytest.fixture
def names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:10]
    return f"reset-{tag}", f"g-{tag}"


# --- the plan, without I/O -------------------------------------------------------------


@pytest.mark.unit
def test_plan_modes_and_bounds() -> None:
    tps = [("t", 0), ("t", 1)]
    committed_ = {("t", 0): 5}
    low = {("t", 0): 2, ("t", 1): 0}
    high = {("t", 0): 10, ("t", 1): 4}
    warnings: list[str] = []
    assert plan(ResetSpec("to-earliest"), tps, committed_, low, high) == {("t", 0): 2, ("t", 1): 0}
    assert plan(ResetSpec("to-latest"), tps, committed_, low, high) == {("t", 0): 10, ("t", 1): 4}
    assert plan(ResetSpec("to-current"), tps, committed_, low, high) == {("t", 0): 5, ("t", 1): 4}
    got = plan(ResetSpec("to-offset", 7), tps, committed_, low, high, warn=warnings.append)
    assert got == {("t", 0): 7, ("t", 1): 4}
    assert warnings == [
        "New offset (7) is higher than latest offset for topic partition t-1. "
        "Value will be set to 4"
    ]
    assert plan(ResetSpec("shift-by", -4), tps[:1], committed_, low, high) == {("t", 0): 2}
    assert plan(ResetSpec("shift-by", 3), tps[:1], committed_, low, high) == {("t", 0): 8}
    with pytest.raises(ResetError, match="no current committed offset"):
        plan(ResetSpec("shift-by", 1), tps, committed_, low, high)
    by_time = {("t", 0): 3, ("t", 1): None}
    got = plan(ResetSpec("to-datetime", 0), tps, committed_, low, high, by_time)
    assert got == {("t", 0): 3, ("t", 1): 4}


@pytest.mark.unit
def test_parsers() -> None:
    assert parse_datetime("1970-01-01T00:00:01.500Z") == 1500
    assert parse_datetime("1970-01-01T01:00:02.000+01:00") == 2000
    assert parse_datetime("1970-01-01T01:00:02.000+0100") == 2000
    assert parse_datetime("1970-01-01T00:00:03", datetime.UTC) == 3000
    local = datetime.datetime(2024, 5, 1, 12, 0, 0).astimezone()
    assert parse_datetime("2024-05-01T12:00:00.000") == int(local.timestamp()) * 1000
    for bad in ("2024-05-01", "2024-13-01T00:00:00.000", "yesterday"):
        with pytest.raises(ResetError):
            parse_datetime(bad)
    assert parse_duration("PT0H5M0S") == 300_000
    assert parse_duration("P1DT1.5S") == 86_401_500
    for bad in ("P", "PT", "5M", "P1DT"):
        with pytest.raises(ResetError):
            parse_duration(bad)
    assert parse_topic_scope("t") == ("t", None)
    assert parse_topic_scope("t:2,0,2") == ("t", [0, 2])
    for bad in (":1", "t:x", "t:-1"):
        with pytest.raises(ResetError):
            parse_topic_scope(bad)


# --- against a broker --------------------------------------------------------------------


def test_dry_run_prints_the_plan_and_commits_nothing(
    broker: sluice.EmbeddedBroker, run: Run, names: tuple[str, str]
) -> None:
    topic, group = names
    fill(broker.bootstrap_servers, topic, 2, 5)
    commit(broker.bootstrap_servers, group, {(topic, 0): 3, (topic, 1): 1})
    r = run("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest")
    assert r.code == 0, r.err
    assert "No action will be performed" in r.err
    assert rows(r.out) == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        [group, topic, "0", "0"],
        [group, topic, "1", "0"],
    ]
    r = run("--reset-offsets", "--group", group, "--all-topics", "--to-latest", "--dry-run")
    assert r.code == 0 and r.err == ""
    assert rows(r.out)[1:] == [[group, topic, "0", "5"], [group, topic, "1", "5"]]
    assert committed(broker.bootstrap_servers, group, topic, 2) == [3, 1]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (["--to-earliest"], [0, 0]),
        (["--to-latest"], [5, 5]),
        (["--to-current"], [3, 1]),
        (["--to-offset", "4"], [4, 4]),
        (["--to-offset", "99"], [5, 5]),
        (["--shift-by", "-2"], [1, 0]),
        (["--shift-by", "1"], [4, 2]),
        (["--to-datetime", "1970-01-01T00:00:03.000Z"], [2, 2]),
        (["--to-datetime", "1970-01-01T01:00:02.500+01:00"], [2, 2]),
        (["--to-datetime", "2999-01-01T00:00:00.000Z"], [5, 5]),
        (["--by-duration", "PT1M"], [5, 5]),
        (["--by-duration", "P100000D"], [0, 0]),
    ],
)
def test_execute_each_mode(
    broker: sluice.EmbeddedBroker,
    run: Run,
    names: tuple[str, str],
    mode: list[str],
    expected: list[int],
) -> None:
    topic, group = names
    fill(broker.bootstrap_servers, topic, 2, 5)
    commit(broker.bootstrap_servers, group, {(topic, 0): 3, (topic, 1): 1})
    r = run("--reset-offsets", "--group", group, "--topic", topic, *mode, "--execute")
    assert r.code == 0, r.err
    assert rows(r.out)[1:] == [[group, topic, str(p), str(o)] for p, o in enumerate(expected)]
    assert committed(broker.bootstrap_servers, group, topic, 2) == expected


def test_execute_on_listed_partitions_only(
    broker: sluice.EmbeddedBroker, run: Run, names: tuple[str, str]
) -> None:
    topic, group = names
    fill(broker.bootstrap_servers, topic, 3, 4)
    r = run("--reset-offsets", "--group", group, "--topic", f"{topic}:0,2",
            "--to-latest", "--execute")  # fmt: skip
    assert r.code == 0, r.err
    assert committed(broker.bootstrap_servers, group, topic, 3) == [4, -1001, 4]
    # shift-by needs a committed offset for every partition in scope
    r = run("--reset-offsets", "--group", group, "--topic", topic, "--shift-by", "1",
            "--execute")  # fmt: skip
    assert r.code == 1 and "no current committed offset" in r.err


def wait_for_state(run: Run, group: str, state: str, members: int) -> list[list[str]]:
    deadline = time.monotonic() + 20
    while True:
        r = run("--describe", "--group", group, "--state")
        table = rows(r.out) if r.code == 0 else []
        if table and table[1][-2:] == [state, str(members)]:
            return table
        assert time.monotonic() < deadline, (r.out, r.err)
        time.sleep(0.2)


def test_active_confluent_group_refused_then_reset_after_close(
    broker: sluice.EmbeddedBroker, run: Run, names: tuple[str, str]
) -> None:
    topic, group = names
    fill(broker.bootstrap_servers, topic, 2, 5)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                        "client.id": "ck-member", "auto.offset.reset": "earliest",
                        "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})  # fmt: skip
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        state = wait_for_state(run, group, "Stable", 1)
        assert state[0] == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE",
                            "#MEMBERS"]  # fmt: skip
        host, port = broker.bootstrap_servers.split(":")
        assert state[1][:2] == [group, f"{host}:{port}"]
        assert state[1][2] == f"({only_broker_id(broker.bootstrap_servers)})"
        assert state[1][3] == "range"
        r = run("--describe", "--group", group, "--members")
        assert r.code == 0, r.err
        table = rows(r.out)
        assert table[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert len(table) == 2 and table[1][0] == group and table[1][3:] == ["ck-member", "2"]
        r = run("--describe", "--group", group, "--members", "--verbose")
        table = rows(r.out)
        assert table[0][-1] == "ASSIGNMENT" and table[0][2] == "GROUP-INSTANCE-ID"
        assert table[1][2] == "-" and table[1][-1] == f"{topic}(0,1)"
        for flag in ("--dry-run", "--execute"):
            r = run("--reset-offsets", "--group", group, "--all-topics", "--to-earliest", flag)
            assert r.code == 1 and r.out == ""
            assert (
                f"Assignments can only be reset if the group '{group}' is inactive, "
                "but the current state is Stable." in r.err
            )
    finally:
        consumer.close()
    wait_for_state(run, group, "Empty", 0)
    r = run("--describe", "--group", group, "--members")
    assert "has no active members" in r.out
    r = run("--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "2",
            "--execute")  # fmt: skip
    assert r.code == 0, r.err
    assert committed(broker.bootstrap_servers, group, topic, 2) == [2, 2]


def test_kafka_python_group_members_and_reset(
    broker: sluice.EmbeddedBroker, run: Run, names: tuple[str, str]
) -> None:
    from kafka import KafkaConsumer

    topic, group = names
    fill(broker.bootstrap_servers, topic, 2, 3)
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             client_id="kp-member", auto_offset_reset="earliest",
                             enable_auto_commit=False)  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        seen = 0
        while seen < 6 and time.monotonic() < deadline:
            seen += sum(len(v) for v in consumer.poll(200).values())
        consumer.commit()
        wait_for_state(run, group, "Stable", 1)
        r = run("--describe", "--group", group, "--members", "--verbose")
        table = rows(r.out)
        assert table[1][4:] == ["kp-member", "2", f"{topic}(0,1)"], r.out
        r = run("--reset-offsets", "--group", group, "--all-topics", "--to-earliest",
                "--execute")  # fmt: skip
        assert r.code == 1 and "is inactive" in r.err
    finally:
        consumer.close()
    wait_for_state(run, group, "Empty", 0)
    r = run("--reset-offsets", "--group", group, "--all-topics", "--shift-by", "-1",
            "--execute")  # fmt: skip
    assert r.code == 0, r.err
    assert committed(broker.bootstrap_servers, group, topic, 2) == [2, 2]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--reset-offsets", "--group", "g", "--to-earliest"], "one scope"),
        (["--reset-offsets", "--group", "g", "--all-topics"], "exactly one of"),
        (["--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest"],
         "exactly one of"),
        (["--reset-offsets", "--group", "g", "--all-topics", "--to-offset", "x"],
         "takes an integer"),
        (["--reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "now"],
         "Error parsing timestamp"),
        (["--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--dry-run",
          "--execute"], "not both"),
        (["--describe", "--group", "g", "--verbose"], "--verbose goes with"),
        (["--list", "--members"], "is an option of --describe"),
        (["--describe", "--group", "g", "--execute"], "go with --reset-offsets"),
    ],
)  # fmt: skip
def test_usage_errors(run: Run, argv: list[str], message: str) -> None:
    r = run(*argv)
    assert (r.code, r.out) == (2, "")
    assert message in r.err


def test_piped_into_head_prints_no_traceback(
    broker: sluice.EmbeddedBroker, names: tuple[str, str]
) -> None:
    topic, group = names
    group = group + "x" * 4000  # rows long enough to fill the pipe before head exits
    fill(broker.bootstrap_servers, topic, 40, 1)
    commit(broker.bootstrap_servers, group, {(topic, p): 1 for p in range(40)})
    for action in (["--describe"], ["--reset-offsets", "--all-topics", "--to-earliest"]):
        argv = [sys.executable, "-m", "sluice", "consumer-groups", "--bootstrap-server",
                broker.bootstrap_servers, "--group", group, *action]  # fmt: skip
        command = " ".join(f"'{a}'" for a in argv) + " | head -1"
        # a buffered stdout, as in a terminal session (unbuffered writes hide the error)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
        assert done.returncode == 0, done.stderr
        assert len(done.stdout.splitlines()) == 1
