"""Connection limits, the request read timeout and the memory pool, on a real broker with
real sockets and real clients: ``max.connections.per.ip`` (and its overrides) closes the
connection over the limit while clients within it work, ``max.connections`` holds a new
connection until one closes, a frame that never finishes arriving is closed after
``socket.request.read.timeout.ms``, and a spent ``queued.max.request.bytes`` pauses
reading until memory is released."""

from __future__ import annotations

import datetime
import os
import resource
import socket
import struct
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kio.schema.fetch.v12 import request as fetch_req
from kio.static.primitive import i8, i32, i64

from sluice import EmbeddedBroker
from sluice.protocol import encode_request
from support.brokers import broker_process
from support.clients import create_topic, produce, read_from_start
from support.waiting import wait_until

CLIENT_ID = b"limits-test"
MIB = 1 << 20


def api_versions(correlation_id: int) -> bytes:
    """ApiVersions v0, the request every client sends first."""
    body = struct.pack(">hhih", 18, 0, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    return struct.pack(">i", len(body)) + body


class Conn:
    """A raw connection that sends ApiVersions and tells answered, silent and closed."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.next_id = 0

    def close(self) -> None:
        self.sock.close()

    def ask(self) -> None:
        self.next_id += 1
        self.sock.sendall(api_versions(self.next_id))

    def answer(self, timeout_s: float) -> str:
        """The outcome: answered, silent (nothing within the timeout) or closed."""
        self.sock.settimeout(timeout_s)
        data = b""
        try:
            while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return "closed"
                data += chunk
        except TimeoutError:
            return "silent"
        except ConnectionResetError:
            return "closed"
        return "answered"

    def round_trip(self, timeout_s: float = 5.0) -> str:
        self.ask()
        return self.answer(timeout_s)

    def closed_by_broker(self, timeout_s: float) -> bool:
        self.sock.settimeout(timeout_s)
        try:
            return self.sock.recv(65536) == b""
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True


@contextmanager
def broker(**config: Any) -> Iterator[EmbeddedBroker]:
    running = EmbeddedBroker({k.replace("_", "."): v for k, v in config.items()}).start()
    try:
        yield running
    finally:
        running.stop()


def connections(running: EmbeddedBroker) -> int:
    return int(running.call(lambda: sum(s.connection_count for s in running.broker.servers)))


def test_the_per_ip_limit_closes_the_connection_over_it_and_clients_within_it_work() -> None:
    with broker(max_connections_per_ip=3) as running:
        topic = f"limits-{uuid.uuid4().hex[:8]}"
        create_topic(running.bootstrap_servers, topic, 1)
        produce(running.bootstrap_servers, topic, [b"a", b"b"], 1)  # confluent-kafka
        assert read_from_start(running.bootstrap_servers, topic, 2) == [b"a", b"b"]  # kafka-python
        wait_until(lambda: connections(running) == 0, 10, "the clients' connections closed")
        held = [Conn(running.port) for _ in range(3)]
        assert [c.round_trip() for c in held] == ["answered"] * 3
        extra = Conn(running.port)  # the kernel accepts it; the broker closes it at once
        assert extra.closed_by_broker(5)
        held[0].close()
        wait_until(lambda: connections(running) == 2, 10, "a connection closed")
        again = Conn(running.port)
        assert again.round_trip() == "answered"
        for conn in (*held[1:], extra, again):
            conn.close()


def test_overrides_set_the_limit_of_listed_addresses() -> None:
    overrides = "127.0.0.1:2"
    with broker(max_connections_per_ip=0, max_connections_per_ip_overrides=overrides) as running:
        first, second = Conn(running.port), Conn(running.port)
        assert first.round_trip() == second.round_trip() == "answered"
        third = Conn(running.port)
        assert third.closed_by_broker(5)
        for conn in (first, second, third):
            conn.close()


def test_max_connections_holds_a_new_connection_until_one_closes() -> None:
    with broker(max_connections=2) as running:
        first, second = Conn(running.port), Conn(running.port)
        assert first.round_trip() == second.round_trip() == "answered"
        waiting = Conn(running.port)  # in the listen backlog, not accepted
        waiting.ask()
        assert waiting.answer(0.5) == "silent"
        first.close()
        assert waiting.answer(10) == "answered"
        for conn in (second, waiting):
            conn.close()


def test_a_frame_that_never_finishes_arriving_is_closed_after_the_read_timeout() -> None:
    with broker(socket_request_read_timeout_ms=300) as running:
        idle = Conn(running.port)
        assert idle.round_trip() == "answered"
        slow = Conn(running.port)
        slow.sock.sendall(struct.pack(">i", MIB) + bytes(100))  # a claim, and a little
        assert slow.closed_by_broker(10)
        assert idle.round_trip() == "answered"  # idle, not arriving: kept
        for conn in (idle, slow):
            conn.close()


def parked_fetch(topic: str, correlation_id: int, wait_ms: int) -> bytes:
    """A Fetch from the end of an empty partition, waiting up to ``wait_ms`` for data."""
    body = fetch_req.FetchRequest(
        replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=i32(1), max_bytes=i32(MIB), isolation_level=i8(0), session_id=i32(0),
        session_epoch=i32(-1),
        topics=(fetch_req.FetchTopic(topic=topic, partitions=(fetch_req.FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0),
            last_fetched_epoch=i32(-1), log_start_offset=i64(-1),
            partition_max_bytes=i32(MIB)),)),),
        forgotten_topics_data=(), rack_id="",
    )  # fmt: skip
    return encode_request(correlation_id, body)


def test_a_spent_memory_pool_holds_large_frames_until_memory_is_released() -> None:
    with broker(socket_request_max_bytes=MIB, queued_max_request_bytes=MIB) as running:
        topic = f"limits-{uuid.uuid4().hex[:8]}"
        create_topic(running.bootstrap_servers, topic, 1)
        pool = running.call(lambda: running.broker.servers[0].pool)
        hog = Conn(running.port)
        # A Fetch parked for 2 s, and behind it two frames that wait their turn: received
        # and not answered, they spend the pool (1 MiB).
        waiting = api_versions(2)[4:] + bytes(600 * 1024)
        queued = 2 * (struct.pack(">i", len(waiting)) + waiting)
        hog.sock.sendall(parked_fetch(topic, 1, 2_000) + queued)
        wait_until(lambda: running.call(lambda: pool.out_of_memory), 10, "the pool spent")
        small = Conn(running.port)
        assert small.round_trip() == small.round_trip() == "answered"  # small: served
        large = Conn(running.port)  # an ApiVersions request padded to 100 KB
        padded = api_versions(1)[4:] + bytes(100_000)
        large.sock.sendall(struct.pack(">i", len(padded)) + padded)
        assert large.answer(0.5) == "silent"  # its room waits for memory
        # The Fetch is answered, the frames behind it handled (and refused: that
        # connection closes), their memory released: the large frame is read.
        assert large.answer(10) in ("answered", "closed")
        assert small.round_trip() == "answered"
        for conn in (hog, small, large):
            conn.close()
        wait_until(lambda: running.call(lambda: pool.used) == 0, 10, "every charge released")


@pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="needs prlimit (Linux)")
def test_out_of_descriptors_accepting_backs_off_with_one_log_line(tmp_path: Path) -> None:
    with broker_process(tmp_path) as proc:
        assert proc.proc is not None
        pid = proc.proc.pid
        in_use_before = len(os.listdir(f"/proc/{pid}/fd"))
        warm = Conn(proc.port)  # the broker imports ApiVersions' schema (a file) now
        assert warm.round_trip() == "answered"
        warm.close()
        wait_until(lambda: len(os.listdir(f"/proc/{pid}/fd")) == in_use_before, 10, "closed")
        in_use = len(os.listdir(f"/proc/{pid}/fd"))
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use + 8, in_use + 8))
        conns = [Conn(proc.port) for _ in range(16)]  # the kernel accepts them all
        for conn in conns:
            conn.ask()
        outcomes = [conn.answer(1.0) for conn in conns]
        served = [c for c, outcome in zip(conns, outcomes, strict=True) if outcome == "answered"]
        waiting = [c for c, outcome in zip(conns, outcomes, strict=True) if outcome == "silent"]
        # 8 descriptors free, give or take one or two the broker held briefly when they
        # were counted (a checkpoint being written, a segment file the cache closed since)
        assert 0 < len(served) <= 10 and waiting, outcomes
        for conn in served:
            conn.close()
        # Descriptors free again: the waiting connections are accepted after the back-off.
        freed = waiting[: len(served) - 1]
        assert [conn.answer(10) for conn in freed] == ["answered"] * len(freed)
        log = proc.log_path.read_text(errors="replace")
        assert log.count("accepting paused from") == 1, log  # one line, not one per try
        assert "out of system resource" not in log, log  # asyncio's traceback per accept
        assert "ERROR sluice.server.network" not in log, log
        for conn in conns:
            conn.close()
