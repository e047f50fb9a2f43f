"""FrameDecoder's memory: a large frame's room grows with what arrives, not with what its
prefix claims; spares are reused whole; the pool is charged what is given and waited for
when spent; idle buffers are let go."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.protocol import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, FrameTooLargeError
from sluice.protocol.frames import FIRST_ROOM_BYTES, RECEIVE_BUFFER_BYTES
from sluice.protocol.memory_pool import MemoryPool

KIB = 1024
MIB = 1024 * KIB


def prefixed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def receive(decoder: FrameDecoder, data: bytes, chunk: int = 1 << 30) -> list[int]:
    """What the event loop does; returns the size of each buffer offered."""
    offered = []
    pos = 0
    while pos < len(data):
        buf = decoder.get_buffer(-1)
        offered.append(len(buf))
        assert len(buf) > 0
        take = min(len(buf), chunk, len(data) - pos)
        buf[:take] = data[pos : pos + take]
        del buf
        decoder.buffer_updated(take)
        pos += take
    return offered


def test_a_claim_of_the_largest_frame_takes_memory_for_what_arrived() -> None:
    pool = MemoryPool()
    decoder = FrameDecoder(pool=pool)
    receive(decoder, struct.pack(">i", DEFAULT_MAX_FRAME_SIZE) + bytes(4 * KIB))
    assert decoder.pending_frame_size == DEFAULT_MAX_FRAME_SIZE
    assert decoder.frame_rest == DEFAULT_MAX_FRAME_SIZE - 4 * KIB
    assert decoder.room == FIRST_ROOM_BYTES - 4 * KIB
    assert pool.used == decoder.charged == FIRST_ROOM_BYTES
    assert decoder.memory <= RECEIVE_BUFFER_BYTES + FIRST_ROOM_BYTES


def test_the_room_doubles_as_it_fills_up_to_the_claim() -> None:
    pool = MemoryPool()
    decoder = FrameDecoder(pool=pool)
    payload = bytes(range(256)) * (5 * MIB // 256 + 3)  # 5 MiB and a bit
    offered = receive(decoder, prefixed(payload))
    grants = [FIRST_ROOM_BYTES << n for n in range(5)]  # 256 KiB .. 4 MiB, then the rest
    # The first read lands in the receive buffer; then each read fills the room given.
    assert offered[1:] == [
        grants[0] - (RECEIVE_BUFFER_BYTES - 4),
        *[g // 2 for g in grants[1:]],
        len(payload) - grants[-1],
    ]
    assert pool.used == len(payload)  # the whole frame, queued
    frame = decoder.next_frame()
    assert frame is not None and frame.readonly and bytes(frame) == payload
    assert decoder.charged == 0 and pool.used == len(payload)  # the taker's to release


def test_a_free_spare_gives_a_frame_all_its_room_at_once() -> None:
    decoder = FrameDecoder()
    first = bytes(700 * KIB)
    receive(decoder, prefixed(first))
    taken = decoder.next_frame()
    assert taken is not None
    del taken  # nothing refers to the first frame any more
    second = b"s" * (600 * KIB)
    offered = receive(decoder, prefixed(second))
    assert offered[1:] == [len(second) - (RECEIVE_BUFFER_BYTES - 4)]  # one read for the rest
    frame = decoder.next_frame()
    assert frame is not None and bytes(frame) == second


def test_a_spare_still_referenced_is_not_reused() -> None:
    decoder = FrameDecoder()
    receive(decoder, prefixed(b"a" * (700 * KIB)))
    held = decoder.next_frame()
    receive(decoder, prefixed(b"b" * (700 * KIB)))
    second = decoder.next_frame()
    assert held is not None and second is not None
    assert bytes(held) == b"a" * (700 * KIB)  # not overwritten
    assert bytes(second) == b"b" * (700 * KIB)


def test_a_spent_pool_stops_a_large_frame_from_starting_until_memory_is_released() -> None:
    pool = MemoryPool(1 * MIB)
    pool.allocate(1 * MIB)  # spent by others
    decoder = FrameDecoder(pool=pool)
    payload = b"x" * (300 * KIB)
    data = prefixed(payload)
    buf = decoder.get_buffer(-1)
    buf[:1000] = data[:1000]
    del buf
    decoder.buffer_updated(1000)
    assert decoder.waiting_for_memory and decoder.room == 0
    assert decoder.buffered == 1000  # the frame's start waits in the receive buffer
    assert decoder.retry_memory()  # still spent: still waiting
    pool.release(1)
    assert not decoder.retry_memory()
    assert decoder.room > 0
    receive(decoder, data[1000:])
    frame = decoder.next_frame()
    assert frame is not None and bytes(frame) == payload


def test_a_spent_pool_stops_a_large_frame_from_growing_until_memory_is_released() -> None:
    pool = MemoryPool(1 * MIB)
    decoder = FrameDecoder(pool=pool)
    payload = b"y" * (2 * MIB)
    data = prefixed(payload)
    receive(decoder, data[: FIRST_ROOM_BYTES + 4])  # the first room is full
    assert pool.used == 2 * FIRST_ROOM_BYTES and not decoder.waiting_for_memory
    pool.allocate(1 * MIB)  # others spend the pool
    receive(decoder, data[FIRST_ROOM_BYTES + 4 : 2 * FIRST_ROOM_BYTES + 4])  # full again
    assert decoder.waiting_for_memory and decoder.room == 0
    pool.release(1 * MIB)
    assert not decoder.retry_memory() and decoder.room == 2 * FIRST_ROOM_BYTES
    receive(decoder, data[2 * FIRST_ROOM_BYTES + 4 :])
    frame = decoder.next_frame()
    assert frame is not None and bytes(frame) == payload


def test_room_already_given_is_filled_whatever_the_pool_says() -> None:
    pool = MemoryPool(1 * MIB)
    decoder = FrameDecoder(pool=pool)
    payload = b"z" * (200 * KIB)
    data = prefixed(payload)
    receive(decoder, data[:5000])
    pool.allocate(2 * MIB)  # spent
    receive(decoder, data[5000:])  # the frame's whole room was given: it completes
    frame = decoder.next_frame()
    assert frame is not None and bytes(frame) == payload


def test_asking_for_a_buffer_while_waiting_takes_the_memory_anyway() -> None:
    pool = MemoryPool(1 * MIB)
    pool.allocate(1 * MIB)
    decoder = FrameDecoder(pool=pool)
    payload = b"w" * (300 * KIB)
    receive(decoder, prefixed(payload))  # a caller that does not pause still gets it all
    assert pool.used == 1 * MIB + len(payload)
    frame = decoder.next_frame()
    assert frame is not None and bytes(frame) == payload


def test_trim_lets_go_of_idle_buffers_but_not_of_a_partial_frame() -> None:
    decoder = FrameDecoder()
    receive(decoder, prefixed(b"q" * (400 * KIB)) + prefixed(b"small"))
    frames = [bytes(f) for f in iter(decoder.next_frame, None)]
    assert frames == [b"q" * (400 * KIB), b"small"]
    assert decoder.memory == RECEIVE_BUFFER_BYTES + 512 * KIB  # a spare in 256 KiB steps
    assert decoder.trim() == RECEIVE_BUFFER_BYTES + 512 * KIB
    assert decoder.memory == 0
    receive(decoder, prefixed(b"again")[:6])  # a partial small frame
    assert decoder.trim() == 0 and decoder.buffered == 6
    receive(decoder, prefixed(b"again")[6:])
    assert bytes(decoder.next_frame() or b"") == b"again"


def test_clear_releases_what_the_decoder_holds() -> None:
    pool = MemoryPool()
    decoder = FrameDecoder(pool=pool)
    receive(decoder, prefixed(b"a" * 100) + prefixed(b"b" * (300 * KIB))[: 100 * KIB])
    assert pool.used == decoder.charged == 100 + FIRST_ROOM_BYTES
    decoder.clear()
    assert pool.used == 0 and decoder.memory == 0


def test_a_bad_prefix_releases_the_frames_completed_with_it() -> None:
    pool = MemoryPool()
    decoder = FrameDecoder(max_frame_size=1000, pool=pool)
    with pytest.raises(FrameTooLargeError):
        receive(decoder, prefixed(b"ok") + struct.pack(">i", 1001))
    assert pool.used == 0


sizes = st.sampled_from([0, 7, 100, 20_000, 40_000, 300 * KIB, 700 * KIB, 1_300 * KIB])


@settings(max_examples=80, deadline=None)
@given(st.lists(sizes, min_size=1, max_size=6), st.lists(st.integers(1, 400_000), max_size=30),
       st.lists(st.booleans(), max_size=10))  # fmt: skip
def test_any_chunking_charges_the_pool_exactly_what_is_held(
    lengths: list[int], chunks: list[int], take_early: list[bool]
) -> None:
    """The pool holds the decoder's charge plus the frames taken and not released, the
    frames come out whole, and everything released leaves it at zero."""
    pool = MemoryPool()
    decoder = FrameDecoder(pool=pool)
    payloads = [bytes([n % 251]) * size for n, size in enumerate(lengths)]
    data = b"".join(prefixed(p) for p in payloads)
    sizes_iter = iter(chunks)
    early = iter(take_early)
    out: list[bytes] = []
    outstanding = 0
    pos = 0
    while pos < len(data):
        buf = decoder.get_buffer(-1)
        take = min(len(buf), next(sizes_iter, len(data)), len(data) - pos)
        buf[:take] = data[pos : pos + take]
        del buf
        decoder.buffer_updated(take)
        pos += take
        if next(early, False) and (frame := decoder.next_frame()) is not None:
            out.append(bytes(frame))
            outstanding += len(frame)
        assert pool.used == decoder.charged + outstanding
    while (frame := decoder.next_frame()) is not None:
        out.append(bytes(frame))
        outstanding += len(frame)
    assert out == payloads
    assert pool.used == outstanding
    pool.release(outstanding)
    decoder.clear()
    assert pool.used == 0
