"""ServerConnection without sockets: frames out of any chunking, large frames in their own
reused buffers, bad size prefixes, back-pressure decisions, and the answer order —
answers completed in any order go out in request order, Produce pipelined up to its
limit, everything else waiting for every earlier answer."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest

from sluice.protocol import (
    FrameDecoder,
    FrameTooLargeError,
    MalformedRequestError,
    NegativeFrameSizeError,
    Request,
    encode_request,
)
from sluice.protocol.frames import RECEIVE_BUFFER_BYTES
from sluice.protocol.produce_response import EncodedResponse
from sluice.protocol.server_connection import (
    MAX_QUEUED_BYTES,
    RawRequest,
    ServerConnection,
)
from sluice.server.apis import registry
from support.wire import produce_request

VERSIONS = registry().versions  # what the broker serves

METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def receive(conn: ServerConnection[Any] | FrameDecoder, data: bytes, chunks: list[int]) -> None:
    """What the event loop does: recv_into the offered buffer, then report the count."""
    pos = 0
    sizes = iter(chunks)
    while pos < len(data):
        buf = conn.get_buffer(-1)
        assert len(buf) > 0
        take = min(len(buf), next(sizes, len(data)), len(data) - pos)
        buf[:take] = data[pos : pos + take]
        del buf
        conn.buffer_updated(take)
        pos += take


def taken(decoder: FrameDecoder) -> list[bytes]:
    frames = []
    while (frame := decoder.next_frame()) is not None:
        frames.append(bytes(frame))
    return frames


def correlation_ids(segments: list[Any]) -> list[int]:
    """The correlation ids of the response frames in ``segments``, in order."""
    data = b"".join(bytes(s) for s in segments)
    ids = []
    pos = 0
    while pos < len(data):
        (size, cid) = struct.unpack_from(">ii", data, pos)
        ids.append(cid)
        pos += 4 + size
    assert pos == len(data)
    return ids


def produce_response() -> EncodedResponse:
    return EncodedResponse(0, 9, b"produced")


def metadata_response() -> EncodedResponse:
    return EncodedResponse(3, 12, b"metadata")


# -- frames --------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(
        st.one_of(st.integers(0, 300), st.integers(RECEIVE_BUFFER_BYTES // 2 - 10, 200_000)),
        min_size=1,
        max_size=12,
    ),
    chunks=st.lists(st.integers(1, 150_000), max_size=40),
)
def test_in_place_frames_match_the_chunk_decoder_for_any_chunking(
    sizes: list[int], chunks: list[int]
) -> None:
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    data = framed(payloads)
    decoder = FrameDecoder(1 << 20)
    receive(decoder, data, chunks)
    assert decoder.frame_rest == 0 and decoder.buffered == 0
    assert taken(decoder) == payloads
    assert [bytes(f) for f in FrameDecoder(1 << 20).feed(data)] == payloads


def test_large_frames_land_in_place_and_the_buffer_is_reused_only_when_released() -> None:
    decoder = FrameDecoder()
    size = RECEIVE_BUFFER_BYTES * 2
    first, second, third = b"a" * size, b"b" * size, b"c" * size
    receive(decoder, framed([first]), [])
    frame1 = decoder.next_frame()
    assert isinstance(frame1, memoryview) and frame1.readonly and frame1 == first
    receive(decoder, framed([second]), [])
    frame2 = decoder.next_frame()
    assert frame2 == second and frame1 == first  # frame1 alive: not overwritten
    assert isinstance(frame2, memoryview) and frame2.obj is not frame1.obj
    backings = (frame1.obj, frame2.obj)
    del frame1, frame2
    receive(decoder, framed([third]), [])
    frame3 = decoder.next_frame()
    assert isinstance(frame3, memoryview) and frame3 == third
    assert any(frame3.obj is b for b in backings)  # released, so reused


def test_the_rest_of_a_large_frame_is_offered_whole() -> None:
    decoder = FrameDecoder()
    payload = b"p" * (RECEIVE_BUFFER_BYTES * 3)
    data = framed([payload])
    receive(decoder, data[:1000], [])
    assert decoder.frame_rest == len(payload) - 996
    assert len(decoder.get_buffer()) == decoder.frame_rest
    receive(decoder, data[1000:], [])
    assert decoder.frame_rest == 0
    assert taken(decoder) == [payload]


def test_a_negative_or_oversized_prefix_closes_after_the_good_frames() -> None:
    for bad, error in ((struct.pack(">i", -1), NegativeFrameSizeError),
                       (struct.pack(">i", 1001), FrameTooLargeError)):  # fmt: skip
        conn: ServerConnection[object] = ServerConnection(VERSIONS, 1000)
        with pytest.raises(error):
            receive(conn, framed([encode_request(1, METADATA)[4:]]) + bad + b"xxxx", [])
        assert conn.closed
        assert not conn.has_frames  # nothing from a broken stream takes effect
        assert conn.next_request() is None
        conn.buffer_updated(1)  # ignored from now on


def test_a_size_equal_to_the_limit_is_accepted() -> None:
    decoder = FrameDecoder(max_frame_size=RECEIVE_BUFFER_BYTES)
    receive(decoder, framed([b"x" * RECEIVE_BUFFER_BYTES]), [])
    assert taken(decoder) == [b"x" * RECEIVE_BUFFER_BYTES]


def test_reading_pauses_when_frames_pile_up_and_resumes_at_half() -> None:
    conn: ServerConnection[object] = ServerConnection(VERSIONS, 1 << 23)
    request = encode_request(1, produce_request(1))
    size = len(request) - 4
    count = MAX_QUEUED_BYTES // size + 1
    for cid in range(count):
        assert not conn.reading_paused
        receive(conn, encode_request(cid, produce_request(-1)), [])
    assert conn.reading_paused
    resumed_after = None
    for handled in range(1, count + 1):
        assert isinstance(conn.next_request(), Request)
        conn.respond(None)  # acks=0: no answer, nothing held
        if not conn.reading_paused:
            resumed_after = handled
            break
    assert resumed_after is not None
    assert (count - resumed_after) * size <= MAX_QUEUED_BYTES // 2
    assert (count - resumed_after + 1) * size > MAX_QUEUED_BYTES // 2


# -- requests and answers --------------------------------------------------------------------


def connection_with(*requests: Any) -> ServerConnection[str]:
    conn: ServerConnection[str] = ServerConnection(VERSIONS, 1 << 20)
    receive(conn, b"".join(encode_request(cid, body) for cid, body in requests), [7])
    return conn


def test_an_answer_given_at_once_is_handed_out_at_once() -> None:
    conn = connection_with((5, METADATA))
    request = conn.next_request()
    assert isinstance(request, Request) and request.header.correlation_id == 5
    assert conn.in_flight == 1 and not conn.idle
    conn.respond(metadata_response())
    out = conn.data_to_send()
    assert out is not None and correlation_ids(out) == [5]
    assert conn.idle and conn.data_to_send() is None


def test_the_request_size_is_its_frames() -> None:
    """What the request log reports as requestBytes: the frame without its prefix."""
    frames = [encode_request(cid, METADATA, client_id=client) for cid, client in
              ((1, "a"), (2, "a-longer-client-id"))]  # fmt: skip
    conn: ServerConnection[str] = ServerConnection(VERSIONS, 1 << 20)
    receive(conn, b"".join(frames), [5])
    for frame in frames:
        assert conn.next_request() is not None
        assert conn.request_size == len(frame) - 4
        conn.respond(metadata_response())


def test_a_request_must_be_answered_before_the_next_is_handed_out() -> None:
    conn = connection_with((1, METADATA), (2, METADATA))
    assert conn.next_request() is not None
    with pytest.raises(RuntimeError):
        conn.next_request()
    conn.respond_framed(b"")
    with pytest.raises(RuntimeError):  # answered already
        conn.respond_framed(b"")


def handed_out(conn: ServerConnection[Any]) -> int:
    """The correlation id of the request the connection hands out now (there must be one)."""
    request = conn.next_request()
    assert isinstance(request, Request)
    return request.header.correlation_id


def test_produce_is_pipelined_and_anything_else_waits_for_every_earlier_answer() -> None:
    conn = connection_with(
        (1, produce_request(-1)), (2, produce_request(-1)), (3, produce_request(1)),
        (4, METADATA), (5, produce_request(1)),
    )  # fmt: skip
    assert handed_out(conn) == 1
    p1 = conn.defer("p1")
    assert handed_out(conn) == 2  # read and appended while 1 waits
    p2 = conn.defer("p2")
    assert handed_out(conn) == 3
    conn.respond(produce_response())  # answered at once, but behind 1 and 2
    assert conn.data_to_send() is None
    assert conn.next_request() is None  # Metadata waits for every earlier answer
    conn.answer(p2, produce_response())
    assert conn.data_to_send() is None  # 1 is still ahead
    conn.answer(p1, produce_response())
    out = conn.data_to_send()
    assert out is not None and correlation_ids(out) == [1, 2, 3]  # released together
    assert handed_out(conn) == 4
    m4 = conn.defer("m4")
    assert conn.next_request() is None  # nothing passes a waiting Metadata, not even a Produce
    conn.answer(m4, metadata_response())
    assert handed_out(conn) == 5
    conn.respond(produce_response())
    out = conn.data_to_send()
    assert out is not None and correlation_ids(out) == [4, 5]


def test_pipelining_stops_at_the_limit_and_goes_on_as_answers_are_written() -> None:
    limit = 3
    conn: ServerConnection[int] = ServerConnection(VERSIONS, 1 << 20, max_pipelined=limit)
    receive(conn, b"".join(encode_request(c, produce_request(-1)) for c in range(6)), [])
    waiting = []
    while conn.next_request() is not None:
        waiting.append(conn.defer(len(waiting)))
    assert len(waiting) == limit
    conn.answer(waiting[1], produce_response())
    assert conn.next_request() is None  # answered, not written: still in line
    conn.answer(waiting[0], produce_response())
    assert conn.in_flight == 1
    assert conn.next_request() is not None  # two places free
    conn.defer(3)
    assert conn.next_request() is not None
    conn.defer(4)
    assert conn.next_request() is None


def test_close_returns_the_handles_still_awaited_and_ignores_later_answers() -> None:
    conn = connection_with((1, produce_request(-1)), (2, produce_request(-1)),
                           (3, produce_request(1)), (4, METADATA))  # fmt: skip
    conn.next_request()
    p1 = conn.defer("one")
    conn.next_request()
    conn.defer("two")
    conn.next_request()
    conn.respond(produce_response())
    assert conn.close() == ["one", "two"]
    assert conn.closed and conn.idle and not conn.has_frames
    conn.answer(p1, produce_response())
    assert conn.data_to_send() is None and conn.next_request() is None
    assert conn.close() == []


def test_a_malformed_request_raises_and_closes() -> None:
    conn: ServerConnection[object] = ServerConnection(VERSIONS, 1 << 20)
    receive(conn, framed([b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00"]), [])  # header cut short
    with pytest.raises(MalformedRequestError):
        conn.next_request()
    assert conn.closed


def test_an_apiversions_request_too_new_is_answered_by_the_connection() -> None:
    frame = bytearray(encode_request(9, ApiVersionsRequest(
        client_software_name="t", client_software_version="1")))  # fmt: skip
    frame[6:8] = struct.pack(">h", 99)  # a version from the future
    conn = connection_with((8, METADATA))
    receive(conn, bytes(frame), [])
    assert conn.next_request() is not None
    waiting = conn.defer("metadata")
    assert conn.next_request() is None
    conn.answer(waiting, metadata_response())
    assert conn.next_request() is None  # answered inside: nothing for a handler
    out = conn.data_to_send()
    assert out is not None and correlation_ids(out) == [8, 9]


def test_raw_frames_come_out_undecoded() -> None:
    raw = struct.pack(">hhih", 4, 5, 77, 0) + b"controller"
    conn: ServerConnection[object] = ServerConnection(
        VERSIONS, 1 << 20, raw_api_keys=frozenset({4})
    )
    receive(conn, framed([raw]) + encode_request(78, METADATA), [])
    request = conn.next_request()
    assert isinstance(request, RawRequest) and request.api_key == 4 and request.frame == raw
    pending = conn.defer("raw")
    assert pending.correlation_id == 77
    conn.answer_framed(pending, struct.pack(">ii", 4, 77))
    assert handed_out(conn) == 78
    conn.respond(metadata_response())
    out = conn.data_to_send()
    assert out is not None and correlation_ids(out) == [77, 78]


class Region:
    """A file region as the log's FileSlice presents it."""

    def __init__(self, size: int) -> None:
        self.position = 0
        self.size = size

    def fileno(self) -> int:
        return -1

    def read(self) -> bytes:
        return b"\0" * self.size


