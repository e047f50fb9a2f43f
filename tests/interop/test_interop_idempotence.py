"""Idempotent producers against a real broker process: InitProducerId, retries through cut
connections de-duplicated, duplicates recognised after SIGTERM and kill -9 restarts, Kafka's
error codes for fenced epochs and sequence gaps, and the Python clients' defaults."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from crc32c import crc32c
from kafka import KafkaProducer
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.init_producer_id.v0.request import InitProducerIdRequest as InitV0
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest as InitV4
from kio.schema.produce.v9 import request as produce_req
from kio.static.primitive import i8, i16, i32, i64

from sluice.ports import free_port
from sluice.protocol import ErrorCode
from sluice.protocol.records.batch import iter_batches
from support.brokers import BrokerProcess
from support.wire import RawClient

TIMEOUT = datetime.timedelta(seconds=10)


# -- raw protocol helpers --------------------------------------------------------------------
def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def idem_batch(values: list[bytes], producer_id: int, epoch: int, sequence: int) -> bytes:
    """A magic v2 batch of ``values`` from an idempotent producer."""
    now = int(time.time() * 1000)
    records = b""
    for i, value in enumerate(values):
        body = b"\x00" + _varint(0) + _varint(i) + _varint(-1) + _varint(len(value)) + value
        body += _varint(0)
        records += _varint(len(body)) + body
    after_crc = struct.pack(
        ">hiqqqhii", 0, len(values) - 1, now, now, producer_id, epoch, sequence, len(values)
    ) + records  # fmt: skip
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", 0, length, -1, 2, crc32c(after_crc)) + after_crc


def init_producer_id(client: RawClient, request: Any = None) -> Any:
    return client.request(request or InitV4(transactional_id=None, transaction_timeout=TIMEOUT))


def produce(client: RawClient, topic: str, records: bytes, partition: int = 0) -> Any:
    body = produce_req.ProduceRequest(
        transactional_id=None, acks=i16(-1), timeout=TIMEOUT,
        topic_data=(produce_req.TopicProduceData(name=topic, partition_data=(
            produce_req.PartitionProduceData(index=i32(partition), records=records),)),),
    )  # fmt: skip
    return client.request(body).responses[0].partition_responses[0]  # type: ignore[attr-defined]


def produce_ok(client: RawClient, topic: str, records: bytes) -> int:
    response = produce(client, topic, records)
    assert response.error_code == ErrorCode.none, response
    return int(response.base_offset)


def fetch_records(client: RawClient, topic: str, partition: int, offset: int = 0) -> Any:
    body = fetch_req.FetchRequest(
        replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=0), min_bytes=i32(1),
        max_bytes=i32(8 << 20), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(fetch_req.FetchTopic(topic=topic, partitions=(fetch_req.FetchPartition(
            partition=i32(partition), current_leader_epoch=i32(-1), fetch_offset=i64(offset),
            last_fetched_epoch=i32(-1), log_start_offset=i64(-1),
            partition_max_bytes=i32(8 << 20)),)),),
        forgotten_topics_data=(), rack_id="",
    )  # fmt: skip
    return client.request(body).responses[0].partitions[0]  # type: ignore[attr-defined]


def producer_ids_in(bootstrap: str, topic: str, partition: int = 0) -> set[int]:
    """The producer ids in the stored batches of a partition (read from the batch headers)."""
    client = RawClient(bootstrap)
    try:
        data = fetch_records(client, topic, partition)
    finally:
        client.close()
    return {header.producer_id for header in iter_batches(data.records or b"")}


# -- a proxy that loses produce responses ----------------------------------------------------
class DroppingProxy:
    """A TCP proxy on 127.0.0.1 that forwards Kafka frames both ways, except that for the
    produce requests chosen by ``drop(n)`` (n counts produce requests from 0) it waits for
    the broker's response -- the batch is in the log -- then cuts the client's connection
    instead of passing the response on, so the client must retry the batch."""

    def __init__(self, upstream_port: int, drop: Callable[[int], bool]) -> None:
        self.upstream_port = upstream_port
        self.drop = drop
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.produce_requests = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        with self._lock:
            for sock in self._sockets:
                _shutdown(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self._lock:
                self._sockets += [client, upstream]
            to_drop: set[bytes] = set()
            threading.Thread(
                target=self._requests, args=(client, upstream, to_drop), daemon=True
            ).start()
            threading.Thread(
                target=self._responses, args=(upstream, client, to_drop), daemon=True
            ).start()

    def _requests(
        self, client: socket.socket, upstream: socket.socket, to_drop: set[bytes]
    ) -> None:
        while (frame := _read_frame(client)) is not None:
            api_key, correlation_id = struct.unpack_from(">h", frame, 4)[0], frame[8:12]
            if api_key == 0:
                with self._lock:
                    n = self.produce_requests
                    self.produce_requests += 1
                if self.drop(n):
                    to_drop.add(correlation_id)
            try:
                upstream.sendall(frame)
            except OSError:
                break
        _shutdown(upstream)
        _shutdown(client)

    def _responses(
        self, upstream: socket.socket, client: socket.socket, to_drop: set[bytes]
    ) -> None:
        while (frame := _read_frame(upstream)) is not None:
            if frame[4:8] in to_drop:
                with self._lock:
                    self.dropped += 1
                break
            try:
                client.sendall(frame)
            except OSError:
                break
        _shutdown(client)
        _shutdown(upstream)


def _read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame, including its size prefix; None at end of stream."""
    buf = b""
    need = 4
    while len(buf) < need:
        try:
            chunk = sock.recv(need - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
        if need == 4 and len(buf) == 4:
            need = 4 + int.from_bytes(buf, "big", signed=True)
    return buf


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[BrokerProcess, DroppingProxy]]:
    """A broker that advertises a dropping proxy in front of it, so clients only use that."""
    broker_port = free_port()
    dropped_at = {3, 6, 10, 15, 21, 28}
    proxy = DroppingProxy(broker_port, lambda n: n in dropped_at)
    broker = BrokerProcess(
        tmp_path / "data", port=broker_port,
        advertised_listeners=f"PLAINTEXT://127.0.0.1:{proxy.port}",
    ).start()  # fmt: skip
    yield broker, proxy
    proxy.close()
    assert broker.stop() == 0, broker.log_tail()


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Any]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Any] = []
    deadline = time.monotonic() + 30
    while len(out) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None:
            assert msg.error() is None, msg.error()
            out.append(msg)
    # Anything beyond ``expected`` would be a duplicate: drain briefly to catch it.
    while (msg := consumer.poll(0.5)) is not None:
        out.append(msg)
    ends = [consumer.get_watermark_offsets(TopicPartition(topic, p))[1] for p in range(partitions)]
    consumer.close()
    assert sum(ends) == len(out)
    return out


