"""bench/raw_writer.py, the soak's default producer: its batches, its sends, a real broker."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.protocol.records.batch import validate_records
from support.bench import import_bench

# bench/raw_writer.py (and the bench/raw_reader.py it imports), neither left in sys.modules
# for other tests.
raw_writer = import_bench("raw_writer", forget=("raw_writer", "raw_reader"))


def test_a_template_is_restamped_with_a_matching_crc() -> None:
    templates = raw_writer.BatchTemplates(b"v" * 100)
    first = bytes(templates.stamped(3, 1_000))
    (header,) = validate_records(first)  # the CRC matches
    assert (header.records_count, header.base_timestamp, header.max_timestamp) == (3, 1_000, 1_000)
    again = templates.stamped(3, 2_000)
    (header,) = validate_records(again)
    assert (header.base_timestamp, header.max_timestamp) == (2_000, 2_000)
    assert again[61:] == first[61:]  # the same records, built once
    assert templates.stamped(3, 3_000) is again
    (header,) = validate_records(templates.stamped(1, 3_000))
    assert header.records_count == 1


@given(st.integers(0, 10_000), st.integers(1, 16), st.integers(0, 100))
def test_split_is_even_and_moves_the_extra_records_on(records: int, parts: int, turn: int) -> None:
    counts = raw_writer.split(records, parts, turn)
    assert sum(counts) == records and len(counts) == parts
    assert max(counts) - min(counts) <= 1
    if records % parts:  # the next turn gives the extra records to other partitions
        assert raw_writer.split(records, parts, turn + 1) != counts
    rounds = [raw_writer.split(records, parts, turn + k) for k in range(parts)]
    assert [sum(column) for column in zip(*rounds, strict=True)] == [records] * parts


@pytest.mark.integration  # a socket pair
def test_send_buffers_resumes_after_partial_sends() -> None:
    left, right = socket.socketpair()
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    buffers = [bytes([i]) * (50_000 + i) for i in range(6)] + [bytearray(b"end")]
    received = bytearray()

    def drain() -> None:
        while len(received) < sum(map(len, buffers)):
            received.extend(right.recv(7_000))  # small reads: the sender blocks part way

    reader = threading.Thread(target=drain)
    reader.start()
    raw_writer.send_buffers(left, buffers)
    reader.join(30)
    left.close()
    right.close()
    assert bytes(received) == b"".join(buffers)


@pytest.mark.integration  # an embedded broker
def test_what_the_writer_sends_a_real_broker_acknowledges_and_clients_read() -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    admin_api = pytest.importorskip("confluent_kafka.admin")
    import sluice

    with sluice.EmbeddedBroker() as broker:
        admin = admin_api.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([admin_api.NewTopic("w", 3, 1)])["w"].result(30)
        before_ms = int(time.time() * 1000)
        writer = raw_writer.PacedWriter(broker.bootstrap_servers, "w", [0, 1, 2], b"value")
        for records in (7, 7, 1, 30):
            writer.send(records)
        writer.close()
        assert writer.failure is None
        assert (len(writer.acks_ms), writer.errors) == (4, 0)
        assert all(ack > 0 for ack in writer.acks_ms)

        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": broker.bootstrap_servers, "group.id": "g",
             "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )  # fmt: skip
        consumer.assign([confluent_kafka.TopicPartition("w", p, 0) for p in range(3)])
        got: list[tuple[int, bytes, int]] = []
        deadline = time.monotonic() + 30
        while len(got) < 45 and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None
                got.append((msg.partition(), msg.value(), msg.timestamp()[1]))
        consumer.close()
        assert len(got) == 45
        assert {value for _, value, _ in got} == {b"value"}
        assert sorted(sum(1 for p, _, _ in got if p == q) for q in range(3)) == [15, 15, 15]
        assert all(before_ms <= ts <= time.time() * 1000 for _, _, ts in got)

        wrong = raw_writer.PacedWriter(broker.bootstrap_servers, "w", [0, 9], b"value")
        wrong.send(2)  # partition 9 does not exist: answered with an error code
        wrong.close()
        assert (len(wrong.acks_ms), wrong.errors) == (1, 1)


@pytest.mark.integration  # an embedded broker
def test_a_connection_the_broker_closes_is_a_failure_not_a_hang() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        writer = raw_writer.PacedWriter(f"127.0.0.1:{port}", "t", [0], b"v")
        conn, _ = server.accept()
        conn.close()
        deadline = time.monotonic() + 30
        while writer.failure is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert writer.failure == "the broker closed the connection"
        writer.close(timeout=1)  # nothing owed, the socket already broken: returns
