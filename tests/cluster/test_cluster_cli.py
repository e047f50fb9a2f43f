"""``sluice cluster start``: ZooKeeper plus brokers on loopback, usable by any client;
a broker that dies is reported and restarted (or not) while the rest keep serving; SIGTERM
or ``quit`` tear everything down (temporary data removed unless a broker died)."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from support.waiting import wait_until


def test_cluster_start_serves_and_tears_down(cluster_prerequisites: None) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sluice", "cluster", "start", "--brokers", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        bootstrap = fields["bootstrap servers"].strip()
        data_dir = Path(fields["data and logs in"].strip())
        assert data_dir.is_dir()
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        admin.create_topics([NewTopic("tryout", 2, 2)])["tryout"].result(15)
        wait_until(  # both partitions listed (a broker may not know the new topic yet)
            lambda: [
                len(p.isrs)
                for p in admin.list_topics("tryout", timeout=5).topics["tryout"].partitions.values()
            ] == [2, 2],
            30, "two in-sync replicas",
        )  # fmt: skip
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(lines) + out
    assert "stopping the cluster" in out
    assert not data_dir.exists()


class _Lines:
    """The command's output lines, read by a thread so that waits have deadlines."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        stream = proc.stdout
        self._thread = threading.Thread(
            target=lambda: [self._queue.put(x) for x in stream], daemon=True
        )
        self._thread.start()

    def rest(self) -> str:
        """Everything the command printed after the lines waited for, up to its exit."""
        self._thread.join(60)
        tail = []
        while not self._queue.empty():
            tail.append(self._queue.get())
        self.seen += tail
        return "".join(tail)

    def until(self, prefix: str, timeout_s: float = 60) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line starting {prefix!r} in {self.seen}") from None
            self.seen.append(line)
            if line.startswith(prefix):
                return line


def _start_supervised(*extra: str) -> tuple[subprocess.Popen[str], _Lines, dict[str, str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sluice", "cluster", "start", "--brokers", "2", *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines = _Lines(proc)
    lines.until("Ctrl-C")
    fields = dict(line.split(":", 1) for line in lines.seen if ":" in line)
    return proc, lines, {k: v.strip() for k, v in fields.items()}


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM first, so that the command stops its brokers and ZooKeeper (each in a
    session of its own: killing the command alone would leave them running)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def _command(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def _pid_of(proc: subprocess.Popen[str], lines: _Lines, broker_id: int) -> int:
    _command(proc, "status")
    status = lines.until(f"broker {broker_id}: running, pid ")
    return int(status.split("pid ")[1].split(";")[0])


def test_cluster_start_restarts_a_killed_broker_and_keeps_its_logs(
    cluster_prerequisites: None,
) -> None:
    proc, lines, fields = _start_supervised()
    data_dir = Path(fields["data and logs in"])
    try:
        os.kill(_pid_of(proc, lines, 1), signal.SIGKILL)
        assert "killed by SIGKILL" in lines.until("broker 1 died")
        lines.until("broker 1 started (restart 1 of 3)")
        admin = AdminClient({"bootstrap.servers": fields["bootstrap servers"], "log_level": 0})
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 2, 30, "broker 1 back")
        admin.create_topics([NewTopic("after-restart", 1, 2)])["after-restart"].result(30)
        _command(proc, "quit")
        proc.wait(60)
        out = lines.rest()
        assert proc.returncode == 0, "".join(lines.seen) + out  # whole when stopped
        assert f"data and logs kept in {data_dir}" in out  # a broker died on its own
        assert (data_dir / "broker-1.log").is_file()
    finally:
        _stop(proc)
        shutil.rmtree(data_dir, ignore_errors=True)


def test_cluster_start_keeps_serving_without_a_dead_broker_and_fails_at_exit(
    cluster_prerequisites: None,
) -> None:
    proc, lines, fields = _start_supervised("--restart", "never")
    data_dir = Path(fields["data and logs in"])
    try:
        os.kill(_pid_of(proc, lines, 0), signal.SIGKILL)
        lines.until("broker 0 died")
        lines.until("  not restarting it (--restart never)")
        survivor = fields["bootstrap servers"].split(",")[1]
        admin = AdminClient({"bootstrap.servers": survivor, "log_level": 0})
        wait_until(  # broker 0's session expired: broker 1 alone, and the controller
            lambda: list(admin.list_topics(timeout=5).brokers) == [1]
            and admin.list_topics(timeout=5).controller_id == 1,
            30, "broker 1 alone and the controller",
        )  # fmt: skip
        admin.create_topics([NewTopic("without-0", 1, 1)])["without-0"].result(30)
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(60)
        out = lines.rest()
        assert proc.returncode == 1, "".join(lines.seen) + out
        assert "the cluster was not whole when stopped (brokers [0] down)" in out
        assert (data_dir / "broker-0.log").is_file()
    finally:
        _stop(proc)
        shutil.rmtree(data_dir, ignore_errors=True)