# -- tests -----------------------------------------------------------------------------------
def test_confluent_idempotent_producer_survives_cut_connections_without_duplicates(
    proxied: tuple[BrokerProcess, DroppingProxy],
) -> None:
    broker, proxy = proxied
    bootstrap = f"127.0.0.1:{proxy.port}"
    topic, partitions, n = "idem-cut", 3, 600
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "batch.num.messages": 5,  # many small requests, several in flight
            "linger.ms": 1,
            "retry.backoff.ms": 20,
        }
    )
    errors: list[Any] = []
    for i in range(n):
        producer.produce(
            topic, str(i).encode(), partition=i % partitions,
            on_delivery=lambda err, msg: errors.append(err) if err is not None else None,
        )  # fmt: skip
        producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []
    assert proxy.dropped >= 4, f"only {proxy.dropped} responses dropped"
    got = consume_all(f"127.0.0.1:{broker.port}", topic, partitions, n)
    values = [int(m.value()) for m in got]
    assert len(values) == n and sorted(values) == list(range(n))  # exactly once
    for p in range(partitions):
        in_partition = [
            int(m.value()) for m in sorted(got, key=lambda m: m.offset()) if m.partition() == p
        ]
        assert in_partition == list(range(p, n, partitions))  # in order
    assert all(pid >= 0 for pid in producer_ids_in(f"127.0.0.1:{broker.port}", topic))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill9"])
def test_resent_batch_after_restart_is_a_duplicate(tmp_path: Path, sig: int) -> None:
    broker = BrokerProcess(tmp_path / "data", log_segment_bytes="1024").start()
    topic = "dups"
    client = RawClient(broker.bootstrap)
    init = init_producer_id(client)
    assert (init.error_code, init.producer_epoch) == (ErrorCode.none, 0)
    pid = int(init.producer_id)
    batches = [
        idem_batch([b"%d-%d-" % (i, j) + b"x" * 100 for j in range(3)], pid, 0, 3 * i)
        for i in range(7)
    ]
    offsets = [produce_ok(client, topic, b) for b in batches]
    assert offsets == [3 * i for i in range(7)]
    assert list((tmp_path / "data" / f"{topic}-0").glob("*.snapshot"))  # taken on roll
    client.close()
    if sig == signal.SIGKILL:
        broker.kill9()
    else:
        assert broker.stop(sig) == 0
    first_run = broker.log_path.stat().st_size
    broker.start()
    restart_log = broker.log_path.read_bytes()[first_run:].decode()
    # After kill -9 the batches after the last snapshot are replayed; SIGTERM left one at the end.
    assert ("rebuilt producer state" in restart_log) == (sig == signal.SIGKILL)
    client = RawClient(broker.bootstrap)
    for batch, offset in zip(batches[2:], offsets[2:], strict=True):
        response = produce(client, topic, batch)
        assert (response.error_code, response.base_offset) == (ErrorCode.none, offset)
    # The oldest two are no longer cached: out of order, not duplicates.
    assert produce(client, topic, batches[0]).error_code == ErrorCode.out_of_order_sequence_number
    assert fetch_records(client, topic, 0).high_watermark == 21  # nothing was appended
    next_batch = idem_batch([b"next"], pid, 0, 21)
    assert produce_ok(client, topic, next_batch) == 21
    # Producer ids are never handed out twice, even across restarts.
    assert int(init_producer_id(client).producer_id) > pid
    client.close()
    assert broker.stop() == 0, broker.log_tail()


