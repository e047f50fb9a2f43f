"""Running a real Sluice broker process for interoperability tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``condition`` until true, failing after ``timeout_s`` (no fixed sleeps)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.01)


class BrokerProcess:
    """A ``sluice broker`` subprocess on a loopback port, with its data directory."""

    def __init__(self, data_dir: Path, port: int | None = None, **overrides: str) -> None:
        self.data_dir = data_dir
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
        for key, value in self.overrides.items():
            args += ["--override", f"{key.replace('_', '.')}={value}"]
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True)
        log.close()
        wait_until(self._listening, 30, f"broker on port {self.port} ({self.log_tail()})")
        return self

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
