"""Transactions against a real broker process: confluent-kafka, kafka-python and aiokafka
transactional producers, read_committed vs read_uncommitted consumers, the LSO holding
back records after an open transaction, zombie fencing, exactly-once
consume-transform-produce with send_offsets_to_transaction, recovery of the transaction
state across a restart, and Kafka's error codes for bad transaction requests."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as CkTopicPartition

from support import txn_transform
from support.brokers import BrokerProcess, broker_process
from support.waiting import wait_until
from support.wire import RawClient

TXN_BROKER = {
    "transaction.state.log.num.partitions": "4",
    "offsets.topic.num.partitions": "4",
    "num.partitions": "1",
    "transaction.max.timeout.ms": "60000",
}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with broker_process(tmp_path_factory.mktemp("txn-broker"), **TXN_BROKER) as proc:
        yield proc


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def txn_producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    config = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5}
    config.update(extra)
    producer = Producer(config)
    producer.init_transactions(30)
    return producer


def consume_all(
    bootstrap: str, topic: str, isolation: str, expected: int, timeout_s: float = 20
) -> list[bytes]:
    """Values read from the start of ``topic`` with ``isolation``: waits until
    ``expected`` arrived, then one more poll that must bring nothing else."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap, "group.id": _id("g"),
            "auto.offset.reset": "earliest", "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )  # fmt: skip
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            values.append(msg.value())
    extra = consumer.poll(0.5)
    if extra is not None and not extra.error():
        values.append(extra.value())
    consumer.close()
    return values


# -- confluent-kafka ---------------------------------------------------------------------------
def test_commit_and_abort_with_both_isolation_levels(txn_broker: BrokerProcess) -> None:
    topic = _id("t")
    producer = txn_producer(txn_broker.bootstrap, _id("tx"))
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"c1-{i}".encode())
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"a-{i}".encode())
    producer.flush(30)  # the aborted records reach the log before the abort
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"c2-0")
    producer.commit_transaction(30)
    committed = [f"c1-{i}".encode() for i in range(5)] + [b"c2-0"]
    aborted = [f"a-{i}".encode() for i in range(3)]
    assert consume_all(txn_broker.bootstrap, topic, "read_committed", 6) == committed
    uncommitted = consume_all(txn_broker.bootstrap, topic, "read_uncommitted", 9)
    assert uncommitted == committed[:5] + aborted + committed[5:]


def test_records_after_an_open_transaction_are_held_back(txn_broker: BrokerProcess) -> None:
    topic = _id("t")
    txn = txn_producer(txn_broker.bootstrap, _id("tx"))
    plain = Producer({"bootstrap.servers": txn_broker.bootstrap})
    plain.produce(topic, value=b"before")
    plain.flush(30)
    txn.begin_transaction()
    txn.produce(topic, value=b"in-txn")
    txn.flush(30)
    plain.produce(topic, value=b"after")
    plain.flush(30)
    # The LSO is the open transaction's first offset: only "before" is readable.
    assert consume_all(txn_broker.bootstrap, topic, "read_committed", 1) == [b"before"]
    assert len(consume_all(txn_broker.bootstrap, topic, "read_uncommitted", 3)) == 3
    lso = _list_offset(txn_broker.bootstrap, topic, isolation=1)
    hw = _list_offset(txn_broker.bootstrap, topic, isolation=0)
    assert (lso, hw) == (1, 3)
    txn.commit_transaction(30)
    wait_until(
        lambda: _list_offset(txn_broker.bootstrap, topic, isolation=1) == 4, 10, "LSO after commit"
    )
    values = consume_all(txn_broker.bootstrap, topic, "read_committed", 3)
    assert values == [b"before", b"in-txn", b"after"]


