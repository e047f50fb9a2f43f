"""The chaos run's fault-injecting proxy: it forwards, a cut holds the bytes and new
connections of two parties until healed, and it tells which process connected."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.ports import free_port
from sluice.testing.chaos.proxy import CLIENT, FaultProxy, Link, socket_inode, socket_owner

TABLE = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1
   1: 0100007F:A1B2 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 222 1
   2: 0100007F:1F90 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 333 1
   3: 0100007F:C000 0100007F:1F90 06 00000000:00000000 03:00000000 00000000     0        0 0 3
"""


def test_socket_inode_finds_the_connecting_side() -> None:
    assert socket_inode(TABLE, 0xA1B2, 0x1F90) == 222
    assert socket_inode(TABLE, 0x1F90, 0xA1B2) == 333
    assert socket_inode(TABLE, 0xC000, 0x1F90) is None  # TIME_WAIT: no inode
    assert socket_inode(TABLE, 1234, 0x1F90) is None


class Echo:
    """A loopback echo server on a thread."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)


@pytest.fixture
def proxied() -> Iterator[tuple[FaultProxy, int, dict[int, str]]]:
    owners: dict[int, str] = {}
    echo = Echo()
    proxy = FaultProxy(lambda: owners).start()
    port = free_port()
    proxy.add(Link(port, lambda: ("127.0.0.1", echo.port), "echo"))
    try:
        yield proxy, port, owners
    finally:
        proxy.close()
        echo.sock.close()


def _roundtrip(sock: socket.socket, data: bytes, timeout_s: float = 5) -> bytes:
    sock.settimeout(timeout_s)
    sock.sendall(data)
    got = b""
    while len(got) < len(data):
        got += sock.recv(4096)
    return got


def _silent(sock: socket.socket, wait_s: float = 0.3) -> bool:
    sock.settimeout(wait_s)
    try:
        sock.recv(1)
    except TimeoutError:
        return True
    return False


@pytest.mark.integration
def test_a_cut_holds_bytes_and_connections_until_healed(
    proxied: tuple[FaultProxy, int, dict[int, str]],
) -> None:
    proxy, port, _ = proxied
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert _roundtrip(sock, b"hello") == b"hello"
        proxy.cut(CLIENT, "echo")
        assert proxy.cuts == [(CLIENT, "echo")]
        sock.sendall(b"held")
        assert _silent(sock)
        with socket.create_connection(("127.0.0.1", port)) as late:  # accepted, not forwarded
            late.sendall(b"late")
            assert _silent(late)
            proxy.heal(CLIENT, "echo")
            late.settimeout(5)
            assert late.recv(4) == b"late"
        assert sock.recv(4) == b"held"
        proxy.cut("someone", "else")  # other parties' cut leaves this one alone
        assert _roundtrip(sock, b"still") == b"still"
        proxy.heal_all()
        assert proxy.cuts == []


@pytest.mark.integration
def test_a_connection_to_a_party_that_is_down_is_closed() -> None:
    proxy = FaultProxy().start()
    try:
        port, dead = free_port(), free_port()
        proxy.add(Link(port, lambda: ("127.0.0.1", dead), "gone"))
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.settimeout(5)
            assert sock.recv(1) == b""
    finally:
        proxy.close()


@pytest.mark.integration
def test_the_proxy_knows_which_process_connected(
    proxied: tuple[FaultProxy, int, dict[int, str]],
) -> None:
    proxy, port, owners = proxied
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import socket, sys\n"
         f"s = socket.create_connection(('127.0.0.1', {port}))\n"
         "s.sendall(b'x'); s.recv(1); sys.stdout.write('ok\\n'); sys.stdout.flush()\n"
         "sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    owners[child.pid] = "child"
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ok\n"
        assert ("child", "echo") in proxy.open_connections()
        assert proxy.identified == {("child", "echo"): 1}
        with socket.create_connection(("127.0.0.1", port)) as mine:  # an unknown process
            assert _roundtrip(mine, b"y") == b"y"
            assert proxy.identified[(CLIENT, "echo")] == 1
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)


@pytest.mark.integration
def test_socket_owner_reads_proc() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    with server, socket.create_connection(server.getsockname()) as client:
        local, remote = client.getsockname()[1], server.getsockname()[1]
        assert socket_owner(local, remote, [os.getpid()]) == os.getpid()
        assert socket_owner(local, remote, [1]) is None
        assert socket_owner(local, remote, [os.getpid()], proc=Path("/nonexistent")) is None
