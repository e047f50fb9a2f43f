"""A paced producer that sends prepared record batches, the soak's default load.

At half of the peak (hundreds of thousands of 1 KiB records a second) a confluent-kafka
producer in Python spends a ``produce()`` call per record, and librdkafka copies and
frames each one; on two vCPUs those clients waited for a CPU as long as the broker ran,
and the soak's p99 measured the machine's run queue. This writer's cost is per request,
not per record, as bench/raw_reader.py's is per fetch: it builds, once, a v2 batch of
``n`` records of one value (Sluice's producer batch builder,
sluice.protocol.records.builder.MemoryRecordsBuilder), and for each request writes the send time
into the batch's two timestamps and the CRC-32C over it again (C-backed), then sends
Produce v9 (acks=1) for every partition of the topic with ``sendmsg`` straight from those
buffers. Records are stamped with the time their request is sent: the producer does
not make them wait, so end-to-end latency measured from these timestamps has no linger
in it.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Sequence
from typing import Any

import raw_reader
from sluice.client.producer.produce_request import decode_produce_response, encode_produce_request
from sluice.protocol.errors import ErrorCode
from sluice.protocol.headers import encode_request_header
from sluice.protocol.records.batch import ATTRIBUTES_OFFSET, BASE_TIMESTAMP_OFFSET, CRC_OFFSET
from sluice.protocol.records.builder import MemoryRecordsBuilder
from sluice.protocol.records.crc import crc32c

PRODUCE_API_KEY = 0
PRODUCE_VERSION = 9
TIMEOUT_MS = 30_000
_SIZE = struct.Struct(">i")
_TIMESTAMPS = struct.Struct(">qq")  # base and max timestamp: every record has delta 0
_CRC = struct.Struct(">I")
_RECORD_OVERHEAD = 16  # a record's length, attributes, deltas, key and value lengths


class RawWriteError(RuntimeError):
    """The broker sent an answer no request was waiting for."""


class BatchTemplates:
    """Record batches of ``n`` copies of ``value``, built once per ``n`` and re-stamped
    for each request."""

    def __init__(self, value: bytes) -> None:
        self.value = value
        self._batches: dict[int, bytearray] = {}

    def stamped(self, count: int, timestamp_ms: int) -> bytearray:
        """The batch of ``count`` records, all with ``timestamp_ms`` as CreateTime and a
        CRC to match. The same buffer comes back for the same ``count``: send it before
        asking again."""
        batch = self._batches.get(count)
        if batch is None:
            batch = self._batches[count] = self._build(count, timestamp_ms)
        _TIMESTAMPS.pack_into(batch, BASE_TIMESTAMP_OFFSET, timestamp_ms, timestamp_ms)
        with memoryview(batch) as view:
            _CRC.pack_into(batch, CRC_OFFSET, crc32c(view[ATTRIBUTES_OFFSET:]))
        return batch

    def _build(self, count: int, timestamp_ms: int) -> bytearray:
        builder = MemoryRecordsBuilder(bytearray(64 + count * (len(self.value) + _RECORD_OVERHEAD)))
        for _ in range(count):
            if not builder.try_append(timestamp_ms, None, self.value, b"\x00"):
                raise ValueError(f"{count} records of {len(self.value)} B did not fit")
        return bytearray(builder.close())


def split(records: int, partitions: int, turn: int) -> list[int]:
    """``records`` spread over ``partitions`` as evenly as can be; the partitions that get
    one more move on with ``turn``, so over many requests each gets its share."""
    share, extra = divmod(records, partitions)
    return [
        share + (1 if (index - turn) % partitions < extra else 0) for index in range(partitions)
    ]


def send_buffers(sock: socket.socket, buffers: Sequence[Any]) -> None:
    """Send all of ``buffers`` with ``sendmsg`` (no joined copy), resuming after a
    partial send."""
    views = [memoryview(buffer).cast("B") for buffer in buffers]
    while views:
        sent = sock.sendmsg(views[:1024])  # IOV_MAX
        while sent:
            head = views[0]
            if sent >= len(head):
                sent -= len(head)
                views.pop(0)
            else:
                views[0] = head[sent:]
                sent = 0


def connect(bootstrap: str, timeout: float = 30.0) -> socket.socket:
    """A TCP connection to ``host:port`` with Nagle off, as clients open them."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def produce_request(
    acks: int, topic_data: dict[str, list[tuple[int, Any]]], correlation: int, client_id: str
) -> list[Any]:
    """A Produce v9 request as buffers to send in order, size prefix first; the batches
    are not copied."""
    body = encode_produce_request(PRODUCE_VERSION, acks, TIMEOUT_MS, topic_data)
    header = encode_request_header(PRODUCE_API_KEY, PRODUCE_VERSION, correlation, client_id)
    size = len(header) + sum(len(buffer) for buffer in body)
    return [_SIZE.pack(size), header, *body]