def test_a_waiting_read_committed_fetch_is_woken_by_the_commit(txn_broker: BrokerProcess) -> None:
    topic = _id("t")
    txn = txn_producer(txn_broker.bootstrap, _id("tx"))
    txn.begin_transaction()
    txn.produce(topic, value=b"x")
    txn.flush(30)
    consumer = Consumer(
        {"bootstrap.servers": txn_broker.bootstrap, "group.id": _id("g"),
         "isolation.level": "read_committed", "fetch.wait.max.ms": 5000,
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    assert consumer.poll(0.5) is None  # parked in the fetch purgatory below the LSO
    started = time.monotonic()
    txn.commit_transaction(30)
    msg = None
    while msg is None and time.monotonic() - started < 10:
        msg = consumer.poll(0.1)
    assert msg is not None and msg.value() == b"x"
    consumer.close()


def _list_offset(bootstrap: str, topic: str, isolation: int) -> int:
    from kio.schema.list_offsets.v5.request import (
        ListOffsetsPartition,
        ListOffsetsRequest,
        ListOffsetsTopic,
    )
    from kio.schema.types import TopicName
    from kio.static.primitive import i8, i32, i64

    client = RawClient(bootstrap)
    try:
        response: Any = client.request(
            ListOffsetsRequest(
                replica_id=-1, isolation_level=i8(isolation),  # type: ignore[arg-type]
                topics=(ListOffsetsTopic(name=TopicName(topic), partitions=(
                    ListOffsetsPartition(partition_index=i32(0), current_leader_epoch=i32(-1),
                                         timestamp=i64(-1)),)),),
            )
        )  # fmt: skip
    finally:
        client.close()
    return int(response.topics[0].partitions[0].offset)


def test_a_second_producer_with_the_same_id_fences_the_first(txn_broker: BrokerProcess) -> None:
    topic, txn_id = _id("t"), _id("tx")
    first = txn_producer(txn_broker.bootstrap, txn_id)
    first.begin_transaction()
    first.produce(topic, value=b"zombie")
    first.flush(30)
    second = txn_producer(txn_broker.bootstrap, txn_id)  # aborts the zombie's transaction
    with pytest.raises(KafkaException) as info:
        first.commit_transaction(30)
    error: KafkaError = info.value.args[0]
    assert error.fatal(), error
    assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), error
    second.begin_transaction()
    second.produce(topic, value=b"winner")
    second.commit_transaction(30)
    assert consume_all(txn_broker.bootstrap, topic, "read_committed", 1) == [b"winner"]


def test_send_offsets_to_transaction_gives_exactly_once_output(txn_broker: BrokerProcess) -> None:
    """Consume-transform-produce: output and input offsets commit atomically; a
    transaction aborted half-way leaves neither output nor offsets behind."""
    source, sink, group = _id("src"), _id("sink"), _id("g")
    seed = Producer({"bootstrap.servers": txn_broker.bootstrap})
    for i in range(30):
        seed.produce(source, value=str(i).encode())
    seed.flush(30)
    consumer_config = {
        "bootstrap.servers": txn_broker.bootstrap, "group.id": group,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": "read_committed",
    }  # fmt: skip

    def transform_round(txn_id: str, max_records: int, commit: bool) -> int:
        consumer = Consumer(consumer_config)
        consumer.assign([CkTopicPartition(source, 0)])
        producer = txn_producer(txn_broker.bootstrap, txn_id)
        producer.begin_transaction()
        seen = 0
        deadline = time.monotonic() + 15
        while seen < max_records and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            producer.produce(sink, value=b"out-" + msg.value())
            seen += 1
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)
            producer.abort_transaction(30)
        consumer.close()
        return seen

    txn_id = _id("etl")
    assert transform_round(txn_id, 10, commit=True) == 10
    assert transform_round(txn_id, 10, commit=False) == 10  # thrown away, re-read below
    assert transform_round(txn_id, 20, commit=True) == 20
    out = consume_all(txn_broker.bootstrap, sink, "read_committed", 30)
    assert out == [b"out-" + str(i).encode() for i in range(30)]
    check = Consumer(consumer_config)
    committed = check.committed([CkTopicPartition(source, 0)], timeout=10)
    assert committed[0].offset == 30
    check.close()


