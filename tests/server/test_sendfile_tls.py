"""File regions on a TLS connection: read in pieces and written through the transport,
draining between pieces, never holding the whole region."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from sluice.server.sendfile import TLS_READ_BYTES, write_segments


class Region:
    """A file region as the log hands it out (position, size, fileno, read)."""

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.position, self.size, self._fd = position, size, fd

    def fileno(self) -> int:
        return self._fd

    def read(self) -> bytes:
        return os.pread(self._fd, self.size, self.position)


class TlsWriter:
    """A writer over a TLS transport: records what is written and each drain."""

    def __init__(self, close_after_drains: int | None = None) -> None:
        self.written: list[bytes] = []
        self.largest_between_drains = 0
        self._since_drain = 0
        self._drains_left = close_after_drains  # then the client goes away

    def is_closing(self) -> bool:
        return self._drains_left == 0

    @property
    def transport(self) -> Any:
        return self

    def get_extra_info(self, name: str) -> Any:
        return object() if name == "sslcontext" else None

    def writelines(self, data: Any) -> None:
        for piece in data:
            self.written.append(bytes(piece))
            self._since_drain += len(piece)

    async def drain(self) -> None:
        self.largest_between_drains = max(self.largest_between_drains, self._since_drain)
        self._since_drain = 0
        if self._drains_left:
            self._drains_left -= 1


def test_a_region_goes_through_tls_in_bounded_pieces(tmp_path: Path) -> None:
    data = os.urandom(3 * TLS_READ_BYTES + 12345)
    path = tmp_path / "segment.log"
    path.write_bytes(b"head" + data + b"tail")
    fd = os.open(path, os.O_RDONLY)
    writer = TlsWriter()
    try:
        region = Region(fd, 4, len(data))
        asyncio.run(write_segments(writer, [b"header", region, b"trailer"]))
    finally:
        os.close(fd)
    assert b"".join(writer.written) == b"header" + data + b"trailer"
    assert writer.largest_between_drains <= TLS_READ_BYTES + len(b"header")


def test_a_region_cut_short_closes_the_answer(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 100)
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(ConnectionAbortedError):
            asyncio.run(write_segments(TlsWriter(), [Region(fd, 0, 200)]))
    finally:
        os.close(fd)


def test_a_client_gone_mid_answer_ends_it_as_a_closed_connection(tmp_path: Path) -> None:
    """The connection takes ConnectionResetError as closed: nothing more is written."""
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(3 * TLS_READ_BYTES))
    fd = os.open(path, os.O_RDONLY)
    writer = TlsWriter(close_after_drains=1)
    try:
        with pytest.raises(ConnectionResetError):
            asyncio.run(write_segments(writer, [b"header", Region(fd, 0, 3 * TLS_READ_BYTES)]))
    finally:
        os.close(fd)
    assert sum(len(piece) for piece in writer.written) == len(b"header") + TLS_READ_BYTES
