"""Brokers for tests: a ``sluice broker`` process on a loopback port (:class:`BrokerProcess`,
:func:`broker_process`) and what its data directory holds. An embedded broker is
``sluice.EmbeddedBroker``, shared by a module through the ``broker`` fixture in
tests/conftest.py (settings from the ``broker_config`` fixture)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sluice.ports import free_port
from support.waiting import wait_until


class BrokerProcess:
    """A ``sluice broker`` subprocess on a loopback port, with its data directory."""

    def __init__(
        self, data_dir: Path, port: int | None = None, config: Path | None = None, **overrides: str
    ) -> None:
        self.data_dir = data_dir
        self.config = config  # a properties file for --config, read before the overrides
        self.port = port or free_port()
        self.overrides = overrides
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"broker-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        args = [
            sys.executable, "-m", "sluice", "broker",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"log.dirs={self.data_dir}",
        ]  # fmt: skip
        if self.config is not None:
            args += ["--config", str(self.config)]
        for key, value in self.overrides.items():
            args += ["--override", f"{key.replace('_', '.')}={value}"]
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the process
        self._log_start = log.tell()
        self.proc = subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True)
        log.close()
        wait_until(self._listening, 30, f"broker on port {self.port} ({self.log_tail()})")
        # The port accepts connections before the broker has finished starting (requests
        # wait meanwhile); started means its "ready on" line.
        wait_until(self._ready, 30, f"broker ready ({self.log_tail()})")
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"broker exited with {self.proc.returncode}: {self.log_tail()}")
        with open(self.log_path, "rb") as log:
            log.seek(self._log_start)
            return b" ready on " in log.read()

    def _listening(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"broker exited with {self.proc.returncode}: {self.log_tail()}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout_s)
        return int(self.proc.returncode)

    def kill9(self) -> None:
        self.stop(signal.SIGKILL)


@contextmanager
def broker_process(root: Path, **overrides: str) -> Iterator[BrokerProcess]:
    """A started :class:`BrokerProcess` with its data under ``root``; on leaving, stopped
    with SIGTERM and checked to have shut down cleanly."""
    proc = BrokerProcess(root / "data", **overrides).start()
    yield proc
    code = proc.stop()
    assert code == 0, f"broker did not shut down cleanly ({code}):\n{proc.log_tail()}"


def named_segments(directory: Path, timeout: float = 15.0) -> list[Path]:
    """The data files of a running broker's partition ``directory``, in offset order, once
    every segment a roll has taken has its final name: a roll writes into files the
    broker's file thread made ahead (``<stem>.log.next``) and names just after
    (sluice.log.next_segment); only an unused set, holding no batch, keeps that name."""

    def all_named() -> bool:
        return not any(holds_a_batch(path) for path in directory.glob("*.log.next"))

    wait_until(all_named, timeout, f"the segments of {directory.name} named")
    return sorted(directory.glob("*.log"))


def holds_a_batch(path: Path) -> bool:
    """Whether a data file starts with a batch: an unused one made ahead is empty, or all
    zeros where it was allocated (a batch's length field is never 0)."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except FileNotFoundError:
        return False  # named meanwhile
    return len(head) == 12 and head[8:] != bytes(4)
