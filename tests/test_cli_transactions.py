"""``sluice transactions`` against an embedded broker, with transactions opened by
confluent-kafka and aiokafka producers."""

from __future__ import annotations

import asyncio
import io
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import Producer

import sluice
from sluice.cli import main
from sluice.cli.transactions import format_table


@dataclass
class Result:
    code: int
    out: str
    err: str


Run = Callable[..., Result]


@pytest.fixture
def run(
    broker: sluice.EmbeddedBroker,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Run]:
    def call(*argv: str) -> Result:
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        capsys.readouterr()
        code = main(["transactions", "--bootstrap-server", broker.bootstrap_servers, *argv])
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    yield call


def table(out: str) -> list[list[str]]:
    """Kafka's tab-separated table as cells."""
    return [[cell.strip() for cell in line.split("\t")] for line in out.splitlines()]


def only_broker_id(bootstrap: str) -> int:
    from sluice.client import Admin

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        (node,) = admin.describe_cluster().brokers
        return node.node_id


def make_topic(bootstrap: str) -> str:
    from sluice.client import Admin, NewTopic

    topic = f"txn-cli-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
    return topic


@pytest.mark.unit
def test_format_table_pads_and_tabs() -> None:
    assert format_table(["A", "Bee"], [["xx", "y"]]) == "A \tBee\nxx\ty\n"


def test_open_then_committed_confluent_transaction(broker: sluice.EmbeddedBroker, run: Run) -> None:
    topic = make_topic(broker.bootstrap_servers)
    txn_id = f"ck-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "transactional.id": txn_id, "transaction.timeout.ms": 60000})  # fmt: skip
    producer.init_transactions(15)
    # no transaction yet: Kafka's -1 start time prints as None
    r = run("describe", "--transactional-id", txn_id)
    assert r.code == 0, r.err
    _, row = table(r.out)
    assert row[1] == txn_id and row[4:9] == ["Empty", "60000", "None", "None", ""]
    producer.begin_transaction()
    producer.produce(topic, b"a", partition=1)
    assert producer.flush(15) == 0
    before = int(time.time() * 1000)

    r = run("list")
    assert r.code == 0, r.err
    rows = table(r.out)
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    mine = [row for row in rows[1:] if row[0] == txn_id]
    assert len(mine) == 1 and mine[0][3] == "Ongoing", r.out
    producer_id = mine[0][2]

    r = run("describe", "--transactional-id", txn_id)
    assert r.code == 0, r.err
    header, row = table(r.out)
    assert header == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                      "TransactionState", "TransactionTimeoutMs",
                      "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                      "TopicPartitions"]  # fmt: skip
    assert row[0] == mine[0][1] == str(only_broker_id(broker.bootstrap_servers))
    assert row[1:3] == [txn_id, producer_id]
    assert row[4:6] == ["Ongoing", "60000"]
    assert before - 60000 < int(row[6]) <= before and int(row[7]) >= 0
    assert row[8] == f"{topic}-1"

    producer.commit_transaction(15)
    r = run("describe", "--transactional-id", txn_id)
    _, row = table(r.out)
    # as Kafka, the coordinator keeps the last start time; no partitions are left open
    assert row[4] == "CompleteCommit" and row[8] == ""


def test_aiokafka_transaction_listed(broker: sluice.EmbeddedBroker, run: Run) -> None:
    from aiokafka import AIOKafkaProducer

    topic = make_topic(broker.bootstrap_servers)
    txn_id = f"aio-{uuid.uuid4().hex[:8]}"

    async def open_and_check() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                                    transactional_id=txn_id)  # fmt: skip
        await producer.start()
        try:
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"x", partition=0)
            r = await asyncio.to_thread(run, "describe", "--transactional-id", txn_id)
            assert r.code == 0, r.err
            _, row = table(r.out)
            assert row[4] == "Ongoing" and row[8] == f"{topic}-0"
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(open_and_check())
    r = run("list")
    assert [row[3] for row in table(r.out) if row[0] == txn_id] == ["CompleteAbort"]


def test_unknown_id_and_unknown_partition(run: Run) -> None:
    r = run("describe", "--transactional-id", f"nope-{uuid.uuid4().hex[:8]}")
    assert r.code == 1 and "Failed to describe transaction state of transactional-id" in r.err
    r = run("abort", "--topic", "no-such-topic", "--partition", "0", "--start-offset", "3")
    assert (
        r.code == 1 and "Failed to validate producer state for partition no-such-topic-0" in r.err
    )
    r = run()
    assert r.code == 2 and "a command is required" in r.err


@pytest.mark.unit
def test_none_start_time_decodes() -> None:
    """Kafka's -1 ("no transaction") start time, which kio cannot read as a timestamp,
    reaches the client as the epoch."""
    import datetime

    import kio.schema.describe_transactions.v0.response as v0

    from sluice.protocol import ApiKey, encode_response
    from sluice.protocol.build import build
    from sluice.protocol.responses import decode_response

    body = build(
        v0.DescribeTransactionsResponse, throttle_time=0,
        transaction_states=[{"error_code": 0, "transactional_id": "t",
                             "transaction_state": "Empty", "transaction_timeout": 60000,
                             "transaction_start_time": -1, "producer_id": 7,
                             "producer_epoch": 0, "topics": []}],
    )  # fmt: skip
    frame = encode_response(5, body)[4:]  # without the size prefix
    decoded = decode_response(frame, ApiKey.DESCRIBE_TRANSACTIONS, 0)
    (state,) = decoded.body.transaction_states  # type: ignore[union-attr]
    assert state.transaction_start_time == datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    assert (decoded.correlation_id, state.producer_id) == (5, 7)
