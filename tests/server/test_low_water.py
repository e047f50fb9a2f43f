"""ReceiveLowWater: while a large frame arrives the socket's SO_RCVLOWAT is the frame's rest,
never more, and 1 between frames; on a real loopback socket large frames, the small ones
after them and an end of stream mid-frame all still arrive."""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.protocol.frames import RECEIVE_BUFFER_BYTES
from sluice.server.apis import registry
from sluice.server.inter_broker import _ResponseReader
from sluice.server.low_water import MIN_LOW_WATER_BYTES, TLS_HELD_BYTES, ReceiveLowWater
from sluice.server.network import ClientIdentity, KafkaConnectionProtocol, KafkaServer
from support.waiting import wait_until_async

VERSIONS = registry().versions  # what the broker serves

LARGE = RECEIVE_BUFFER_BYTES // 2 + MIN_LOW_WATER_BYTES + 1
"""A frame this size gets a buffer of its own and a raised mark."""

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the mark is raised on Linux only")


class FakeSocket:
    def __init__(self, refuse: bool = False) -> None:
        self.mark = 1
        self.calls = 0
        self.refuse = refuse

    def setsockopt(self, level: int, option: int, value: int) -> None:
        assert (level, option) == (socket.SOL_SOCKET, socket.SO_RCVLOWAT)
        self.calls += 1
        if self.refuse:
            raise OSError("not supported")
        self.mark = value


class FakeTransport(asyncio.Transport):
    def __init__(self, sock: FakeSocket) -> None:
        super().__init__()
        self.sock = sock

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.sock if name == "socket" else default

    def close(self) -> None:
        pass


def holding(sock: FakeSocket) -> KafkaConnectionProtocol[ClientIdentity]:
    """A connection whose frames stay queued (its peer is not reading answers), so what
    it received can be looked at."""
    server = KafkaServer("127.0.0.1", 0, {}, VERSIONS, 1 << 22, 0, ClientIdentity())
    protocol = KafkaConnectionProtocol(server)
    protocol.connection_made(FakeTransport(sock))
    protocol.pause_writing()
    return protocol


def queued(protocol: KafkaConnectionProtocol[ClientIdentity]) -> list[bytes]:
    frames = []
    while (frame := protocol.conn._decoder.next_frame()) is not None:
        frames.append(bytes(frame))
    return frames


def framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def feed(protocol: asyncio.BufferedProtocol, data: bytes, cuts: list[int], check: Any) -> None:
    """What the event loop does, one chunk at a time, calling ``check`` after each."""
    pos = 0
    sizes = iter(cuts)
    while pos < len(data):
        buf = protocol.get_buffer(-1)
        take = min(len(buf), next(sizes, len(data)), len(data) - pos)
        buf[:take] = data[pos : pos + take]
        del buf
        protocol.buffer_updated(take)
        pos += take
        check()


payloads = st.lists(
    st.sampled_from([b"s" * 40, b"m" * 9_000, b"L" * LARGE, b"X" * (3 * LARGE)]),
    min_size=1,
    max_size=5,
)
cuts = st.lists(st.integers(1, 300_000), max_size=40)


@linux_only
@settings(max_examples=60, deadline=None)
@given(payloads, cuts)
def test_the_server_side_mark_never_exceeds_the_rest_of_the_frame(
    frames: list[bytes], chunks: list[int]
) -> None:
    sock = FakeSocket()
    protocol = holding(sock)

    def check() -> None:
        rest = protocol.conn.receive_rest
        assert sock.mark <= max(rest, 1)
        if rest <= MIN_LOW_WATER_BYTES:
            assert sock.mark == 1
        else:
            assert sock.mark == rest  # raised for the whole rest

    feed(protocol, framed(frames), chunks, check)
    assert sock.mark == 1
    assert queued(protocol) == frames


@linux_only
@settings(max_examples=60, deadline=None)
@given(st.sampled_from([b"a" * 100, b"B" * LARGE, b"C" * (3 * LARGE)]), cuts)
def test_the_inter_broker_reader_mark_never_exceeds_the_rest_of_the_answer(
    payload: bytes, chunks: list[int]
) -> None:
    sock = FakeSocket()
    reader = _ResponseReader()
    reader.connection_made(FakeTransport(sock))

    async def run() -> bytes:
        answer = reader.expect()

        def check() -> None:
            rest = reader._decoder.frame_rest
            assert sock.mark == (rest if rest > MIN_LOW_WATER_BYTES else 1)

        feed(reader, framed([payload]), chunks, check)
        return bytes(await answer)

    assert asyncio.run(run()) == payload
    assert sock.mark == 1


