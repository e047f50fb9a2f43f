"""``EmbeddedCluster``: a throwaway Sluice cluster for tests and users.

    with EmbeddedCluster(brokers=3) as cluster:
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
        cluster.kill_broker(1)      # abrupt, as kill -9: session expiry, offline election
        cluster.stop_broker(2)      # controlled shutdown, then a clean stop
        cluster.restart_broker(1)   # same id, port and data directory
        cluster.control(0, ApiKey.FETCH, drop)   # a fault hook on broker 0's next Fetch

Two modes. By default the brokers run in this process, each on its own event-loop
thread, coordinated through one in-process store (a shared
:class:`~sluice.metastore.DataTree`): nothing to install, quick to start.
``EmbeddedCluster(zookeeper=True)`` starts a real ZooKeeper (Debian's ``zookeeper``
package, on a free loopback port) and each broker as its own process
(``python -m sluice broker --override ...``), where ``kill_broker`` is a real SIGKILL.
Every broker keeps its id, loopback ports and data directory across restarts, and in
process its request controls (:mod:`sluice.testing.control`).

A secured cluster names its listeners (``listeners=["SASL_SSL", "INTERNAL"]``: each
broker gets a loopback port for each; the first serves clients and is what
:attr:`~EmbeddedCluster.bootstrap_servers` lists), takes their protocols and settings
in ``overrides`` (``listener.security.protocol.map``, ``inter.broker.listener.name``,
``ssl.*``, ``sasl.*``), and ``client_config``: the Java client's security settings with
which the cluster's own Metadata probes reach the first listener. With ZooKeeper,
:meth:`~EmbeddedCluster.start_zookeeper` first gives a chance to store what the brokers
need before they start (their SCRAM credentials), as an operator does with
``sluice configs --zookeeper``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sluice.metastore.data_tree import DataTree
from sluice.metastore.memory import InProcessStore
from sluice.metastore.zk_server import ZooKeeperServer
from sluice.ports import free_port
from sluice.testing.broker import EmbeddedBroker
from sluice.testing.control import Control, RequestControl, RequestControls

if TYPE_CHECKING:
    from sluice.client.security import ClientSecurity
    from sluice.security.sasl.client import SaslClient

__all__ = ["EmbeddedCluster", "wait_until"]

T = TypeVar("T")


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return data


def _call(sock: socket.socket, body: Any) -> Any:
    from sluice.protocol import encode_request
    from sluice.protocol.responses import decode_response

    sock.sendall(encode_request(0, body))
    size = int.from_bytes(_recv_exactly(sock, 4), "big")
    return decode_response(_recv_exactly(sock, size), body.__api_key__, body.__version__).body


def _authenticate(sock: socket.socket, client: SaslClient) -> None:
    """SaslHandshake v1, then SaslAuthenticate v2 until ``client`` is done, as Kafka's
    ``SaslClientAuthenticator``; raises the exchange's errors (a refused login)."""
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    from sluice.security.sasl.client import SaslClientExchange

    exchange = SaslClientExchange(client)
    handshake = _call(sock, SaslHandshakeRequest(mechanism=exchange.mechanism))
    exchange.on_handshake(handshake.error_code, handshake.mechanisms)
    while (token := exchange.next_token()) is not None:
        answer = _call(sock, SaslAuthenticateRequest(auth_bytes=token))
        lifetime = int(answer.session_lifetime.total_seconds() * 1000)
        exchange.on_authenticate(answer.error_code, answer.error_message, answer.auth_bytes,
                                 lifetime)  # fmt: skip


