"""The sans-I/O frame decoder and frame encoding."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameDecoder,
    FrameSizeError,
    FrameTooLargeError,
    NegativeFrameSizeError,
    ProtocolError,
    encode_frame,
    frame_segments,
)

DETERMINISTIC = settings(derandomize=True, max_examples=200, deadline=None)


def prefixed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_default_max_frame_size_is_kafkas_socket_request_max_bytes() -> None:
    assert DEFAULT_MAX_FRAME_SIZE == 104857600
    assert FrameDecoder().max_frame_size == 104857600


def test_one_frame_in_one_chunk() -> None:
    decoder = FrameDecoder()
    frames = decoder.feed(prefixed(b"hello"))
    assert [bytes(f) for f in frames] == [b"hello"]
    assert decoder.buffered == 0
    assert decoder.pending_frame_size is None


def test_several_frames_in_one_chunk() -> None:
    decoder = FrameDecoder()
    chunk = prefixed(b"a") + prefixed(b"") + prefixed(b"ccc") + prefixed(b"dd")[:3]
    assert [bytes(f) for f in decoder.feed(chunk)] == [b"a", b"", b"ccc"]
    assert decoder.buffered == 3
    assert [bytes(f) for f in decoder.feed(prefixed(b"dd")[3:])] == [b"dd"]


def test_byte_by_byte_feed() -> None:
    decoder = FrameDecoder()
    stream = prefixed(b"first") + prefixed(b"second")
    out: list[bytes] = []
    for index in range(len(stream)):
        out += [bytes(f) for f in decoder.feed(stream[index : index + 1])]
        if index < 3:
            assert decoder.pending_frame_size is None
    assert out == [b"first", b"second"]
    assert decoder.buffered == 0


def test_partial_prefix_then_payload_in_pieces() -> None:
    decoder = FrameDecoder()
    payload = bytes(range(200))
    data = prefixed(payload)
    assert decoder.feed(data[:2]) == []
    assert decoder.buffered == 2
    assert decoder.feed(data[2:50]) == []
    assert decoder.pending_frame_size == 200
    assert decoder.buffered == 50
    (frame,) = decoder.feed(data[50:])
    assert bytes(frame) == payload


def test_empty_feed() -> None:
    assert FrameDecoder().feed(b"") == []


def test_frames_are_read_only() -> None:
    decoder = FrameDecoder()
    (whole,) = decoder.feed(prefixed(b"xyz"))
    decoder.feed(prefixed(b"abc")[:5])
    (assembled,) = decoder.feed(b"bc")
    for frame in (whole, assembled):
        assert frame.readonly
        with pytest.raises(TypeError):
            frame[0] = 0  # type: ignore[index]


def test_frame_inside_bytes_chunk_is_not_copied() -> None:
    chunk = prefixed(b"payload")
    (frame,) = FrameDecoder().feed(chunk)
    assert frame.obj is chunk


def test_mutable_input_is_copied() -> None:
    chunk = bytearray(prefixed(b"payload") + prefixed(b"payload")[:7])
    decoder = FrameDecoder()
    (frame,) = decoder.feed(chunk)
    chunk[4:11] = b"XXXXXXX"  # the caller reuses its receive buffer
    assert bytes(frame) == b"payload"
    view = memoryview(bytearray(b"load"))
    (second,) = decoder.feed(view)
    view[:] = b"ZZZZ"
    assert bytes(second) == b"payload"


def test_memoryview_of_other_format_is_accepted() -> None:
    data = prefixed(b"abcd")
    padded = data + b"\x00" * (-len(data) % 4)
    view = memoryview(padded).cast("I")
    (frame,) = FrameDecoder().feed(view)
    assert bytes(frame) == b"abcd"


def test_size_equal_to_maximum_is_accepted() -> None:
    decoder = FrameDecoder(max_frame_size=8)
    (frame,) = decoder.feed(prefixed(b"12345678"))
    assert bytes(frame) == b"12345678"


def test_oversize_frame_is_rejected_from_its_prefix_alone() -> None:
    decoder = FrameDecoder(max_frame_size=8)
    with pytest.raises(FrameTooLargeError) as caught:
        decoder.feed(struct.pack(">i", 9))
    assert caught.value.size == 9
    assert caught.value.max_frame_size == 8
    assert isinstance(caught.value, FrameSizeError)
    assert isinstance(caught.value, ProtocolError)


def test_default_maximum_rejects_kafka_plus_one() -> None:
    with pytest.raises(FrameTooLargeError):
        FrameDecoder().feed(struct.pack(">i", 104857601))


def test_negative_size_is_rejected() -> None:
    decoder = FrameDecoder()
    with pytest.raises(NegativeFrameSizeError) as caught:
        decoder.feed(b"\xff\xff\xff\xfe")
    assert caught.value.size == -2


def test_bad_size_after_good_frames_in_one_chunk_raises_and_drops_them() -> None:
    decoder = FrameDecoder(max_frame_size=16)
    with pytest.raises(FrameTooLargeError):
        decoder.feed(prefixed(b"ok") + struct.pack(">i", 17))


def test_decoder_refuses_input_after_an_error() -> None:
    decoder = FrameDecoder()
    with pytest.raises(NegativeFrameSizeError):
        decoder.feed(b"\x80\x00\x00\x00")
    with pytest.raises(NegativeFrameSizeError):
        decoder.feed(prefixed(b"fine"))


def test_negative_maximum_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_size=-1)


def test_encode_frame() -> None:
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(memoryview(b"")) == b"\x00\x00\x00\x00"


def test_frame_segments_prefix_total_and_keep_buffers() -> None:
    big = bytes(1000)
    parts = frame_segments([b"ab", big, memoryview(b"cd")])
    assert parts[0] == struct.pack(">i", 1004)
    assert parts[2] is big
    assert b"".join(parts) == encode_frame(b"ab" + big + b"cd")


@st.composite
def chunked_stream(draw: st.DrawFn) -> tuple[list[bytes], list[bytes]]:
    payloads = draw(st.lists(st.binary(max_size=64), max_size=8))
    stream = b"".join(prefixed(p) for p in payloads)
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    bounds = [0, *cuts, len(stream)]
    return payloads, [stream[a:b] for a, b in itertools.pairwise(bounds)]


@DETERMINISTIC
@given(chunked_stream(), st.booleans())
def test_any_chunking_yields_the_same_frames(
    case: tuple[list[bytes], list[bytes]], mutable: bool
) -> None:
    payloads, chunks = case
    decoder = FrameDecoder()
    out: list[bytes] = []
    for chunk in chunks:
        out += [bytes(f) for f in decoder.feed(bytearray(chunk) if mutable else chunk)]
    assert out == payloads
    assert decoder.buffered == 0


@DETERMINISTIC
@given(st.lists(st.binary(max_size=40), max_size=6), st.integers(0, 64))
def test_random_bytes_raise_only_frame_size_errors(chunks: list[bytes], limit: int) -> None:
    decoder = FrameDecoder(max_frame_size=limit)
    for chunk in chunks:
        try:
            frames = decoder.feed(chunk)
        except FrameSizeError:
            return
        assert all(len(frame) <= limit for frame in frames)