def test_transaction_state_survives_a_restart(tmp_path: Path) -> None:
    """A committed transaction's state is reloaded from __transaction_state; an open one
    is aborted by the coordinator after its timeout; the epoch keeps growing."""
    broker = BrokerProcess(tmp_path / "data", **TXN_BROKER).start()
    try:
        topic, txn_id = _id("t"), _id("tx")
        producer = txn_producer(broker.bootstrap, txn_id, **{"transaction.timeout.ms": 3000})
        producer.begin_transaction()
        producer.produce(topic, value=b"kept")
        producer.commit_transaction(30)
        producer.begin_transaction()
        producer.produce(topic, value=b"left-open")
        producer.flush(30)
        epoch_before = _describe(broker.bootstrap, txn_id)
        assert epoch_before[0] == "Ongoing"
        broker.kill9()
        broker.start()
        # The open transaction is aborted once it times out, then it reads back.
        wait_until(
            lambda: _describe(broker.bootstrap, txn_id)[0] == "CompleteAbort", 30,
            "the coordinator to abort the timed-out transaction",
        )  # fmt: skip
        _state, epoch = _describe(broker.bootstrap, txn_id)
        assert epoch == epoch_before[1] + 1  # bumped: the old producer is fenced
        assert consume_all(broker.bootstrap, topic, "read_committed", 1) == [b"kept"]
        again = txn_producer(broker.bootstrap, txn_id)
        again.begin_transaction()
        again.produce(topic, value=b"after-restart")
        again.commit_transaction(30)
        values = consume_all(broker.bootstrap, topic, "read_committed", 2)
        assert values == [b"kept", b"after-restart"]
    finally:
        broker.stop()


def _describe(bootstrap: str, txn_id: str) -> tuple[str, int]:
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
    from kio.schema.types import TransactionalId

    client = RawClient(bootstrap)
    try:
        response: Any = client.request(
            DescribeTransactionsRequest(transactional_ids=(TransactionalId(txn_id),))
        )
    except (OSError, AssertionError):
        return "", -1
    finally:
        client.close()
    state = response.transaction_states[0]
    return str(state.transaction_state), int(state.producer_epoch)


# -- kafka-python and aiokafka ------------------------------------------------------------------
def test_kafka_python_transactional_producer(txn_broker: BrokerProcess) -> None:
    kafka = pytest.importorskip("kafka")
    topic = _id("t")
    producer = kafka.KafkaProducer(
        bootstrap_servers=txn_broker.bootstrap, transactional_id=_id("kp")
    )
    if not hasattr(producer, "init_transactions"):
        pytest.skip("this kafka-python has no transactions")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"kp-commit")
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send(topic, b"kp-abort")
    producer.flush()
    producer.abort_transaction()
    producer.close()
    assert consume_all(txn_broker.bootstrap, topic, "read_committed", 1) == [b"kp-commit"]
    assert consume_all(txn_broker.bootstrap, topic, "read_uncommitted", 2) == [
        b"kp-commit", b"kp-abort",
    ]  # fmt: skip


def test_aiokafka_transactional_producer(txn_broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaProducer

    topic = _id("t")

    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=txn_broker.bootstrap, transactional_id=_id("aio")
        )
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"aio-commit")
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"aio-abort")
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    assert consume_all(txn_broker.bootstrap, topic, "read_committed", 1) == [b"aio-commit"]
    assert consume_all(txn_broker.bootstrap, topic, "read_uncommitted", 2) == [
        b"aio-commit", b"aio-abort",
    ]  # fmt: skip


