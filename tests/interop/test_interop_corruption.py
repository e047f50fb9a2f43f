"""A corrupt byte in a flushed segment, then kill -9: nothing else is lost, and consumers
get an error at the corrupt batch instead of skipping it.

4,000 records are produced (acks=all, confluent-kafka) into segments of 256 KiB. Once the
rolls have flushed the first segments and the recovery point is checkpointed
(``log.flush.offset.checkpoint.interval.ms``), the broker is killed and a byte in the
middle of the first segment is changed, as a disk would: in a batch's records (its CRC no
longer matches: the broker serves batches as stored, a consumer that checks CRCs
refuses it) or in a batch's length (the broker refuses to read it: CORRUPT_MESSAGE).
After the restart recovery has truncated nothing; confluent-kafka and kafka-python read
every record before the corrupt batch, get an error there, and read on from past it.
``sluice dump-log`` finds the corrupt batch."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sluice.log.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
from sluice.protocol.records.batch import BATCH_HEADER_SIZE, BatchHeader, iter_batches
from support.brokers import BrokerProcess, named_segments
from support.waiting import wait_until

TOPIC = "fragile"
RECORDS = 4000
SEGMENT_BYTES = 256 * 1024


def _value(i: int) -> bytes:
    return b"%06d" % i + b"." * 250


def _produce(bootstrap: str) -> dict[int, bytes]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"segment.bytes": str(SEGMENT_BYTES)}
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)])[TOPIC].result(30)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 16384}
    )
    acked: dict[int, bytes] = {}
    failed: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acked[msg.offset()] = msg.value()  # type: ignore[attr-defined]
        else:
            failed.append(err)

    for i in range(RECORDS):
        producer.produce(TOPIC, _value(i), partition=0, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert failed == []
    return acked


def _damage(path: Path, position: int, data: bytes) -> None:
    with path.open("r+b") as f:
        f.seek(position)
        f.write(data)


def _consume_confluent(
    bootstrap: str, start: int, end: int, check_crcs: bool
) -> tuple[dict[int, bytes], KafkaError | None]:
    """Records from ``start`` until ``end`` or the first error."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
        "check.crcs": check_crcs,
    })  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, start)])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                return got, msg.error()
            got[msg.offset()] = msg.value()
            if msg.offset() + 1 >= end:
                return got, None
    finally:
        consumer.close()
    raise AssertionError(f"neither offset {end} nor an error after {len(got)} records")


def _consume_kafka_python(
    bootstrap: str, start: int, end: int
) -> tuple[dict[int, bytes], Exception | None]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTP
    from kafka.errors import CorruptRecordError

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = KpTP(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, start)
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            try:
                polled = consumer.poll(timeout_ms=500)
            except CorruptRecordError as exc:
                return got, exc
            for records in polled.values():
                for record in records:
                    got[record.offset] = record.value
            if got and max(got) + 1 >= end:
                return got, None
    finally:
        consumer.close()
    raise AssertionError(f"neither offset {end} nor an error after {len(got)} records")


def _dump_log(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluice", "dump-log", "--files", str(path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("where", ["records", "length"])
def test_a_corrupt_byte_in_a_flushed_segment_is_reported_not_skipped(
    tmp_path: Path, where: str
) -> None:
    broker = BrokerProcess(tmp_path / "data", log_flush_offset_checkpoint_interval_ms="100").start()
    try:
        _corrupt_and_read(broker, where)
    finally:
        broker.stop()


def _corrupt_and_read(broker: BrokerProcess, where: str) -> None:
    acked = _produce(broker.bootstrap)
    assert sorted(acked) == list(range(RECORDS))
    directory = broker.data_dir / f"{TOPIC}-0"
    segments = named_segments(directory)
    assert len(segments) >= 4
    last_base = int(segments[-1].name[:20])
    checkpoint = OffsetCheckpointFile(directory / RECOVERY_POINT_CHECKPOINT)
    wait_until(
        lambda: checkpoint.read().get((TOPIC, 0), 0) >= last_base, 30,
        "the recovery point checkpointed past the rolled segments",
    )  # fmt: skip
    broker.kill9()

    first = segments[0]
    good = _dump_log(first)
    assert good.returncode == 0 and "isvalid: false" not in good.stdout, good.stdout[-2000:]
    size = first.stat().st_size
    batch = _batch_at(first, size // 2)
    if where == "records":  # one bit of a record, in the middle of the batch's records
        middle = batch.position + BATCH_HEADER_SIZE + (batch.size_in_bytes - BATCH_HEADER_SIZE) // 2
        _damage(first, middle, bytes([first.read_bytes()[middle] ^ 0x01]))
    else:
        _damage(first, batch.position + 8, (10**6).to_bytes(4, "big"))
    bad = _dump_log(first)
    assert bad.returncode == 1
    assert f"Corrupt batch at position {batch.position}: " in bad.stdout

    first_run = broker.log_path.stat().st_size
    broker.start()
    restart_log = broker.log_path.read_bytes()[first_run:].decode(errors="replace")
    assert "truncated" not in restart_log and "deleting" not in restart_log
    assert [p.name for p in named_segments(directory)] == [p.name for p in segments]

    bad_first, bad_next = batch.base_offset, batch.last_offset + 1
    # Past the corrupt batch: with a bad length the next offset index entry (4 KiB on),
    # or the next segment, is where a read can start again.
    resume = bad_next if where == "records" else int(segments[1].name[:20])
    expected_after = {o: v for o, v in acked.items() if o >= resume}

    got, error = _consume_confluent(broker.bootstrap, 0, RECORDS, check_crcs=where == "records")
    assert error is not None, "no error at the corrupt batch"
    assert got == {o: acked[o] for o in range(bad_first)}  # all before it, nothing after
    if where == "length":
        assert error.code() == KafkaError.INVALID_MSG  # CORRUPT_MESSAGE from the broker
    got, error = _consume_confluent(broker.bootstrap, resume, RECORDS, check_crcs=True)
    assert error is None and got == expected_after

    got, error = _consume_kafka_python(broker.bootstrap, 0, RECORDS)
    assert error is not None, "no error at the corrupt batch"
    assert got == {o: acked[o] for o in range(len(got))} and len(got) <= bad_first
    got, error = _consume_kafka_python(broker.bootstrap, resume, RECORDS)
    assert error is None and got == expected_after
    if where == "length":
        got, error = _consume_kafka_python(broker.bootstrap, bad_next, RECORDS)
        assert error is not None and got == {}  # refused, not skipped to a later batch
    broker_log = broker.log_path.read_bytes()[first_run:].decode(errors="replace")
    reports = [line for line in broker_log.splitlines() if f"reading {TOPIC}-0 " in line]
    if where == "length":  # one line, though the consumers asked again and again
        assert len(reports) == 1, reports
        assert f"{first} position {batch.position}: batchLength 1000000" in reports[0]
    else:  # the broker does not read records: only the clients' CRC checks see it
        assert reports == []
    assert broker.stop() == 0, broker.log_tail()


def _batch_at(path: Path, position: int) -> BatchHeader:
    """The batch of the data file holding byte ``position``."""
    for header in iter_batches(path.read_bytes()):
        if header.position <= position < header.end_position:
            return header
    raise AssertionError(f"no batch holds position {position} of {path}")
