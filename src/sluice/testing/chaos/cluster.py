"""``ChaosCluster``: an :class:`~sluice.testing.EmbeddedCluster` on ZooKeeper whose
brokers reach each other and ZooKeeper only through a :class:`FaultProxy`.

Wiring (all on 127.0.0.1)::

    clients ─┐
    broker A ─┼─> proxy port P_B ─> broker B's listener (its real port)
    broker C ─┘      (the address B advertises: the one every client and broker uses)

    broker B ──> proxy port Z_B ─> ZooKeeper        (one ZooKeeper link per broker)

A Sluice broker has one listener and registers one advertised address, which clients
and the other brokers alike connect to (there is no separate inter-broker listener). So
each broker listens on its real port and advertises its proxy port: every connection to
a broker, a client's or another broker's, goes through that broker's link, and the
proxy tells a broker's connection from a client's by the process that opened it. Each
broker's ``zookeeper.connect`` is its own proxy port to ZooKeeper, so a broker can be
cut from ZooKeeper alone. Clients are never cut; the run's own clients bootstrap through
the proxy ports too.

With ``disk_mb``, each broker's log directory is on a tmpfs of that size of its own
(``mount -t tmpfs``, so only as root): the disk-full fault fills one.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.base import TopicPartition
from sluice.controller.zk_data import (
    ControllerZNode,
    TopicPartitionStateZNode,
    TopicZNode,
)
from sluice.metastore.errors import CoordinationError, NoNodeError
from sluice.metastore.store import Stat
from sluice.metastore.zookeeper import ZooKeeperStore
from sluice.ports import free_port
from sluice.testing.chaos.proxy import FaultProxy, Link
from sluice.testing.cluster import EmbeddedCluster

__all__ = ["ZOOKEEPER", "ChaosCluster", "PartitionState", "broker_party"]

ZOOKEEPER = "zookeeper"
"""ZooKeeper's party in the proxy."""


def broker_party(broker_id: int) -> str:
    """A broker's party in the proxy."""
    return f"broker-{broker_id}"


@dataclass(frozen=True)
class PartitionState:
    """A partition's state as ZooKeeper holds it: assigned replicas in preference order,
    leader (-1: none) and ISR."""

    replicas: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]

    @property
    def whole(self) -> bool:
        """Led, with every assigned replica in sync."""
        return self.leader >= 0 and set(self.isr) == set(self.replicas)