def wait_until(condition: Callable[[], T], timeout_s: float, what: str) -> T:
    """Poll ``condition`` until it returns something truthy and return that; raise
    TimeoutError after ``timeout_s``. Exceptions from ``condition`` count as "not yet".
    For fault tests: wait on a condition with a deadline rather than sleeping."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:
            last = exc
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what} ({last!r})")
        time.sleep(0.05)


class EmbeddedCluster:
    """``brokers`` brokers (ids 0..N-1 unless given), in this process on an in-process
    coordination store, or as processes on a real ZooKeeper (``zookeeper=True``)."""

    def __init__(
        self,
        brokers: int = 3,
        *,
        broker_ids: list[int] | None = None,
        data_dir: str | Path | None = None,
        overrides: dict[str, Any] | None = None,
        broker_overrides: dict[int, dict[str, Any]] | None = None,
        start_timeout_s: float = 30.0,
        zookeeper: bool = False,
        listeners: Sequence[str] = ("PLAINTEXT",),
        client_config: Mapping[str, str] | None = None,
    ) -> None:
        """``overrides``: broker settings for every broker; ``broker_overrides``: settings
        for one broker id, applied last (another ``advertised.listeners`` or
        ``zookeeper.connect``, as a chaos run's proxies need). ``listeners``: the
        listener names each broker serves on a port of its own, clients' first;
        ``client_config``: the security settings (Java client names) of a client of the
        first listener, for the cluster's own probes."""
        self.broker_ids = list(broker_ids or range(brokers))
        self.uses_zookeeper = zookeeper
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
        self.broker_overrides = {b: dict(v) for b, v in (broker_overrides or {}).items()}
        self.start_timeout_s = start_timeout_s
        self.zookeeper: ZooKeeperServer | None = None
        if not listeners:
            raise ValueError("a cluster needs at least one listener")
        self.listener_ports = {name: {b: free_port() for b in self.broker_ids}
                               for name in listeners}  # fmt: skip
        self.ports = self.listener_ports[listeners[0]]
        self.client_config = dict(client_config or {})
        self._security: ClientSecurity | None = None
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        # In-process mode: one shared tree, a broker thread and a live session each.
        self.tree: DataTree | None = None
        self.embedded: dict[int, EmbeddedBroker] = {}
        self._sessions: dict[int, InProcessStore] = {}
        self.controls = {b: RequestControls(start_timeout_s) for b in self.broker_ids}
        self._sessions_lock = threading.Lock()
        self._heartbeat: threading.Thread | None = None
        self._closing = threading.Event()

    # -- life cycle --------------------------------------------------------------------
    def __enter__(self) -> EmbeddedCluster:
        return self.start_all()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start_zookeeper(self) -> str:
        """Start ZooKeeper (once) and return its connect string, so that what the brokers
        need at start (SCRAM credentials, ACLs) can be stored before :meth:`start_all`."""
        self._require_processes("start_zookeeper")
        if self.zookeeper is None:
            self.zookeeper = ZooKeeperServer().start()
        return self.zookeeper_connect

    def start_all(self) -> EmbeddedCluster:
        if self.uses_zookeeper:
            self.start_zookeeper()
        else:
            self.tree = DataTree()
            self._heartbeat = threading.Thread(
                target=self._keep_sessions, name="sluice-cluster-sessions", daemon=True
            )
            self._heartbeat.start()
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
        if self.zookeeper is None:
            raise RuntimeError("an in-process cluster has no ZooKeeper (zookeeper=True)")
        return str(self.zookeeper.connect_string)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[b]}" for b in self.broker_ids)

    def bootstrap_of(self, broker_id: int) -> str:
        return f"127.0.0.1:{self.ports[broker_id]}"

    def listeners_of(self, broker_id: int) -> str:
        """The broker's ``listeners`` (and ``advertised.listeners``): every listener
        name on its own loopback port."""
        return ",".join(
            f"{name}://127.0.0.1:{ports[broker_id]}" for name, ports in self.listener_ports.items()
        )

    def log_path(self, broker_id: int) -> Path:
        return self.data_dir / f"broker-{broker_id}.log"

    def start(self, broker_id: int) -> None:
        """Start (or restart) one broker and wait until it listens."""
        if self.is_running(broker_id):
            return
        if not self.uses_zookeeper:
            self._start_in_process(broker_id)
            return
        port = self.ports[broker_id]
        settings = {
            "broker.id": broker_id,
            "listeners": self.listeners_of(broker_id),
            "advertised.listeners": self.listeners_of(broker_id),
            "log.dirs": self.data_dir / f"data-{broker_id}",
            "zookeeper.connect": self.zookeeper_connect,
            **self.overrides,
            **self.broker_overrides.get(broker_id, {}),
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

    def control(
        self, broker_id: int, api_key: int, fn: Control, *, keep: bool = False
    ) -> RequestControl:
        """Register a control function for ``broker_id``'s requests of ``api_key`` (see
        :mod:`sluice.testing.control`); it stays registered across the broker's restarts
        until it acts (or for good with ``keep``). In-process clusters only."""
        if self.uses_zookeeper:
            raise RuntimeError("request controls need in-process brokers (zookeeper=False)")
        return self.controls[broker_id].add(api_key, fn, keep=keep)

    def metadata(self, broker_id: int) -> tuple[int, list[int]]:
        """(controller id, live broker ids) as ``broker_id``'s Metadata reports them."""
        body = self.raw_metadata(broker_id, [])
        return int(body.controller_id), sorted(int(b.node_id) for b in body.brokers)

    def raw_metadata(self, broker_id: int, topics: list[str] | None = None) -> Any:
        """A Metadata v1 answer from ``broker_id`` alone (its own metadata cache), for
        ``topics`` (None: every topic); kio's response body."""
        from kio.schema.metadata.v1.request import MetadataRequest, MetadataRequestTopic
        from kio.schema.types import TopicName

        from sluice.protocol import encode_request
        from sluice.protocol.responses import decode_response

        wanted = None if topics is None else tuple(
            MetadataRequestTopic(name=TopicName(t)) for t in topics
        )  # fmt: skip
        with self._connect(broker_id) as sock:
            sock.sendall(encode_request(1, MetadataRequest(topics=wanted)))
            size = int.from_bytes(_recv_exactly(sock, 4), "big")
            return decode_response(_recv_exactly(sock, size), 3, 1).body

    def _connect(self, broker_id: int) -> socket.socket:
        """A blocking connection to ``broker_id``'s first listener, with TLS and SASL as
        :attr:`client_config` says (Sluice's client security: ``ClientSecurity``)."""
        from sluice.client.security import ClientSecurity

        if self._security is None:  # made once: an SSL context reads its files
            self._security = ClientSecurity.from_config(self.client_config)
        security = self._security
        sock = socket.create_connection(("127.0.0.1", self.ports[broker_id]), timeout=5)
        try:
            sock.settimeout(5)
            if security.ssl_context is not None:
                sock = security.ssl_context.wrap_socket(sock, server_hostname="127.0.0.1")
            if security.sasl is not None:
                _authenticate(sock, security.sasl())
        except BaseException:
            sock.close()
            raise
        return sock

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
        if not self.uses_zookeeper:
            embedded = self.embedded.get(broker_id)
            return embedded is not None and embedded.is_running
        proc = self.procs.get(broker_id)
        return proc is not None and proc.poll() is None

    def pid(self, broker_id: int) -> int | None:
        """The process id of a broker process (None in process or never started)."""
        proc = self.procs.get(broker_id)
        return None if proc is None else proc.pid

    def exit_status(self, broker_id: int) -> str:
        """How a stopped broker ended, in words: "exit code 1", "killed by SIGKILL"."""
        proc = self.procs.get(broker_id)
        code = None if proc is None else proc.poll()
        if code is None:
            return "running" if self.is_running(broker_id) else "stopped"
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit code {code}"

    def kill(self, broker_id: int) -> None:
        """Kill one broker abruptly (SIGKILL, or its in-process equivalent); its session
        lives on until it times out."""
        if not self.uses_zookeeper:
            embedded = self.embedded.get(broker_id)
            if embedded is not None and embedded.is_running:
                with self._sessions_lock:
                    self._sessions.pop(broker_id, None)  # no more heartbeats
                embedded.kill()
            return
        self._signal(broker_id, signal.SIGKILL)

    kill_broker = kill

    def pause(self, broker_id: int) -> None:
        """SIGSTOP one broker process: it neither runs nor dies (its sockets stay open,
        its ZooKeeper session lapses unless :meth:`resume` comes first). Processes only."""
        self._require_processes("pause")
        self._signal_running(broker_id, signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        """SIGCONT a broker stopped by :meth:`pause`."""
        self._require_processes("resume")
        self._signal_running(broker_id, signal.SIGCONT)

    def kill_zookeeper(self) -> None:
        """SIGKILL ZooKeeper, keeping its data; :meth:`restart_zookeeper` starts it again."""
        self._require_processes("kill_zookeeper")
        assert self.zookeeper is not None
        self.zookeeper.kill()

    def restart_zookeeper(self) -> None:
        """Start ZooKeeper again on its port and data after :meth:`kill_zookeeper`."""
        self._require_processes("restart_zookeeper")
        assert self.zookeeper is not None
        if not self.zookeeper.running:
            self.zookeeper.start()

    def _require_processes(self, what: str) -> None:
        if not self.uses_zookeeper:
            raise RuntimeError(f"{what} needs brokers run as processes (zookeeper=True)")

    def _signal_running(self, broker_id: int, sig: int) -> None:
        proc = self.procs.get(broker_id)
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, sig)

    def stop_broker(self, broker_id: int, timeout_s: float = 60) -> None:
        """SIGTERM one broker: controlled shutdown (its leaders move away), then a clean
        stop; waits until the process has exited."""
        if not self.uses_zookeeper:
            embedded = self.embedded.get(broker_id)
            if embedded is not None and embedded.is_running:
                embedded.stop()  # the broker closes its session itself
                with self._sessions_lock:
                    self._sessions.pop(broker_id, None)
            return
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
        if sig == signal.SIGTERM:
            os.kill(proc.pid, signal.SIGCONT)  # a paused broker acts on it once resumed
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout_s)

    def stop(self, *, keep_data: bool = False) -> None:
        """Stop every broker (SIGTERM), then ZooKeeper; remove the data directory if this
        cluster made it, unless ``keep_data``."""
        for broker_id in list(self.procs) + list(self.embedded):
            self.stop_broker(broker_id, timeout_s=15)
        self._closing.set()
        if self._heartbeat is not None:
            self._heartbeat.join(5)
            self._heartbeat = None
        if self.zookeeper is not None:
            self.zookeeper.stop()
            self.zookeeper = None
        if self._own_dir and not keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    # -- in-process mode ------------------------------------------------------------------
    def _start_in_process(self, broker_id: int) -> None:
        assert self.tree is not None
        tree = self.tree
        timeout_ms = int(self.overrides["zookeeper.session.timeout.ms"])

        def open_session() -> InProcessStore:
            store = InProcessStore(tree, session_timeout_ms=timeout_ms)
            with self._sessions_lock:
                self._sessions[broker_id] = store
            return store

        config = {
            **{k: v for k, v in self.overrides.items() if not k.startswith("zookeeper.")},
            "broker.id": broker_id,
            "listeners": self.listeners_of(broker_id),
            "advertised.listeners": self.listeners_of(broker_id),
            **{
                k: v
                for k, v in self.broker_overrides.get(broker_id, {}).items()
                if not k.startswith("zookeeper.")
            },
        }
        embedded = EmbeddedBroker(
            config, log_dir=self.data_dir / f"data-{broker_id}",
            startup_timeout_s=self.start_timeout_s, coordination_store=open_session,
            controls=self.controls[broker_id],
        )  # fmt: skip
        self.embedded[broker_id] = embedded
        embedded.start()

    def _keep_sessions(self) -> None:
        """What a ZooKeeper server and its clients do for sessions: live brokers ping,
        and sessions not heard from within their timeout expire."""
        from sluice.metastore.errors import SessionClosedError, SessionExpiredError

        assert self.tree is not None
        while not self._closing.wait(0.1):
            with self._sessions_lock:
                sessions = list(self._sessions.values())
            for store in sessions:
                with contextlib.suppress(SessionClosedError, SessionExpiredError):
                    store.heartbeat()
            self.tree.expire_timed_out_sessions()

    def log_tail(self, broker_id: int, lines: int = 40) -> str:
        try:
            text = self.log_path(broker_id).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