def test_an_answer_with_a_file_region_holds_back_everything_until_it_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sluice.protocol import server_connection

    plain = server_connection.encode_response_segments

    def encode(correlation_id: int, response: Any) -> list[Any]:
        if response != "records":
            return plain(correlation_id, response)
        return [struct.pack(">ii", 4 + 10, correlation_id), Region(10)]

    monkeypatch.setattr(server_connection, "encode_response_segments", encode)
    conn = connection_with((1, produce_request(1)), (2, METADATA), (3, produce_request(1)))
    conn.next_request()
    conn.respond(produce_response())
    conn.next_request()
    conn.respond("records")  # type: ignore[arg-type]
    out = conn.data_to_send()
    assert out is not None and len(out) == 3 and isinstance(out[2], Region)
    assert conn.sending and not conn.idle
    assert conn.next_request() is None  # nothing is handled while it is sent
    conn.send_complete()
    assert conn.next_request() is not None
    conn.respond(produce_response())
    out = conn.data_to_send()
    assert out is not None and correlation_ids(out) == [3]
    assert not conn.sending and conn.idle


# -- the order, for any arrival, chunking and completion order --------------------------------


@settings(max_examples=300, deadline=None)
@given(
    kinds=st.lists(
        st.sampled_from(["produce-wait", "produce-now", "produce-none", "other-wait", "other-now"]),
        min_size=1,
        max_size=40,
    ),
    limit=st.integers(1, 5),
    data=st.data(),
)
def test_answers_go_out_in_request_order_whatever_order_they_complete_in(
    kinds: list[str], limit: int, data: st.DataObject
) -> None:
    wire = b"".join(
        encode_request(cid, produce_request(-1) if kind.startswith("produce") else METADATA)
        for cid, kind in enumerate(kinds)
    )
    conn: ServerConnection[int] = ServerConnection(VERSIONS, 1 << 20, max_pipelined=limit)
    cuts = data.draw(st.lists(st.integers(1, 200), max_size=60), label="chunks")
    receive(conn, wire, cuts)
    waiting: dict[int, Any] = {}
    handed: list[int] = []
    written: list[int] = []
    while True:
        request = conn.next_request()
        if request is not None:
            assert isinstance(request, Request)
            cid = request.header.correlation_id
            kind = kinds[cid]
            # The rules: anything else only with no answer owed ahead; a Produce only
            # behind Produce requests, fewer than the limit.
            ahead = [c for c in handed if c not in written and kinds[c] != "produce-none"]
            if kind.startswith("other"):
                assert ahead == []
            else:
                assert all(kinds[c].startswith("produce") for c in ahead)
                assert len(ahead) < limit
            handed.append(cid)
            if kind.endswith("wait"):
                waiting[cid] = conn.defer(cid)
            elif kind == "produce-none":
                conn.respond(None)
            else:
                conn.respond(produce_response() if kind.startswith("p") else metadata_response())
            assert conn.in_flight <= limit
        elif waiting:
            cid = data.draw(st.sampled_from(sorted(waiting)), label="completes")
            pending = waiting.pop(cid)
            response = produce_response() if kinds[cid].startswith("p") else metadata_response()
            conn.answer(pending, response)
        else:
            assert not conn.has_frames
            break
        out = conn.data_to_send()
        if out is not None:
            written += correlation_ids(out)
    assert handed == list(range(len(kinds)))
    assert written == [c for c, kind in enumerate(kinds) if kind != "produce-none"]
    assert conn.idle
