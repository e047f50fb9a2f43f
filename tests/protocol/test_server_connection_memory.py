"""ServerConnection against a memory pool (``queued.max.request.bytes``): each request is
charged from its first bytes to its answer, reading waits while the pool is spent, and a
frame that takes too long to arrive is reported; without sockets."""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.metadata.v12.request import MetadataRequest

from sluice.protocol import Request, encode_request
from sluice.protocol.frames import FIRST_ROOM_BYTES, RECEIVE_BUFFER_BYTES
from sluice.protocol.memory_pool import MemoryPool
from sluice.protocol.produce_response import EncodedResponse
from sluice.protocol.server_connection import RawRequest, ServerConnection
from sluice.server.apis import registry
from support.wire import produce_request

METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)
MIB = 1 << 20
VERSIONS = registry().versions  # what the broker serves


def receive(conn: ServerConnection[Any], data: bytes) -> None:
    pos = 0
    while pos < len(data):
        buf = conn.get_buffer(-1)
        take = min(len(buf), len(data) - pos)
        buf[:take] = data[pos : pos + take]
        del buf
        conn.buffer_updated(take)
        pos += take


def answer() -> EncodedResponse:
    return EncodedResponse(3, 12, b"metadata")


def connection(pool: MemoryPool, **kw: Any) -> ServerConnection[str]:
    return ServerConnection(VERSIONS, 8 * MIB, pool=pool, **kw)


def test_a_request_is_charged_until_it_is_answered() -> None:
    pool = MemoryPool()
    conn = connection(pool)
    data = encode_request(1, METADATA)
    receive(conn, data)
    assert pool.used == len(data) - 4 == conn.held_bytes
    assert isinstance(conn.next_request(), Request)
    assert pool.used == len(data) - 4  # handed out, not answered
    conn.respond(answer())
    assert pool.used == 0 == conn.held_bytes


def test_a_deferred_answer_releases_its_charge_when_given() -> None:
    pool = MemoryPool()
    conn = connection(pool)
    first = encode_request(1, produce_request(-1))
    receive(conn, first + encode_request(2, produce_request(-1)))
    assert isinstance(conn.next_request(), Request)
    one = conn.defer("one")
    assert isinstance(conn.next_request(), Request)  # pipelined
    two = conn.defer("two")
    conn.answer(two, answer())  # answered out of order: released, written later
    assert pool.used == len(first) - 4
    conn.answer(one, answer())
    assert pool.used == 0


def test_an_inter_broker_request_is_charged_until_answered() -> None:
    pool = MemoryPool()
    conn = connection(pool, raw_api_keys=frozenset({1000}))
    body = struct.pack(">hhih", 1000, 0, 7, -1) + b"payload"
    receive(conn, struct.pack(">i", len(body)) + body)
    request = conn.next_request()
    assert isinstance(request, RawRequest)
    assert pool.used == len(body)
    conn.respond_framed(b"\x00\x00\x00\x04\x00\x00\x00\x07")
    assert pool.used == 0


def test_closing_releases_requests_frames_and_the_room_of_a_partial_frame() -> None:
    pool = MemoryPool()
    conn = connection(pool)
    receive(conn, encode_request(1, produce_request(-1)) + encode_request(2, METADATA))
    assert isinstance(conn.next_request(), Request)
    conn.defer("waiting")
    receive(conn, struct.pack(">i", 4 * MIB) + bytes(1000))  # a large frame begun
    assert pool.used > FIRST_ROOM_BYTES
    assert conn.close() == ["waiting"]
    assert pool.used == 0


def test_reading_waits_while_the_pool_is_spent_and_the_connection_holds_some() -> None:
    pool = MemoryPool(MIB)
    conn = connection(pool)
    assert not conn.waiting_for_memory
    pool.allocate(MIB)  # another connection spent it
    assert not conn.waiting_for_memory  # holding nothing, it may still read
    receive(conn, encode_request(1, METADATA) + encode_request(2, METADATA))
    assert conn.waiting_for_memory and conn.reading_paused  # now it holds two
    assert isinstance(conn.next_request(), Request)
    conn.respond(answer())
    assert not conn.memory_available() and conn.reading_paused  # still holds one
    assert isinstance(conn.next_request(), Request)
    deferred = conn.defer("parked")
    assert conn.reading_paused  # a request not answered holds memory too
    conn.answer(deferred, answer())
    assert not conn.reading_paused  # holds nothing again: reads, though still spent
    receive(conn, encode_request(3, METADATA))
    assert conn.reading_paused
    pool.release(MIB)
    assert conn.memory_available() and not conn.reading_paused


