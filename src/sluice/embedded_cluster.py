"""``EmbeddedCluster``: a throwaway ZooKeeper and N Sluice broker processes, for tests.

    with EmbeddedCluster(brokers=3) as cluster:
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
        cluster.kill_broker(1)      # SIGKILL: session expiry, offline-partition election
        cluster.stop_broker(2)      # SIGTERM: controlled shutdown, then a clean stop
        cluster.restart_broker(1)   # same id, port and data directory

Each broker is ``python -m sluice broker --override ...`` with ``zookeeper.connect``
set, its own log directory and a free loopback port that it keeps across restarts.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sluice.coordination.zk_server import ZooKeeperServer

__all__ = ["EmbeddedCluster"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedCluster:
    """A ZooKeeper plus ``brokers`` broker processes (ids 0..N-1 unless given)."""

    def __init__(
        self,
        brokers: int = 3,
        *,
        broker_ids: list[int] | None = None,
        data_dir: str | Path | None = None,
        overrides: dict[str, Any] | None = None,
        start_timeout_s: float = 30.0,
    ) -> None:
        self.broker_ids = list(broker_ids or range(brokers))
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="sluice-cluster-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.overrides = {
            "zookeeper.session.timeout.ms": 6000,
            "offsets.topic.num.partitions": 1,
            "replica.lag.time.max.ms": 10000,
            "controlled.shutdown.retry.backoff.ms": 1000,
            "group.initial.rebalance.delay.ms": 0,
            **(overrides or {}),
        }
        self.start_timeout_s = start_timeout_s
        self.zookeeper: ZooKeeperServer | None = None
        self.ports = {b: _free_port() for b in self.broker_ids}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    # -- life cycle --------------------------------------------------------------------
    def __enter__(self) -> EmbeddedCluster:
        return self.start_all()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start_all(self) -> EmbeddedCluster:
        self.zookeeper = ZooKeeperServer().start()
        try:
            for broker_id in self.broker_ids:
                self.start(broker_id)
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def zookeeper_connect(self) -> str:
        assert self.zookeeper is not None
        return str(self.zookeeper.connect_string)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[b]}" for b in self.broker_ids)

    def bootstrap_of(self, broker_id: int) -> str:
        return f"127.0.0.1:{self.ports[broker_id]}"

    def log_path(self, broker_id: int) -> Path:
        return self.data_dir / f"broker-{broker_id}.log"

    def start(self, broker_id: int) -> None:
        """Start (or restart) one broker and wait until it listens."""
        if self.is_running(broker_id):
            return
        port = self.ports[broker_id]
        settings = {
            "broker.id": broker_id,
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": self.data_dir / f"data-{broker_id}",
            "zookeeper.connect": self.zookeeper_connect,
            **self.overrides,
        }
        args = [sys.executable, "-m", "sluice", "broker"]
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        with open(self.log_path(broker_id), "ab") as log:
            proc = subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True)
        self.procs[broker_id] = proc
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"broker {broker_id} exited: {self.log_tail(broker_id)}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"broker {broker_id}: {self.log_tail(broker_id)}") from None
                time.sleep(0.02)

    def metadata(self, broker_id: int) -> tuple[int, list[int]]:
        """(controller id, live broker ids) as ``broker_id``'s Metadata reports them."""
        from kio.schema.metadata.v1.request import MetadataRequest

        from sluice.protocol import encode_request
        from sluice.protocol.responses import decode_response

        with socket.create_connection(("127.0.0.1", self.ports[broker_id]), timeout=5) as sock:
            sock.sendall(encode_request(1, MetadataRequest(topics=())))
            size = int.from_bytes(self._recv(sock, 4), "big")
            body: Any = decode_response(self._recv(sock, size), 3, 1).body
        return int(body.controller_id), sorted(int(b.node_id) for b in body.brokers)

    @staticmethod
    def _recv(sock: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("connection closed")
            data += chunk
        return data

    def wait_ready(self, broker_ids: list[int] | None = None, timeout_s: float = 30) -> None:
        """Wait until every running broker names the same controller and knows every
        running broker (the controller's UpdateMetadata reached them)."""
        running = sorted(b for b in (broker_ids or self.broker_ids) if self.is_running(b))
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                seen = {self.metadata(b)[0] for b in running}
                lists = [self.metadata(b)[1] for b in running]
                if len(seen) == 1 and -1 not in seen and all(x == running for x in lists):
                    return
            except (OSError, ConnectionError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"cluster of {running} not ready after {timeout_s}s")
            time.sleep(0.05)

    def is_running(self, broker_id: int) -> bool:
        proc = self.procs.get(broker_id)
        return proc is not None and proc.poll() is None

    def kill(self, broker_id: int) -> None:
        """SIGKILL one broker (its ZooKeeper session lives on until it times out)."""
        self._signal(broker_id, signal.SIGKILL)

    kill_broker = kill

    def stop_broker(self, broker_id: int, timeout_s: float = 60) -> None:
        """SIGTERM one broker: controlled shutdown (its leaders move away), then a clean
        stop; waits until the process has exited."""
        self._signal(broker_id, signal.SIGTERM, timeout_s)

    def restart_broker(self, broker_id: int) -> None:
        """Start a stopped or killed broker again (a running one is stopped first), with
        the same id, port and data directory."""
        if self.is_running(broker_id):
            self.stop_broker(broker_id)
        self.start(broker_id)

    @property
    def controller_id(self) -> int:
        """The active controller as the first answering running broker reports it."""
        for broker_id in self.broker_ids:
            if self.is_running(broker_id):
                try:
                    return self.metadata(broker_id)[0]
                except (OSError, ConnectionError, ValueError):
                    continue
        return -1

    def _signal(self, broker_id: int, sig: int, timeout_s: float = 30) -> None:
        proc = self.procs.get(broker_id)
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout_s)

    def stop(self) -> None:
        """Stop every broker (SIGTERM), then ZooKeeper; remove the data unless given."""
        for broker_id in list(self.procs):
            self.stop_broker(broker_id, timeout_s=15)
        if self.zookeeper is not None:
            self.zookeeper.stop()
            self.zookeeper = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def log_tail(self, broker_id: int, lines: int = 40) -> str:
        try:
            text = self.log_path(broker_id).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
