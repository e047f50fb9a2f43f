"""``sluice transactions describe-producers``, ``find-hanging`` and ``abort`` against a
hanging transaction made by confluent-kafka: a transactional producer whose
AddPartitionsToTxn the broker answers without telling the coordinator (as a lost
AddPartitionsToTxn leaves it), killed mid-transaction. Its records hold the partition's
last stable offset back until ``abort`` writes the marker; then read_committed consumers
(confluent-kafka and kafka-python) read past them. Also: a tool piped into ``head``
ends quietly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

import sluice
from sluice.cli import main
from sluice.client import Admin, NewTopic
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.testing import respond
from support.waiting import wait_until

TIMEOUT_S = 20.0
TOPIC = "payments"

PRODUCER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "stuck",
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(20)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(sys.argv[2], b"uncommitted-%d" % i, partition=0)
    producer.flush(20)
    print("sent", flush=True)
    time.sleep(60)
    """
)


def pretend_added(request: Request) -> object:
    """Answer AddPartitionsToTxn with success and keep it from the coordinator."""
    body = request.body
    return respond(
        request,
        results_by_topic_v3_and_below=[
            {"name": t.name,
             "results_by_partition": [{"partition_index": p,
                                       "partition_error_code": ErrorCode.none}
                                      for p in t.partitions]}
            for t in body.v3_and_below_topics  # type: ignore[union-attr]
        ],
    )  # fmt: skip


@pytest.fixture
def hanging(tmp_path: Path) -> Iterator[tuple[sluice.EmbeddedBroker, int]]:
    """A broker whose ``payments-0`` holds one committed record, then a hanging
    transaction starting at offset 1; yields the broker and that offset."""
    with sluice.EmbeddedBroker(config={"transaction.state.log.num.partitions": 1}) as broker:
        bootstrap = broker.bootstrap_servers
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic(TOPIC, 1)])
        before = Producer({"bootstrap.servers": bootstrap})
        before.produce(TOPIC, b"committed-before", partition=0)
        before.flush(TIMEOUT_S)
        broker.control(ApiKey.ADD_PARTITIONS_TO_TXN, pretend_added, keep=True)
        script = tmp_path / "producer.py"
        script.write_text(PRODUCER, encoding="utf-8")
        proc = subprocess.Popen(
            [sys.executable, str(script), bootstrap, TOPIC], stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == b"sent"
        finally:
            proc.send_signal(signal.SIGKILL)  # killed mid-transaction
            proc.wait(TIMEOUT_S)
        yield broker, 1


def tool(capsys: pytest.CaptureFixture[str], bootstrap: str, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["transactions", "--bootstrap-server", bootstrap, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def last_stable_offset(bootstrap: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    try:
        tp = KTopicPartition(TOPIC, 0)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def test_find_and_abort_a_hanging_transaction(
    hanging: tuple[sluice.EmbeddedBroker, int], capsys: pytest.CaptureFixture[str]
) -> None:
    broker, start = hanging
    bootstrap = broker.bootstrap_servers
    code, out, err = tool(capsys, bootstrap, "describe-producers", "--topic", TOPIC,
                          "--partition", "0")  # fmt: skip
    assert code == 0, err
    header, *rows = [line.split() for line in out.splitlines()]
    assert header == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                      "LastTimestamp", "CurrentTransactionStartOffset"]  # fmt: skip
    open_rows = [r for r in rows if r[5] != "None"]
    assert len(open_rows) == 1 and open_rows[0][5] == str(start)
    producer_id = open_rows[0][0]

    # not older than 15 minutes: not a candidate yet
    code, out, _ = tool(capsys, bootstrap, "find-hanging", "--broker-id", "0")
    assert (code, out.splitlines()[1:]) == (0, [])
    code, out, _ = tool(capsys, bootstrap, "find-hanging", "--topic", TOPIC,
                        "--max-transaction-timeout", "0")  # fmt: skip
    header, *found = [line.split() for line in out.splitlines()]
    assert header == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                      "StartOffset", "LastTimestamp", "Duration(min)"]  # fmt: skip
    assert [(r[0], r[1], r[2], r[5]) for r in found] == [(TOPIC, "0", producer_id, str(start))]
    assert last_stable_offset(bootstrap) == start  # read_committed consumers stop here

    code, _, err = tool(capsys, bootstrap, "abort", "--topic", TOPIC, "--partition", "0",
                        "--start-offset", "7")  # fmt: skip
    assert code == 1
    assert "Could not find any open transactions starting at offset 7 on partition" in err
    assert tool(capsys, bootstrap, "abort", "--topic", TOPIC, "--partition", "0",
                "--start-offset", str(start)) == (0, "", "")  # fmt: skip

    after = Producer({"bootstrap.servers": bootstrap})
    after.produce(TOPIC, b"committed-after", partition=0)
    after.flush(TIMEOUT_S)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc",
                         "isolation.level": "read_committed"})  # fmt: skip
    try:
        consumer.assign([CTopicPartition(TOPIC, 0, 0)])
        seen: list[bytes] = []

        def read_past() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
            return b"committed-after" in seen

        wait_until(read_past, TIMEOUT_S, "confluent-kafka reads past the aborted transaction")
        assert seen == [b"committed-before", b"committed-after"]
    finally:
        consumer.close()
    kconsumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                              auto_offset_reset="earliest", consumer_timeout_ms=10_000)  # fmt: skip
    try:
        kconsumer.assign([KTopicPartition(TOPIC, 0)])
        values = []
        for record in kconsumer:
            values.append(record.value)
            if record.value == b"committed-after":
                break
        assert values == [b"committed-before", b"committed-after"]
    finally:
        kconsumer.close()
    code, out, _ = tool(capsys, bootstrap, "find-hanging", "--topic", TOPIC,
                        "--max-transaction-timeout", "0")  # fmt: skip
    assert (code, out.splitlines()[1:]) == (0, [])