def test_a_large_frame_refused_room_waits_and_is_then_received_whole() -> None:
    pool = MemoryPool(MIB)
    conn = connection(pool)
    pool.allocate(MIB)
    request = encode_request(1, METADATA)
    body = request[4:] + bytes(600_000)  # a Metadata request with trailing bytes
    data = struct.pack(">i", len(body)) + body
    buf = conn.get_buffer(-1)
    buf[:5000] = data[:5000]
    del buf
    conn.buffer_updated(5000)
    assert conn.waiting_for_memory and conn.receive_rest == 0
    pool.release(MIB)
    assert conn.memory_available()
    assert not conn.reading_paused
    receive(conn, data[5000:])
    assert conn.has_frames


def test_a_connection_filling_room_already_given_is_not_paused() -> None:
    pool = MemoryPool(MIB)
    conn = connection(pool)
    data = struct.pack(">i", 200_000) + bytes(200_000)
    receive(conn, data[:10_000])  # its whole room (200,000 bytes) is given
    pool.allocate(2 * MIB)
    assert not conn.waiting_for_memory and not conn.reading_paused


def test_read_timeout_counts_from_when_a_partial_frame_is_first_seen() -> None:
    conn = connection(MemoryPool())
    assert not conn.read_timed_out(0.0, 30)  # nothing arriving
    receive(conn, struct.pack(">i", 1000) + b"x")
    assert not conn.read_timed_out(100.0, 30)  # first seen now
    assert not conn.read_timed_out(129.0, 30)
    assert conn.read_timed_out(130.0, 30)


def test_read_timeout_starts_again_for_each_frame() -> None:
    conn = connection(MemoryPool())
    request = encode_request(1, METADATA)
    receive(conn, request[:10])
    assert not conn.read_timed_out(0.0, 30)
    receive(conn, request[10:] + request[:10])  # that frame done, the next begun
    assert not conn.read_timed_out(29.0, 30)  # a new frame: first seen at 29
    assert not conn.read_timed_out(58.0, 30)
    assert conn.read_timed_out(59.0, 30)


def test_read_timeout_does_not_count_a_pause_for_the_connections_own_backlog() -> None:
    conn = connection(MemoryPool())
    request = encode_request(1, produce_request(-1))
    while not conn.reading_paused:
        receive(conn, request)
    receive(conn, request[:5])  # a frame begun behind the backlog
    assert not conn.read_timed_out(0.0, 30)
    assert not conn.read_timed_out(100.0, 30)  # paused for its backlog: no clock
    while conn.reading_paused:
        assert isinstance(conn.next_request(), Request)
        conn.respond(None)
    assert not conn.read_timed_out(200.0, 30)  # reading again: first seen now
    assert conn.read_timed_out(230.0, 30)


def test_trim_lets_an_idle_connection_give_back_its_receive_buffer() -> None:
    conn = connection(MemoryPool())
    receive(conn, encode_request(1, METADATA))
    assert isinstance(conn.next_request(), Request)
    conn.respond(answer())
    assert conn.trim() == RECEIVE_BUFFER_BYTES
    assert conn.trim() == 0


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from(["produce", "metadata", "big"]), min_size=1, max_size=10),
    st.randoms(use_true_random=False),
    st.integers(0, 12),
)
def test_every_charge_is_released_once_answered_or_closed(
    kinds: list[str], rnd: Any, close_after: int
) -> None:
    pool = MemoryPool()
    conn: ServerConnection[int] = connection(pool)
    data = b""
    for cid, kind in enumerate(kinds):
        if kind == "metadata":
            data += encode_request(cid, METADATA)
        else:
            request = encode_request(cid, produce_request(-1))
            if kind == "big":  # a Produce frame with trailing bytes: a large frame
                body = request[4:] + bytes(300_000)
                request = struct.pack(">i", len(body)) + body
            data += request
    cut = rnd.randint(0, len(data))
    receive(conn, data[:cut])
    deferred: list[Any] = []
    steps = 0
    while True:
        request = conn.next_request()
        if request is None:
            if deferred:
                conn.answer(deferred.pop(rnd.randrange(len(deferred))), answer())
                continue
            if cut < len(data):
                receive(conn, data[cut:])
                cut = len(data)
                continue
            break
        steps += 1
        if steps == close_after:
            conn.close()
            break
        if rnd.random() < 0.5:
            conn.respond(answer())
        else:
            deferred.append(conn.defer(steps))
        assert pool.used == conn.held_bytes
    if not conn.closed:
        while deferred:
            conn.answer(deferred.pop(), answer())
        assert pool.used == conn.held_bytes == 0
        conn.close()
    assert pool.used == 0
