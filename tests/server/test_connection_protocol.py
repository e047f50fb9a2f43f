"""KafkaConnectionProtocol: frames out of arbitrary receive chunks, buffers reused only when
no frame refers to them, bad size prefixes close, back-pressure pauses reading."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.protocol import FrameDecoder
from sluice.server.connection import (
    MAX_QUEUED_BYTES,
    RECEIVE_BUFFER_BYTES,
    KafkaConnectionProtocol,
)


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False
        self.paused = False
        self.written: list[bytes] = []

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def _connected(max_frame: int = 1 << 20) -> tuple[KafkaConnectionProtocol, FakeTransport]:
    accepted: list[KafkaConnectionProtocol] = []
    protocol = KafkaConnectionProtocol(max_frame, accepted.append)
    transport = FakeTransport()
    protocol.connection_made(transport)
    assert accepted == [protocol]
    return protocol, transport


def _receive(protocol: KafkaConnectionProtocol, data: bytes, chunks: list[int]) -> None:
    """What the event loop does: recv_into the offered buffer, then report the count."""
    pos = 0
    sizes = iter(chunks)
    while pos < len(data):
        buf = protocol.get_buffer(-1)
        assert len(buf) > 0
        want = next(sizes, len(data))
        take = min(len(buf), want, len(data) - pos)
        buf[:take] = data[pos : pos + take]
        del buf
        protocol.buffer_updated(take)
        pos += take


def _drain(protocol: KafkaConnectionProtocol) -> list[bytes]:
    async def take_all() -> list[bytes]:
        protocol.eof_received()
        frames = []
        while (frame := await protocol.next_frame()) is not None:
            frames.append(bytes(frame))
        return frames

    return asyncio.run(take_all())


def _framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(
        st.one_of(st.integers(0, 300), st.integers(RECEIVE_BUFFER_BYTES // 2 - 10, 200_000)),
        min_size=1,
        max_size=12,
    ),
    chunks=st.lists(st.integers(1, 150_000), max_size=40),
)
def test_frames_match_the_reference_decoder_for_any_chunking(
    sizes: list[int], chunks: list[int]
) -> None:
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    data = _framed(payloads)
    protocol, _ = _connected()
    _receive(protocol, data, chunks)
    assert _drain(protocol) == payloads
    assert [bytes(f) for f in FrameDecoder(1 << 20).feed(data)] == payloads


def test_large_frames_land_in_place_and_the_buffer_is_reused_only_when_released() -> None:
    protocol, _ = _connected()
    size = RECEIVE_BUFFER_BYTES * 2
    first, second, third = b"a" * size, b"b" * size, b"c" * size

    async def scenario() -> None:
        _receive(protocol, _framed([first]), [])
        frame1 = await protocol.next_frame()
        assert isinstance(frame1, memoryview) and frame1.readonly and frame1 == first
        _receive(protocol, _framed([second]), [])
        frame2 = await protocol.next_frame()
        assert frame2 == second and frame1 == first  # frame1 alive: not overwritten
        assert isinstance(frame2, memoryview) and frame2.obj is not frame1.obj
        backings = (frame1.obj, frame2.obj)
        del frame1, frame2
        _receive(protocol, _framed([third]), [])
        frame3 = await protocol.next_frame()
        assert isinstance(frame3, memoryview) and frame3 == third
        assert any(frame3.obj is b for b in backings)  # released, so reused

    asyncio.run(scenario())


def test_a_negative_or_oversized_prefix_closes_after_the_good_frames() -> None:
    for bad in (struct.pack(">i", -1), struct.pack(">i", 1001)):
        protocol, transport = _connected(max_frame=1000)
        _receive(protocol, _framed([b"ok"]) + bad + b"xxxx", [])
        assert transport.closed
        assert _drain(protocol) == []  # nothing from a broken stream takes effect


def test_reading_pauses_when_frames_pile_up_and_resumes_when_taken() -> None:
    protocol, transport = _connected(max_frame=1 << 23)
    big = b"z" * (MAX_QUEUED_BYTES // 3)

    async def scenario() -> None:
        for _ in range(4):
            _receive(protocol, _framed([big]), [])
        assert transport.paused
        taken = 0
        while transport.paused:
            assert await protocol.next_frame() == big
            taken += 1
        assert taken >= 1

    asyncio.run(scenario())


def test_connection_lost_ends_the_frames_and_fails_drain() -> None:
    protocol, _ = _connected()
    assert protocol.writer is not None
    protocol.pause_writing()

    async def scenario() -> None:
        drain = asyncio.ensure_future(protocol.writer.drain())  # type: ignore[union-attr]
        await asyncio.sleep(0)
        protocol.connection_lost(None)
        assert await protocol.next_frame() is None
        try:
            await drain
        except ConnectionResetError:
            return
        raise AssertionError("drain should fail once the connection is lost")

    asyncio.run(scenario())