def test_abort_by_producer_id_and_argument_checks(
    hanging: tuple[sluice.EmbeddedBroker, int], capsys: pytest.CaptureFixture[str]
) -> None:
    broker, start = hanging
    bootstrap = broker.bootstrap_servers
    code, _, err = tool(capsys, bootstrap, "abort", "--topic", TOPIC, "--partition", "0")
    assert code == 2 and "must be identified either with --start-offset" in err
    code, _, err = tool(capsys, bootstrap, "abort", "--topic", TOPIC, "--partition", "0",
                        "--producer-id", "5", "--producer-epoch", "0")  # fmt: skip
    assert code == 2 and "Missing required argument --coordinator-epoch" in err
    code, _, err = tool(capsys, bootstrap, "find-hanging")
    assert code == 2 and "requires either --topic or --broker-id" in err
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        (state,) = [
            s
            for s in admin.describe_producers([(TOPIC, 0)])[(TOPIC, 0)]  # type: ignore[index]
            if s.current_transaction_start_offset == start
        ]
    assert tool(capsys, bootstrap, "abort", "--topic", TOPIC, "--partition", "0",
                "--producer-id", str(state.producer_id), "--producer-epoch",
                str(state.producer_epoch), "--coordinator-epoch", "-1") == (0, "", "")  # fmt: skip
    assert wait_until(lambda: last_stable_offset(bootstrap) > start, TIMEOUT_S, "LSO moves")


def test_tools_piped_into_head_end_quietly(
    hanging: tuple[sluice.EmbeddedBroker, int],
) -> None:
    bootstrap = hanging[0].bootstrap_servers
    for argv in (
        ["transactions", "--bootstrap-server", bootstrap, "describe-producers", "--topic",
         TOPIC, "--partition", "0"],
        ["configs", "--bootstrap-server", bootstrap, "--describe", "--broker", "0", "--all"],
    ):  # fmt: skip
        tool_proc = subprocess.Popen(
            [sys.executable, "-m", "sluice", *argv], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )  # fmt: skip
        assert tool_proc.stdout is not None and tool_proc.stderr is not None
        tool_proc.stdout.close()  # the reader is gone before the first line: EPIPE
        err = tool_proc.stderr.read()
        assert tool_proc.wait(TIMEOUT_S) == 0, err
        assert b"Traceback" not in err and b"BrokenPipe" not in err, err
