"""Responses with file regions written straight to the socket (sluice.server.sendfile).

Small socket buffers force partial sends and EAGAIN: a region much larger than what
the two sockets and the reader's buffer hold cannot go out in one call.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from sluice.log.file_records import FileRecords, FileSlice
from sluice.server import sendfile
from sluice.server.sendfile import write_segments

SMALL_BUFFER = 4096
LARGE = 2 * 1024 * 1024  # far more than two 4 KiB socket buffers and a 64 KiB reader


def pattern(size: int, seed: int = 0) -> bytes:
    block = bytes((i * 7 + seed) % 256 for i in range(4096))
    return (block * (size // len(block) + 1))[:size]


def log_file(tmp_path: Path, name: str, data: bytes) -> FileRecords:
    records = FileRecords.open(tmp_path / name)
    records.append(data)
    return records


class Pair:
    """A connected pair: the broker side's StreamWriter and the client side's reader."""

    def __init__(self, writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> None:
        self.writer = writer
        self.reader = reader


async def tcp_pair(small: bool) -> AsyncIterator[Pair]:
    accepted: asyncio.Future[asyncio.StreamWriter] = asyncio.get_running_loop().create_future()

    async def serve(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if small:
            writer.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER
            )
        accepted.set_result(writer)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if small:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
    client.setblocking(False)
    await asyncio.get_running_loop().sock_connect(client, ("127.0.0.1", port))
    reader, client_writer = await asyncio.open_connection(sock=client)
    writer = await accepted
    try:
        yield Pair(writer, reader)
    finally:
        writer.close()
        client_writer.close()
        server.close()
        await server.wait_closed()


async def unix_pair() -> AsyncIterator[Pair]:
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)
    _, writer = await asyncio.open_connection(sock=a)
    reader, other = await asyncio.open_connection(sock=b)
    try:
        yield Pair(writer, reader)
    finally:
        writer.close()
        other.close()


def counting_waits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    waits: list[int] = []
    original = sendfile._DirectSend.writable

    async def writable(self: Any, transport: Any) -> None:
        waits.append(1)
        await original(self, transport)

    monkeypatch.setattr(sendfile._DirectSend, "writable", writable)
    return waits


def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    async def fail(*_: Any) -> None:
        raise AssertionError("the direct path was expected")

    monkeypatch.setattr(sendfile, "_write_with_loop_sendfile", fail)


async def send_and_read(pair: Pair, segments: list[Any], expected: bytes) -> None:
    write = asyncio.ensure_future(write_segments(pair.writer, segments))
    got = await pair.reader.readexactly(len(expected))
    await write
    assert got == expected


async def each_pair(body: Callable[[Pair], Any], kinds: tuple[str, ...]) -> None:
    for kind in kinds:
        pairs = tcp_pair(small=True) if kind == "tcp" else unix_pair()
        async for pair in pairs:
            await body(pair)


def test_header_region_trailer_in_one_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    no_fallback(monkeypatch)
    data = pattern(100_000)
    records = log_file(tmp_path, "a.log", data)

    async def run() -> None:
        async for pair in tcp_pair(small=False):
            segments = [b"header", FileSlice(records, 1000, 50_000), bytearray(b"\x00\x00\x00")]
            await send_and_read(pair, segments, b"header" + data[1000:51_000] + b"\x00\x00\x00")
            # the socket is uncorked afterwards: a later plain write arrives on its own
            await send_and_read(pair, [b"next"], b"next")

    asyncio.run(run())
    records.close()


def test_partial_sends_and_eagain_wait_for_writability(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_fallback(monkeypatch)
    waits = counting_waits(monkeypatch)
    first, second = pattern(LARGE, 1), pattern(LARGE, 2)
    a, b = log_file(tmp_path, "a.log", first), log_file(tmp_path, "b.log", second)
    header, middle = pattern(300_000, 3), b"between"  # a header larger than the buffers too
    segments = [header, FileSlice(a, 0, LARGE), middle, FileSlice(b, 10, LARGE - 10), b"end"]
    expected = header + first + middle + second[10:] + b"end"

    async def run() -> None:
        await each_pair(lambda pair: send_and_read(pair, segments, expected), ("tcp", "unix"))

    asyncio.run(run())
    assert len(waits) > 2
    a.close()
    b.close()


def test_a_segment_deleted_during_the_send_is_still_sent_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the send must wait, it holds duplicates of the descriptors: closing and
    deleting the segment file (and the descriptor number being reused) changes nothing."""
    no_fallback(monkeypatch)
    data = pattern(LARGE, 5)
    records = log_file(tmp_path, "doomed.log", data)
    reused: list[int] = []
    original = sendfile._DirectSend._hold_descriptors

    def hold_then_delete(self: Any) -> None:
        original(self)
        number = records.fileno()
        records.delete()
        fd = os.open(tmp_path / "other.log", os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"\xff" * LARGE)
        reused.append(fd)
        assert fd == number  # the lowest free number: the one just closed

    monkeypatch.setattr(sendfile._DirectSend, "_hold_descriptors", hold_then_delete)

    async def run() -> None:
        async for pair in tcp_pair(small=True):
            await send_and_read(pair, [b"h", FileSlice(records, 0, LARGE)], b"h" + data)

    asyncio.run(run())
    assert reused
    assert not (tmp_path / "doomed.log").exists()
    os.close(reused[0])