def test_fenced_epochs_and_sequence_gaps_get_kafkas_error_codes(broker: BrokerProcess) -> None:
    client = RawClient(broker.bootstrap)
    topic = "idem-errors"
    pid = int(init_producer_id(client).producer_id)
    assert produce_ok(client, topic, idem_batch([b"a", b"b"], pid, 0, 0)) == 0
    gap = produce(client, topic, idem_batch([b"c"], pid, 0, 5))
    assert (gap.error_code, gap.base_offset) == (ErrorCode.out_of_order_sequence_number, -1)
    # A new epoch must start at sequence 0 ...
    bad_start = produce(client, topic, idem_batch([b"c"], pid, 1, 2))
    assert bad_start.error_code == ErrorCode.out_of_order_sequence_number
    assert produce_ok(client, topic, idem_batch([b"c"], pid, 1, 0)) == 2
    # ... and fences the older one.
    stale = produce(client, topic, idem_batch([b"d"], pid, 0, 2))
    assert stale.error_code == ErrorCode.invalid_producer_epoch
    assert produce_ok(client, topic, idem_batch([b"d"], pid, 1, 1)) == 3
    client.close()


def test_init_producer_id(broker: BrokerProcess) -> None:
    client = RawClient(broker.bootstrap)
    first, second = init_producer_id(client), init_producer_id(client)
    assert (first.error_code, first.producer_epoch) == (ErrorCode.none, 0)
    assert second.producer_id > first.producer_id >= 0
    v0 = init_producer_id(client, InitV0(transactional_id=None, transaction_timeout=TIMEOUT))
    assert v0.error_code == ErrorCode.none and v0.producer_id > second.producer_id
    # KIP-360: an idempotent producer naming its id and epoch gets a fresh id, as in Kafka.
    bump = init_producer_id(
        client, InitV4(transactional_id=None, transaction_timeout=TIMEOUT,
                       producer_id=second.producer_id, producer_epoch=i16(0)),
    )  # fmt: skip
    assert (bump.error_code, bump.producer_epoch) == (ErrorCode.none, 0)
    assert bump.producer_id > v0.producer_id
    half = init_producer_id(
        client, InitV4(transactional_id=None, transaction_timeout=TIMEOUT,
                       producer_id=second.producer_id),
    )  # fmt: skip
    assert (half.error_code, half.producer_id) == (ErrorCode.invalid_request, -1)
    # A transactional id goes to the transaction coordinator (epoch 0, then bumped).
    txn = init_producer_id(client, InitV4(transactional_id="txn-1", transaction_timeout=TIMEOUT))
    assert (txn.error_code, txn.producer_epoch) == (ErrorCode.none, 0)
    again = init_producer_id(client, InitV4(transactional_id="txn-1", transaction_timeout=TIMEOUT))
    assert (again.producer_id, again.producer_epoch) == (txn.producer_id, 1)
    empty = init_producer_id(client, InitV4(transactional_id="", transaction_timeout=TIMEOUT))
    assert (empty.error_code, empty.producer_id, empty.producer_epoch) == (
        ErrorCode.invalid_request, -1, -1,
    )  # fmt: skip
    client.close()


def test_kafka_python_default_producer_is_idempotent(broker: BrokerProcess, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)  # idempotent by default
    futures = [producer.send(topic, value=b"kp%d" % i) for i in range(50)]
    producer.flush(30)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    assert offsets == list(range(50))
    assert len(producer_ids_in(broker.bootstrap, topic)) == 1
    assert min(producer_ids_in(broker.bootstrap, topic)) >= 0


@pytest.mark.parametrize("idempotent", [None, True], ids=["default", "idempotent"])
def test_aiokafka_producer(broker: BrokerProcess, topic: str, idempotent: bool | None) -> None:
    async def run() -> list[int]:
        extra = {} if idempotent is None else {"enable_idempotence": idempotent}
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, **extra)
        await producer.start()
        try:
            return [(await producer.send_and_wait(topic, b"ak%d" % i)).offset for i in range(30)]
        finally:
            await producer.stop()

    assert asyncio.run(run()) == list(range(30))
    ids = producer_ids_in(broker.bootstrap, topic)
    assert (min(ids) >= 0) if idempotent else ids == {-1}  # aiokafka's default is off