@linux_only
def test_a_refused_option_leaves_the_socket_waking_per_segment() -> None:
    sock = FakeSocket(refuse=True)
    protocol = holding(sock)
    feed(protocol, framed([b"L" * LARGE, b"L" * LARGE]), [1000], lambda: None)
    assert sock.calls == 1  # tried once, then never again
    assert [len(frame) for frame in queued(protocol)] == [LARGE, LARGE]


class FakeTlsTransport(FakeTransport):
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return object() if name == "sslcontext" else super().get_extra_info(name, default)


@linux_only
def test_on_tls_the_mark_leaves_room_for_a_record_tls_holds() -> None:
    """TLS may hold one incomplete record read from the socket: the socket may owe that
    much less than the frame's rest, so the mark is lowered by it."""
    sock = FakeSocket()
    low = ReceiveLowWater(FakeTlsTransport(sock))
    low.expect(10 * MIN_LOW_WATER_BYTES)
    assert sock.mark == low.mark == 10 * MIN_LOW_WATER_BYTES - TLS_HELD_BYTES
    low.expect(MIN_LOW_WATER_BYTES + TLS_HELD_BYTES)  # what is left is read as it comes
    assert sock.mark == low.mark == 1


def test_without_a_socket_nothing_is_set() -> None:
    low = ReceiveLowWater(FakeTransport(None))  # type: ignore[arg-type]
    low.expect(10 * MIN_LOW_WATER_BYTES)
    assert low.mark == 1


RAW_KEY = 1000  # an API key the server hands to a raw handler: frames arrive undecoded


def raw_frame(body: bytes) -> bytes:
    """A request frame (without its size prefix) of RAW_KEY, correlation id 1."""
    return struct.pack(">hhih", RAW_KEY, 0, 1, 0) + body


async def _serve_one() -> tuple[KafkaServer[ClientIdentity], list[bytes]]:
    received: list[bytes] = []

    def record(frame: bytes) -> bytes:
        received.append(frame)
        return b""  # no answer bytes

    server = KafkaServer("127.0.0.1", 0, {}, VERSIONS, 1 << 24, 0, ClientIdentity(),
                         raw_handlers={RAW_KEY: record})  # fmt: skip
    await server.start()
    return server, received


def _the_connection(server: KafkaServer[ClientIdentity]) -> KafkaConnectionProtocol[ClientIdentity]:
    (connection,) = server._connections
    return connection


def _kernel_mark(protocol: KafkaConnectionProtocol[ClientIdentity]) -> int:
    assert protocol.transport is not None
    sock = protocol.transport.get_extra_info("socket")
    return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT))


def _receiving_a_frame(server: KafkaServer[ClientIdentity]) -> bool:
    return server.connection_count == 1 and _the_connection(server).conn.receive_rest > 0


@linux_only
@pytest.mark.integration  # a loopback connection
def test_on_loopback_a_large_frame_and_the_small_one_behind_it_arrive() -> None:
    big = raw_frame(bytes(range(256)) * (1 << 12))  # 1 MiB
    after = raw_frame(b"after")
    wire = framed([big, after])
    head = 4 + 100_000

    async def run() -> None:
        server, received = await _serve_one()
        _reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(wire[:head])
        await writer.drain()
        await wait_until_async(lambda: _receiving_a_frame(server), 10, "a frame being read")
        protocol = _the_connection(server)
        rest = protocol.conn.receive_rest
        assert len(big) - rest < head - 4  # the bytes sent so far are not all taken:
        assert _kernel_mark(protocol) == rest  # it waits for the rest
        writer.write(wire[head:])
        await writer.drain()
        await wait_until_async(lambda: len(received) == 2, 10, "both frames handled")
        assert received == [big, after]
        assert _kernel_mark(protocol) == 1
        writer.close()
        await server.stop_accepting()
        await server.drain_and_close(5)

    asyncio.run(run())


@linux_only
@pytest.mark.integration  # a loopback connection
def test_on_loopback_a_peer_closing_mid_frame_ends_the_connection() -> None:
    async def run() -> None:
        server, received = await _serve_one()
        _reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(struct.pack(">i", 1 << 20) + raw_frame(b"x" * 200_000))
        await writer.drain()
        await wait_until_async(lambda: _receiving_a_frame(server), 10, "a frame being read")
        assert _kernel_mark(_the_connection(server)) > 1
        writer.close()  # the rest never comes: the end of stream still wakes the loop
        await wait_until_async(lambda: server.connection_count == 0, 10, "the connection lost")
        assert received == []
        await server.stop_accepting()
        await server.drain_and_close(5)

    asyncio.run(run())