def test_a_region_cut_short_closes_the_connection(tmp_path: Path) -> None:
    records = log_file(tmp_path, "short.log", pattern(1000))

    async def run() -> None:
        async for pair in tcp_pair(small=False):
            with pytest.raises(ConnectionAbortedError):
                await write_segments(pair.writer, [b"h", FileSlice(records, 0, 5000)])

    asyncio.run(run())
    records.close()


def test_a_closed_segment_file_fails_before_anything_is_written(tmp_path: Path) -> None:
    records = log_file(tmp_path, "closed.log", pattern(1000))
    region = FileSlice(records, 0, 1000)
    records.close()

    async def run() -> None:
        async for pair in tcp_pair(small=False):
            with pytest.raises(Exception, match="closed"):
                await write_segments(pair.writer, [b"h", region])
            pair.writer.write(b"ok")  # nothing of the failed response went out
            assert await pair.reader.readexactly(2) == b"ok"

    asyncio.run(run())


def test_loop_sendfile_fallback_when_not_direct(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transport that cannot be written to directly (TLS, or bytes still buffered)
    goes through ``loop.sendfile``, with the same bytes."""
    monkeypatch.setattr(sendfile, "_direct_socket", lambda _transport: None)
    data = pattern(LARGE, 9)
    records = log_file(tmp_path, "f.log", data)

    async def run() -> None:
        async for pair in tcp_pair(small=True):
            segments = [b"head", FileSlice(records, 7, LARGE - 7), b"tail"]
            await send_and_read(pair, segments, b"head" + data[7:] + b"tail")

    asyncio.run(run())
    records.close()


def test_buffers_only_go_through_the_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sendfile, "_DirectSend", None)  # must not be needed

    async def run() -> None:
        async for pair in tcp_pair(small=True):
            big = pattern(LARGE, 4)
            await send_and_read(pair, [b"a", bytearray(b"b"), memoryview(big)], b"ab" + big)

    asyncio.run(run())


def test_the_transport_closing_during_a_wait_ends_the_send(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The peer never reads; the transport is closed (an idle reaper, a shutdown) while
    the send waits: the send ends with ConnectionResetError at its next check."""
    monkeypatch.setattr(sendfile, "CLOSED_CHECK_S", 0.01)
    records = log_file(tmp_path, "g.log", pattern(LARGE))
    original = sendfile._DirectSend.writable

    async def close_then_wait(self: Any, transport: Any) -> None:
        transport.close()
        await original(self, transport)

    monkeypatch.setattr(sendfile._DirectSend, "writable", close_then_wait)

    async def run() -> None:
        async for pair in tcp_pair(small=True):
            pair.reader._transport.pause_reading()  # type: ignore[attr-defined]
            with pytest.raises(ConnectionResetError):
                await write_segments(pair.writer, [b"h", FileSlice(records, 0, LARGE)])

    asyncio.run(run())
    records.close()


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "loop-sendfile"])
def test_a_closed_transport_is_a_connection_reset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direct: bool
) -> None:
    """The client went away before its answer (its reset closed the transport): the write
    ends with ConnectionResetError, never loop.sendfile's RuntimeError."""
    if not direct:
        monkeypatch.setattr(sendfile, "_direct_socket", lambda _transport: None)
    records = log_file(tmp_path, "c.log", pattern(LARGE))

    async def run() -> None:
        async for pair in tcp_pair(small=True):
            pair.writer.transport.close()
            with pytest.raises(ConnectionResetError):
                await write_segments(pair.writer, [b"h", FileSlice(records, 0, LARGE)])

    asyncio.run(run())
    records.close()


def test_a_reset_between_two_regions_is_a_connection_reset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through loop.sendfile, the transport closed after the first of two regions: the
    second is not attempted on it."""
    monkeypatch.setattr(sendfile, "_direct_socket", lambda _transport: None)
    records = log_file(tmp_path, "r.log", pattern(LARGE))

    async def run() -> None:
        loop = asyncio.get_running_loop()
        original = loop.sendfile

        async def then_close(transport: Any, *args: Any, **kwargs: Any) -> int:
            sent = await original(transport, *args, **kwargs)
            transport.close()
            return sent

        loop.sendfile = then_close  # type: ignore[method-assign]
        async for pair in tcp_pair(small=False):
            regions = [FileSlice(records, 0, 1000), b"-", FileSlice(records, 1000, 1000)]
            with pytest.raises(ConnectionResetError):
                await write_segments(pair.writer, regions)

    asyncio.run(run())
    records.close()
