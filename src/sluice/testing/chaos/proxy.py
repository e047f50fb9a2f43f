"""A fault-injecting TCP proxy on 127.0.0.1, for network partitions between processes.

Every path a partition may cut goes through a *link*: a port this proxy listens on,
forwarding to one *party* (a broker, ZooKeeper). A connection on a link is between two
parties: the link's target, and the party that connected. A link either knows its
source (each broker has its own link to ZooKeeper) or finds it out: on accepting a
connection, the proxy asks the kernel which process owns the connecting socket (its
entry in ``/proc/net/tcp`` gives the socket's inode, and the inode is among one
process's ``/proc/<pid>/fd``), and maps known process ids to parties. A connection from
any other process (the chaos run's own clients) belongs to the party ``"client"``,
which is never cut.

:meth:`FaultProxy.cut` partitions two parties, in both directions: bytes stop flowing
on their connections (nothing is read from either socket, so what is sent fills the
buffers and waits, as on a network that drops packets), and a new connection between
them is accepted but not forwarded. :meth:`FaultProxy.heal` lets the held bytes and
connections through, as TCP's retransmissions would once the network is back; an
endpoint that gave up meanwhile has closed its side, and the other side then sees the
close. A connection to a party that is down is closed at once (connection refused).

The proxy runs its own event loop on one thread; its methods may be called from any
thread. Linux only (``/proc``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CLIENT", "FaultProxy", "Link", "socket_inode", "socket_owner"]

log = logging.getLogger(__name__)

CLIENT = "client"
"""The party of a connection from a process the proxy was not told about."""

_CHUNK = 1 << 16
_LOOPBACK_HEX = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it (little-endian)


def socket_inode(table: str, local_port: int, remote_port: int) -> int | None:
    """The inode of the 127.0.0.1 socket from ``local_port`` to ``remote_port`` in the
    text of ``/proc/net/tcp``, or None."""
    want_local = f"{_LOOPBACK_HEX}:{local_port:04X}"
    want_remote = f"{_LOOPBACK_HEX}:{remote_port:04X}"
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and fields[1] == want_local and fields[2] == want_remote:
            inode = int(fields[9])
            if inode:
                return inode
    return None


def socket_owner(
    local_port: int, remote_port: int, pids: Iterable[int], proc: Path = Path("/proc")
) -> int | None:
    """Which of ``pids`` holds the 127.0.0.1 socket from ``local_port`` to
    ``remote_port``, or None (another process's, or closed meanwhile)."""
    try:
        inode = socket_inode((proc / "net" / "tcp").read_text(), local_port, remote_port)
    except OSError:
        return None
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in pids:
        fd_dir = proc / str(pid) / "fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for name in names:
            with contextlib.suppress(OSError):
                if os.readlink(fd_dir / name) == target:
                    return pid
    return None


@dataclass(frozen=True)
class Link:
    """A port forwarding to ``target`` (called per connection: the party may move), the
    way to party ``to``; ``source`` is the party of every connection, when the link has
    only one (None: found out per connection)."""

    port: int
    target: Callable[[], tuple[str, int]]
    to: str
    source: str | None = None


@dataclass(eq=False)
class _Connection:
    source: str
    to: str
    flowing: asyncio.Event
    writers: list[asyncio.StreamWriter] = field(default_factory=list)


class FaultProxy:
    """The links of one run, on one event-loop thread. ``owners`` maps process ids to
    parties, asked afresh for each connection to a link without a fixed source."""

    def __init__(self, owners: Callable[[], Mapping[int, str]] = dict) -> None:
        self._owners = owners
        self._cuts: set[frozenset[str]] = set()
        self._connections: set[_Connection] = set()
        self._servers: list[asyncio.Server] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxy")
        self._thread.daemon = True
        self.identified: dict[tuple[str, str], int] = {}
        """Connections accepted so far, per (source, target) party."""

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self, coro: Coroutine[object, object, None], timeout_s: float = 10.0) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def add(self, link: Link) -> None:
        """Listen on ``link.port`` (127.0.0.1) and forward what it accepts."""

        async def listen() -> None:
            server = await asyncio.start_server(
                lambda r, w: self._serve(link, r, w), "127.0.0.1", link.port
            )
            self._servers.append(server)

        self._run(listen())

    # -- partitions ------------------------------------------------------------------
    def cut(self, a: str, b: str) -> None:
        """Partition parties ``a`` and ``b`` (both directions) until :meth:`heal`."""
        self._call(self._set_cut, frozenset((a, b)), True)

    def heal(self, a: str, b: str) -> None:
        self._call(self._set_cut, frozenset((a, b)), False)

    def heal_all(self) -> None:
        for pair in list(self._cuts):
            self._call(self._set_cut, pair, False)

    @property
    def cuts(self) -> list[tuple[str, str]]:
        return sorted((min(pair), max(pair)) for pair in self._cuts)

    def open_connections(self) -> list[tuple[str, str]]:
        """(source, target) party of each connection the proxy holds now."""
        return sorted((c.source, c.to) for c in list(self._connections))

    def _call(self, fn: Callable[..., None], *args: object) -> None:
        async def invoke() -> None:
            fn(*args)

        self._run(invoke())

    def _set_cut(self, pair: frozenset[str], cut: bool) -> None:
        if cut:
            self._cuts.add(pair)
        else:
            self._cuts.discard(pair)
        for conn in self._connections:
            if frozenset((conn.source, conn.to)) == pair:
                if cut:
                    conn.flowing.clear()
                else:
                    conn.flowing.set()

    # -- forwarding ------------------------------------------------------------------
    async def _serve(
        self, link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        with contextlib.suppress(asyncio.CancelledError):  # cancelled by close()
            await self._forward(link, reader, writer)

    async def _forward(
        self, link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        source = link.source
        if source is None:
            peer_port = int(writer.get_extra_info("peername")[1])
            owners = dict(self._owners())
            pid = await asyncio.get_running_loop().run_in_executor(
                None, socket_owner, peer_port, link.port, list(owners)
            )
            source = CLIENT if pid is None else owners[pid]
        key = (source, link.to)
        self.identified[key] = self.identified.get(key, 0) + 1
        conn = _Connection(source, link.to, asyncio.Event(), [writer])
        if frozenset(key) not in self._cuts:
            conn.flowing.set()
        self._connections.add(conn)
        try:
            await conn.flowing.wait()  # a cut holds a new connection unforwarded
            try:
                host, port = link.target()
                up_reader, up_writer = await asyncio.open_connection(host, port)
            except (OSError, RuntimeError):
                return  # the party is down: as connection refused
            conn.writers.append(up_writer)
            await asyncio.gather(
                self._pump(reader, up_writer, conn.flowing),
                self._pump(up_reader, writer, conn.flowing),
            )
        finally:
            self._connections.discard(conn)
            for w in conn.writers:
                w.close()

    @staticmethod
    async def _pump(
        src: asyncio.StreamReader, dst: asyncio.StreamWriter, flowing: asyncio.Event
    ) -> None:
        try:
            while data := await src.read(_CHUNK):
                await flowing.wait()
                dst.write(data)
                await dst.drain()
        except (OSError, RuntimeError):
            pass
        finally:
            dst.close()  # one side closed: close the other, which ends the other pump

    def close(self) -> None:
        """Stop listening, close every connection and stop the thread."""
        if not self._thread.is_alive():
            return

        async def shut() -> None:
            for server in self._servers:
                server.close()
            for conn in list(self._connections):
                for w in conn.writers:
                    w.close()
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(TimeoutError, RuntimeError):
            self._run(shut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()