# -- bad input ------------------------------------------------------------------------------------
def test_bad_transaction_requests_get_kafkas_error_codes(txn_broker: BrokerProcess) -> None:
    """Each bad request gets Kafka's error code and leaves a concurrent transaction of
    another producer untouched."""
    import datetime

    from kio.schema.add_partitions_to_txn.v3 import request as add_req
    from kio.schema.end_txn.v1.request import EndTxnRequest as EndV1
    from kio.schema.end_txn.v3.request import EndTxnRequest as EndV3
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
    from kio.schema.types import ProducerId, TopicName, TransactionalId
    from kio.static.primitive import i16, i32

    from sluice.protocol import ErrorCode as E

    topic = _id("t")
    bystander = txn_producer(txn_broker.bootstrap, _id("tx"))
    bystander.begin_transaction()
    bystander.produce(topic, value=b"bystander")
    bystander.flush(30)

    client = RawClient(txn_broker.bootstrap)

    def init(txn_id: str, timeout_ms: int) -> Any:
        return client.request(
            InitProducerIdRequest(
                transactional_id=TransactionalId(txn_id),
                transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
            )
        )

    def end(cls: Any, txn_id: str, pid: int, epoch: int, commit: bool = True) -> Any:
        return client.request(
            cls(transactional_id=TransactionalId(txn_id), producer_id=ProducerId(pid),
                producer_epoch=i16(epoch), committed=commit)
        ).error_code  # fmt: skip

    def add(txn_id: str, pid: int, epoch: int, topics: dict[str, list[int]]) -> dict[Any, Any]:
        reply: Any = client.request(
            add_req.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=TransactionalId(txn_id),
                v3_and_below_producer_id=ProducerId(pid),
                v3_and_below_producer_epoch=i16(epoch),
                v3_and_below_topics=tuple(
                    add_req.AddPartitionsToTxnTopic(
                        name=TopicName(t), partitions=tuple(i32(p) for p in ps)
                    )
                    for t, ps in topics.items()
                ),
            )
        )
        return {
            (t.name, p.partition_index): p.partition_error_code
            for t in reply.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }

    try:
        for timeout_ms in (0, -5, 60001):
            reply = init(_id("bad"), timeout_ms)
            assert (reply.error_code, reply.producer_id) == (E.invalid_transaction_timeout, -1)
        unknown = _id("never-initialised")
        assert end(EndV3, unknown, 1234, 0) == E.invalid_producer_id_mapping
        txn_id = _id("raw")
        ok = init(txn_id, 10000)
        pid, epoch = int(ok.producer_id), int(ok.producer_epoch)
        assert ok.error_code == E.none
        assert end(EndV3, txn_id, pid, epoch) == E.invalid_txn_state  # nothing open
        assert end(EndV3, txn_id, pid + 1, epoch) == E.invalid_producer_id_mapping
        assert end(EndV3, txn_id, pid, epoch + 1) == E.producer_fenced
        assert end(EndV1, txn_id, pid, epoch + 1) == E.invalid_producer_epoch  # before KIP-588
        missing = _id("missing")
        assert add(txn_id, pid, epoch, {topic: [0], missing: [0]}) == {
            (topic, 0): E.operation_not_attempted,
            (missing, 0): E.unknown_topic_or_partition,
        }
        assert add(txn_id, pid, epoch, {topic: [7]}) == {(topic, 7): E.unknown_topic_or_partition}
        assert add(txn_id, pid, epoch + 1, {topic: [0]}) == {(topic, 0): E.producer_fenced}
        assert add(txn_id, pid, epoch, {topic: [0]}) == {(topic, 0): E.none}
        assert end(EndV3, txn_id, pid, epoch, commit=False) == E.none
        wait_until(lambda: _describe(txn_broker.bootstrap, txn_id)[0] == "CompleteAbort", 10,
                   "the abort to complete")  # fmt: skip
        assert end(EndV3, txn_id, pid, epoch, commit=False) == E.none  # a retried abort
        assert end(EndV3, txn_id, pid, epoch, commit=True) == E.invalid_txn_state
    finally:
        client.close()
    # The other producer's transaction was not disturbed.
    bystander.commit_transaction(30)
    assert consume_all(txn_broker.bootstrap, topic, "read_committed", 1) == [b"bystander"]