def failed_partitions(frame: memoryview) -> int:
    """How many partitions a Produce v9 answer reports with an error code."""
    answer = decode_produce_response(frame, PRODUCE_VERSION)
    return sum(1 for part in answer.responses.values() if part.error != ErrorCode.none)


class PacedWriter:
    """Produce requests to one broker, one every ``tick_s``, each with ``per_tick``
    records spread over ``partitions`` of ``topic``; a thread reads the answers.

    ``acks_ms`` collects, per answered request, the milliseconds from just before its
    send to its answer; ``errors`` counts partitions answered with an error code.
    Callers move them out under ``lock``.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: list[int], value: bytes,
                 client_id: str = "sluice-soak-raw-writer") -> None:  # fmt: skip
        self.sock = connect(bootstrap)
        self.sock.settimeout(None)  # the answer reader waits as long as it must; close ends it
        self.topic, self.partitions, self.client_id = topic, partitions, client_id
        self.templates = BatchTemplates(value)
        self.lock = threading.Lock()
        self.acks_ms: list[float] = []
        self.errors = 0
        self.failure: str | None = None
        self._sent_at: dict[int, int] = {}
        self._correlation = 0
        self._turn = 0
        self._closing = False
        self._answers = threading.Thread(target=self._read_answers, daemon=True)
        self._answers.start()

    def send(self, records: int) -> None:
        """One Produce request of ``records`` records, stamped now."""
        now_ms = int(time.time() * 1000)
        topic_data: dict[str, list[tuple[int, Any]]] = {self.topic: []}
        counts = split(records, len(self.partitions), self._turn)
        self._turn += 1
        for partition, count in zip(self.partitions, counts, strict=True):
            if count:
                topic_data[self.topic].append((partition, self.templates.stamped(count, now_ms)))
        self._correlation += 1
        request = produce_request(1, topic_data, self._correlation, self.client_id)
        self._sent_at[self._correlation] = time.perf_counter_ns()
        send_buffers(self.sock, request)

    def close(self, timeout: float = 30.0) -> None:
        """Wait up to ``timeout`` for the answers still owed, then close the socket."""
        deadline = time.monotonic() + timeout
        while self._sent_at and self._answers.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        self._closing = True
        with contextlib.suppress(OSError):  # already broken: the reader has stopped
            self.sock.shutdown(socket.SHUT_RDWR)
        self._answers.join(timeout=5)
        self.sock.close()

    def _read_answers(self) -> None:
        buf = bytearray(64 * 1024)
        try:
            while not self._closing:
                buf, frame = raw_reader.recv_frame(self.sock, buf)
                now = time.perf_counter_ns()
                failed = failed_partitions(frame)
                (correlation,) = _SIZE.unpack_from(frame)
                sent = self._sent_at.pop(correlation, None)
                if sent is None:
                    raise RawWriteError(f"an answer to correlation id {correlation}, not sent")
                with self.lock:
                    self.acks_ms.append((now - sent) / 1e6)
                    self.errors += failed
        except (OSError, RawWriteError, raw_reader.RawReadError) as exc:
            if not self._closing:
                self.failure = str(exc)