class ChaosCluster:
    """``brokers`` broker processes (ids 0..N-1) on one ZooKeeper, wired through a
    :class:`FaultProxy` (see the module docstring)."""

    def __init__(
        self,
        brokers: int = 3,
        *,
        overrides: dict[str, Any] | None = None,
        disk_mb: int | None = None,
        keep_data: bool = False,
    ) -> None:
        """``keep_data``: leave the data directory (every broker's log and data) behind
        on :meth:`stop`, for a post-mortem."""
        self.keep_data = keep_data
        self.broker_ids = list(range(brokers))
        self.advertised_ports = {b: free_port() for b in self.broker_ids}
        self.zookeeper_ports = {b: free_port() for b in self.broker_ids}
        self.disk_mb = disk_mb
        per_broker: dict[int, dict[str, Any]] = {}
        self.cluster = EmbeddedCluster(
            brokers, broker_ids=self.broker_ids, overrides=overrides, zookeeper=True,
            broker_overrides=per_broker,
        )  # fmt: skip
        for b in self.broker_ids:
            settings: dict[str, Any] = {
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.advertised_ports[b]}",
                "zookeeper.connect": f"127.0.0.1:{self.zookeeper_ports[b]}",
            }
            if disk_mb is not None:
                settings["log.dirs"] = self.disk(b) / "data"
            self.cluster.broker_overrides[b] = settings
        self.proxy = FaultProxy(self._owners)
        self._mounted: list[Path] = []
        self._store: ZooKeeperStore | None = None

    # -- life cycle ----------------------------------------------------------------
    def __enter__(self) -> ChaosCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ChaosCluster:
        self.proxy.start()
        try:
            for b in self.broker_ids:
                real = functools.partial(_loopback, self.cluster.ports[b])
                self.proxy.add(Link(self.advertised_ports[b], real, broker_party(b)))
                self.proxy.add(
                    Link(self.zookeeper_ports[b], self._zookeeper_address, ZOOKEEPER,
                         source=broker_party(b))
                )  # fmt: skip
            if self.disk_mb is not None:
                for b in self.broker_ids:
                    self._mount(self.disk(b), self.disk_mb)
            self.cluster.start_all()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._store is not None:
            with contextlib.suppress(CoordinationError):
                self._store.close()
            self._store = None
        if self.proxy.running:
            self.proxy.heal_all()
        for b in self.broker_ids:
            self.cluster.resume(b)
        self.cluster.stop(keep_data=True)
        self.proxy.close()
        if not self.keep_data:
            for mount in self._mounted:
                subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)
            self._mounted.clear()
            shutil.rmtree(self.cluster.data_dir, ignore_errors=True)

    def _mount(self, path: Path, size_mb: int) -> None:
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
            check=True, capture_output=True,
        )  # fmt: skip
        self._mounted.append(path)

    def disk(self, broker_id: int) -> Path:
        """The filesystem holding ``broker_id``'s log directory (with ``disk_mb``)."""
        return self.cluster.data_dir / f"disk-{broker_id}"

    def log_dir(self, broker_id: int) -> Path:
        if self.disk_mb is not None:
            return self.disk(broker_id) / "data"
        return self.cluster.data_dir / f"data-{broker_id}"

    def _owners(self) -> dict[int, str]:
        return {
            pid: broker_party(b)
            for b in self.broker_ids
            if (pid := self.cluster.pid(b)) is not None and self.cluster.is_running(b)
        }

    def _zookeeper_address(self) -> tuple[str, int]:
        zookeeper = self.cluster.zookeeper
        if zookeeper is None or not zookeeper.running:
            raise RuntimeError("ZooKeeper is down")
        return "127.0.0.1", zookeeper.port

    @property
    def bootstrap_servers(self) -> str:
        """The brokers' advertised (proxy) addresses."""
        return ",".join(f"127.0.0.1:{self.advertised_ports[b]}" for b in self.broker_ids)

    # -- what ZooKeeper says -----------------------------------------------------------
    def _zk(self) -> ZooKeeperStore:
        if self._store is None:
            self._store = ZooKeeperStore(
                self.cluster.zookeeper_connect, session_timeout_ms=10_000,
                connection_timeout_ms=3_000, request_timeout_ms=5_000,
            )  # fmt: skip
        return self._store

    def _read(self, path: str) -> tuple[bytes, Stat] | None:
        """A znode's data and stat; None if it does not exist or ZooKeeper cannot be
        reached now (the session is then opened again on the next read)."""
        try:
            return self._zk().get(path)
        except NoNodeError:
            return None
        except CoordinationError:
            if self._store is not None:
                with contextlib.suppress(CoordinationError):
                    self._store.close()
                self._store = None
            return None

    def controller_id(self) -> int:
        """The controller ZooKeeper names (-1: none, or ZooKeeper unreachable)."""
        node = self._read(ControllerZNode.path)
        found = None if node is None else ControllerZNode.decode(node[0])
        return -1 if found is None else found

    def partition_states(self, topic: str) -> dict[int, PartitionState]:
        """Every partition of ``topic`` with a state in ZooKeeper (empty if unreachable)."""
        node = self._read(TopicZNode.path(topic))
        if node is None:
            return {}
        _, assignment = TopicZNode.decode(node[0])
        out = {}
        for p, replicas in assignment.items():
            state_node = self._read(TopicPartitionStateZNode.path(TopicPartition(topic, p)))
            if state_node is not None:
                state = TopicPartitionStateZNode.decode(*state_node).leader_and_isr
                out[p] = PartitionState(replicas.replicas, state.leader, tuple(state.isr))
        return out

    def whole(self, topic: str, partitions: int) -> bool:
        """Every broker and ZooKeeper running, one controller known to every broker, and
        every partition of ``topic`` led with its whole ISR."""
        cluster = self.cluster
        if cluster.zookeeper is None or not cluster.zookeeper.running:
            return False
        if not all(cluster.is_running(b) for b in self.broker_ids):
            return False
        try:
            cluster.wait_ready(timeout_s=0)
        except (TimeoutError, OSError):
            return False
        states = self.partition_states(topic)
        return len(states) == partitions and all(s.whole for s in states.values())

    def is_paused(self, broker_id: int) -> bool:
        pid = self.cluster.pid(broker_id)
        if pid is None or not self.cluster.is_running(broker_id):
            return False
        try:
            status = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        return status.rpartition(")")[2].split()[0] == "T"


def _loopback(port: int) -> tuple[str, int]:
    return "127.0.0.1", port


def can_mount_tmpfs() -> str | None:
    """None if this process can mount a tmpfs (root, ``mount`` present), else why not."""
    if os.geteuid() != 0:
        return "mounting a small filesystem needs root"
    if shutil.which("mount") is None:
        return "no mount command"
    return None