def test_list_and_describe_transactions(txn_broker: BrokerProcess) -> None:
    from kio.schema.list_transactions.v1.request import ListTransactionsRequest
    from kio.static.primitive import i64

    topic, txn_id = _id("t"), _id("listed")
    producer = txn_producer(txn_broker.bootstrap, txn_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"x")
    producer.flush(30)
    client = RawClient(txn_broker.bootstrap)
    try:
        reply: Any = client.request(
            ListTransactionsRequest(
                state_filters=("Ongoing", "NoSuchState"), producer_id_filters=(),
                duration_filter=i64(-1),
            )
        )  # fmt: skip
        assert tuple(reply.unknown_state_filters) == ("NoSuchState",)
        listed = {s.transactional_id: s.transaction_state for s in reply.transaction_states}
        assert listed.get(txn_id) == "Ongoing"
    finally:
        client.close()
    producer.commit_transaction(30)
    wait_until(lambda: _describe(txn_broker.bootstrap, txn_id)[0] == "CompleteCommit", 10,
               "the commit to complete")  # fmt: skip


# -- exactly-once under kill -9 -------------------------------------------------------------
def test_exactly_once_pipeline_survives_kill9_of_transform_and_broker(tmp_path: Path) -> None:
    """A consume-transform-produce process is killed -9 repeatedly, and so is the broker
    every other round; restarted, the pipeline's committed output holds every input
    record exactly once, in order (no loss, no duplicates)."""
    import signal
    import subprocess
    import sys

    rounds, chunk = 4, 40
    records = rounds * chunk
    broker = BrokerProcess(tmp_path / "data", **TXN_BROKER).start()
    source, sink, group, txn_id = _id("src"), _id("sink"), _id("g"), _id("etl")
    seed = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    seeded = 0

    def seed_chunk() -> None:
        # The input arrives a chunk per round, so the transform cannot finish early.
        nonlocal seeded
        for i in range(seeded, seeded + chunk):
            seed.produce(source, value=f"{i:04d}".encode())
        seed.flush(30)
        seeded += chunk

    script = Path(txn_transform.__file__)
    log_path = tmp_path / "transform.log"

    def start_transform() -> subprocess.Popen[bytes]:
        with log_path.open("ab") as log:
            return subprocess.Popen(
                [sys.executable, str(script), broker.bootstrap, source, sink, group, txn_id],
                stdout=log, stderr=log, start_new_session=True,
            )  # fmt: skip

    last_error: list[BaseException] = []

    def sink_size(isolation: int) -> int:
        try:
            return _list_offset(broker.bootstrap, sink, isolation)
        except (OSError, AssertionError, IndexError) as exc:
            last_error[:] = [exc]
            return 0

    sink_size(0)  # imports the protocol modules before the clock matters
    transform = start_transform()
    try:
        for round_ in range(rounds):
            target = max(sink_size(0), 0) + 15
            seed_chunk()
            wait_until(
                lambda t=target: sink_size(0) >= t,
                60,  # type: ignore[misc]
                f"transform progress in round {round_} (target {target}, last error "
                f"{last_error}):\n{log_path.read_text()[-1500:]}\n{broker.log_tail(30)}",
            )
            os.killpg(transform.pid, signal.SIGKILL)
            transform.wait(10)
            if round_ % 2 == 1:
                broker.kill9()
                broker.start()
            transform = start_transform()
        done = consume_all(broker.bootstrap, sink, "read_committed", records, timeout_s=90)
        assert done == [b"out-" + f"{i:04d}".encode() for i in range(records)], (
            f"{len(done)} records, {len(set(done))} distinct\n{log_path.read_text()[-3000:]}"
        )
        # No transaction was left open: the last stable offset caught up with the HW.
        wait_until(lambda: sink_size(1) == sink_size(0), 30, "the LSO to reach the HW")
    finally:
        if transform.poll() is None:
            os.killpg(transform.pid, signal.SIGKILL)
            transform.wait(10)
        broker.stop()
