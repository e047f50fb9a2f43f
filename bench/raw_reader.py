"""A consumer that reads record batches off the wire without materialising records.

The 100 B consume row's default reader. At 100 B a record, a real client spends its time
per record: one confluent-kafka consumer in Python reads about 300 MB/s and kcat
(librdkafka in C) about 320 MB/s, against either broker, so both measure the client.
This reader does what a follower does: it sends Fetch v11 requests for one partition,
one in flight, from offset 0, with librdkafka's default limits (fetch.max.bytes 50 MiB,
max.partition.fetch.bytes 1 MiB, fetch.wait.max.ms 500, fetch.min.bytes 1), and walks
the batch headers of each answer, counting records and checking that offsets follow on.
Its cost is per fetch, not per record, so the broker sets the pace.

The codec is Sluice's hand-written Fetch v11 envelope (sluice.server.replica_fetch_wire,
property-tested against kio) and the batch walk is sluice.protocol.records.batch.iter_batches, which
stops at a partial trailing batch as Kafka's clients do.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

from sluice.protocol.records.batch import iter_batches
from sluice.server.replica_fetch_wire import (
    FetchedPartition,
    FetchPartitionRequest,
    decode_fetch_response,
    encode_fetch_request,
)

CONSUMER_REPLICA_ID = -1  # a client, not a follower
FETCH_MAX_BYTES = 50 * 1024 * 1024  # librdkafka's fetch.max.bytes default
PARTITION_MAX_BYTES = 1024 * 1024  # librdkafka's max.partition.fetch.bytes default
FETCH_WAIT_MAX_MS = 500  # librdkafka's fetch.wait.max.ms default
_SIZE = struct.Struct(">i")


class RawReadError(RuntimeError):
    """The broker answered with an error, a gap in the offsets, or not in time."""


@dataclass
class RawRead:
    """What one read took: records and wire bytes of complete batches, fetches sent."""

    records: int = 0
    batch_bytes: int = 0
    fetches: int = 0
    next_offset: int = 0


def count_batches(records: memoryview | None, read: RawRead, last_offset: int | None) -> None:
    """Add the complete batches of one partition's ``records`` to ``read``, checking that
    each one starts where the previous ended (an uncompacted topic: no gaps); batches
    wholly before ``read.next_offset`` (a fetch from the middle of a batch) are skipped.
    ``last_offset``, if given, is the offset after which nothing is counted."""
    if records is None:
        return
    for batch in iter_batches(records):
        if batch.next_offset <= read.next_offset:
            continue
        if batch.base_offset > read.next_offset:
            raise RawReadError(
                f"offset gap: expected {read.next_offset}, got a batch at {batch.base_offset}"
            )
        if last_offset is not None and batch.base_offset > last_offset:
            return
        read.records += batch.records_count
        read.batch_bytes += batch.size_in_bytes
        read.next_offset = batch.next_offset


def _recv_exactly(sock: socket.socket, buf: bytearray, size: int) -> memoryview:
    """The next ``size`` bytes from ``sock``, read into ``buf`` (at least that long)."""
    view = memoryview(buf)[:size]
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise RawReadError("the broker closed the connection")
        got += n
    return view


def recv_frame(sock: socket.socket, buf: bytearray) -> tuple[bytearray, memoryview]:
    """The next size-prefixed frame from ``sock``: the buffer (``buf``, or a larger one
    if the frame needed it) and the frame, a view into it."""
    (size,) = _SIZE.unpack(_recv_exactly(sock, buf, 4))
    if size > len(buf):
        buf = bytearray(size)
    return buf, _recv_exactly(sock, buf, size)


def fetch(
    sock: socket.socket,
    buf: bytearray,
    correlation: int,
    client_id: str,
    topic: str,
    partitions: list[FetchPartitionRequest],
) -> tuple[bytearray, int, int, list[FetchedPartition]]:
    """One Fetch v11 round trip with librdkafka's default limits; returns the buffer
    (grown if the answer needed it: the answer's views point into it), the answer's
    correlation id, its error code and its partitions."""
    sock.sendall(encode_fetch_request(
        correlation, client_id, CONSUMER_REPLICA_ID, FETCH_WAIT_MAX_MS, 1, FETCH_MAX_BYTES,
        [(topic, partitions)],
    ))  # fmt: skip
    buf, frame = recv_frame(sock, buf)
    got_correlation, error, answers = decode_fetch_response(frame)
    return buf, got_correlation, error, answers


def raw_consume(
    host: str, port: int, topic: str, expected: int, timeout: float, partition: int = 0
) -> tuple[RawRead, float]:
    """Read ``expected`` records of ``topic``/``partition`` from offset 0 on the broker at
    ``host:port`` (its leader). Returns what was read and the seconds it took, from the
    first request to the last answer."""
    read = RawRead()
    buf = bytearray(PARTITION_MAX_BYTES + 64 * 1024)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        deadline = start + timeout
        correlation = 0
        while read.records < expected:
            if time.perf_counter() > deadline:
                raise RawReadError(f"read {read.records} of {expected} records in {timeout} s")
            correlation += 1
            part = FetchPartitionRequest(partition, -1, read.next_offset, -1, PARTITION_MAX_BYTES)
            buf, got_correlation, error, partitions = fetch(
                sock, buf, correlation, "sluice-bench-raw", topic, [part]
            )
            read.fetches += 1
            if got_correlation != correlation or error:
                raise RawReadError(f"fetch {correlation}: correlation {got_correlation}, "
                                   f"error code {error}")  # fmt: skip
            for fetched in partitions:
                if fetched.error_code:
                    raise RawReadError(f"{topic}[{fetched.partition_index}]: error code "
                                       f"{fetched.error_code}")  # fmt: skip
                count_batches(fetched.records, read, expected - 1)
        return read, time.perf_counter() - start
