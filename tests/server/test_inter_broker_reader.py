"""BrokerConnection's response reader, fed by hand (no sockets): frames split anywhere,
small and large, a large answer's buffer reused once released, and a broken stream."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.protocol.frames import RECEIVE_BUFFER_BYTES
from sluice.server.inter_broker import _ResponseReader


class FakeTransport:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def feed(reader: _ResponseReader, data: bytes, cuts: list[int]) -> None:
    """Deliver ``data`` as the event loop would, in chunks ending at ``cuts``, each no
    larger than the buffer the reader offers."""
    pos = 0
    for end in [*sorted(set(cuts)), len(data)]:
        while pos < end:
            buf = reader.get_buffer(-1)
            n = min(len(buf), end - pos)
            buf[:n] = data[pos : pos + n]
            reader.buffer_updated(n)
            pos += n


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def new_reader() -> tuple[_ResponseReader, FakeTransport]:
    reader = _ResponseReader()
    transport = FakeTransport()
    reader.transport = transport  # type: ignore[assignment]
    return reader, transport


sizes = st.sampled_from([0, 1, 17, RECEIVE_BUFFER_BYTES - 4, RECEIVE_BUFFER_BYTES + 1,
                         3 * RECEIVE_BUFFER_BYTES + 5])  # fmt: skip


@settings(derandomize=True, max_examples=40, deadline=None)
@given(sizes=st.lists(sizes, min_size=1, max_size=4), data=st.data())
def test_frames_arrive_whole_however_they_are_split(sizes: list[int], data: st.DataObject) -> None:
    async def run() -> None:
        reader, transport = new_reader()
        for i, size in enumerate(sizes):
            payload = bytes((i + j) % 251 for j in range(size))
            wire = framed(payload)
            cuts = data.draw(st.lists(st.integers(0, len(wire)), max_size=5))
            waiter = reader.expect()
            feed(reader, wire, cuts)
            assert waiter.done()
            assert bytes(waiter.result()) == payload
        assert not transport.closed

    asyncio.run(run())


def test_a_large_answer_takes_a_buffer_released_by_an_earlier_one() -> None:
    async def run() -> list[Any]:
        reader, _ = new_reader()
        owners = []
        held = None
        for keep in (False, True, False, False):
            waiter = reader.expect()
            feed(reader, framed(b"x" * (2 * RECEIVE_BUFFER_BYTES)), [])
            frame = waiter.result()
            del waiter
            assert isinstance(frame, memoryview) and frame.readonly
            owners.append(frame.obj)
            held = frame if keep else None  # the caller still refers to this one
            del frame
        assert held is None
        return owners

    owners = asyncio.run(run())
    assert owners[1] is owners[0]  # the first was released
    assert owners[2] is not owners[1]  # the second was still held
    assert owners[3] in (owners[1], owners[2])  # both free again: one is reused


@pytest.mark.parametrize(
    "wire",
    [
        struct.pack(">i", -1),  # a negative size
        framed(b"ab") + b"\0",  # bytes after the answer, before any request
    ],
)
def test_a_broken_stream_fails_the_waiter_and_closes(wire: bytes) -> None:
    async def run() -> None:
        reader, transport = new_reader()
        waiter = reader.expect()
        feed(reader, wire, [])
        with pytest.raises(ConnectionError):
            waiter.result()
        assert transport.closed
        with pytest.raises(ConnectionError):
            reader.expect().result()  # the connection stays failed

    asyncio.run(run())


def test_an_answer_nobody_asked_for_is_an_error() -> None:
    async def run() -> None:
        reader, transport = new_reader()
        feed(reader, framed(b"late"), [])
        assert transport.closed
        with pytest.raises(ConnectionError):
            reader.expect().result()

    asyncio.run(run())


def test_connection_lost_fails_the_waiter() -> None:
    async def run() -> None:
        reader, _ = new_reader()
        waiter = reader.expect()
        feed(reader, struct.pack(">i", 10) + b"abc", [])
        reader.connection_lost(None)
        with pytest.raises(ConnectionResetError):
            waiter.result()

    asyncio.run(run())
