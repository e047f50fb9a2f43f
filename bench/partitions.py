"""Many partitions on one broker: creation, event-loop stalls, open files, memory, restart.

One ``sluice broker`` process on a fresh log directory. The harness

1. creates a topic of ``--partitions`` partitions with confluent-kafka's AdminClient
   (CreateTopics with a ``--timeout`` operation timeout) and times it until the answer,
   while a probe connection sends ApiVersions every 10 ms and records each answer's
   latency: the longest is the longest time the broker's event loop did not answer
   (``max stall``; 10 ms resolution); then, under a probe of its own, until a Metadata
   answer lists every partition (that answer's own cost, shown apart: not a goal);
2. counts the broker's open files (``/proc/PID/fd``) and its RSS;
3. produces one record to a sample of partitions (the first, the last and
   ``--sample`` random ones) with confluent-kafka, acks=all, and reads them back;
4. stops the broker cleanly (SIGTERM), starts it again on the same directory and times
   the restart until a Metadata answer lists every partition (from the process start);
   counts open files and RSS again, produces to the sample again and reads both records
   of each sampled partition back (``--kill`` restarts after SIGKILL instead);
5. prints the figures and, for each goal, whether it is met.

Goals: created in <= 30 s with no stall over 100 ms, restart to a served Metadata in
<= 3 s, <= 1.1 open files per partition, RSS <= 250 MB, and every sampled partition
produced to and read back. Figures only: nothing asserts. Only 127.0.0.1 is used.

    python bench/partitions.py [--partitions 20000] [--sample 8] [--json F]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

try:
    import psutil
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
except ImportError as missing:  # pragma: no cover - depends on the environment
    sys.exit(f"{missing}: pip install confluent-kafka psutil")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokers import API_VERSIONS_V0, BrokerStartError, compile_sluice, log

SRC = Path(__file__).resolve().parents[1] / "src"
HOST = "127.0.0.1"
PROBE_INTERVAL_S = 0.010
STALL_BOUND_MS = 100.0
# The clients outlive a broker restart: their reconnection errors are expected.
QUIET = {"log_level": 2}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class Probe:
    """A connection sending ApiVersions v0 every 10 ms from its own thread and recording
    the latency of each answer, in milliseconds, while it runs."""

    def __init__(self, port: int) -> None:
        self._sock = socket.create_connection((HOST, port), timeout=120)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.latencies: list[float] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="probe", daemon=True)

    def _answer(self) -> None:
        sock = self._sock
        head = b""
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                raise ConnectionError("the broker closed the probe connection")
            head += chunk
        remaining = struct.unpack(">i", head)[0]
        while remaining:
            chunk = sock.recv(min(remaining, 65536))
            if not chunk:
                raise ConnectionError("the broker closed the probe connection")
            remaining -= len(chunk)

    def _run(self) -> None:
        sent = 0.0
        try:
            while not self._stop.is_set():
                sent = time.perf_counter()
                self._sock.sendall(API_VERSIONS_V0)
                self._answer()
                took = time.perf_counter() - sent
                sent = 0.0
                self.latencies.append(took * 1000)
                self._stop.wait(max(0.0, PROBE_INTERVAL_S - took))
        except OSError as exc:  # a request unanswered counts as a stall until then
            self.error = str(exc)
            self.latencies.append((time.perf_counter() - sent) * 1000)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(1.0)
        if self._thread.is_alive():  # still waiting for an answer: it counts as it stands
            self.error = "unanswered when the measurement ended"
        self._sock.close()
        self._thread.join()

    def summary(self) -> dict[str, Any]:
        values = sorted(self.latencies) or [0.0]
        return {
            "error": self.error,
            "probes": len(self.latencies),
            "max_stall_ms": round(values[-1], 1),
            "p99_ms": round(values[int(0.99 * (len(values) - 1))], 2),
            "median_ms": round(statistics.median(values), 2),
            "over_100ms": sum(1 for v in values if v > STALL_BOUND_MS),
        }


class BrokerProcess:
    """``python -m sluice broker`` on a given log directory, started and stopped at will."""

    def __init__(self, workdir: Path, overrides: dict[str, str]) -> None:
        self.workdir = workdir
        self.logs = workdir / "logs"
        self.logs.mkdir(exist_ok=True)
        self.port = free_port()
        self.overrides = overrides
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self._log_file = workdir / "broker.log"

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self) -> None:
        listener = f"PLAINTEXT://{self.bootstrap}"
        argv = [sys.executable, "-m", "sluice", "broker",
                "--override", f"listeners={listener}",
                "--override", f"advertised.listeners={listener}",
                "--override", f"log.dirs={self.logs}"]  # fmt: skip
        for key, value in self.overrides.items():
            argv += ["--override", f"{key}={value}"]
        env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        with open(self._log_file, "ab") as out:
            self.started_at = time.perf_counter()
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.workdir, env=env, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrokerStartError(f"exited with code {self.proc.returncode}:\n{self.tail()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.005)
        raise BrokerStartError(f"not listening after 600 s:\n{self.tail()}")

    def tail(self, chars: int = 3000) -> str:
        try:
            return self._log_file.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def stop(self, kill: bool = False) -> float:
        """Stop the broker (SIGTERM, or SIGKILL with ``kill``); seconds it took."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return 0.0
        started = time.perf_counter()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(300)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return time.perf_counter() - started

    def open_files(self) -> int:
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def rss_mb(self) -> float:
        assert self.proc is not None
        return float(psutil.Process(self.proc.pid).memory_info().rss) / 2**20


def wait_for_metadata(bootstrap: str, topic: str, partitions: int, timeout: float) -> float:
    """Poll Metadata for ``topic`` until it lists ``partitions`` partitions, each with a
    leader; returns perf_counter() then."""
    admin = AdminClient({**QUIET, "bootstrap.servers": bootstrap, "socket.timeout.ms": 60_000})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(KafkaException):
            metadata = admin.list_topics(topic=topic, timeout=30)
            found = metadata.topics.get(topic)
            if (
                found is not None
                and found.error is None
                and len(found.partitions) == partitions
                and all(p.leader >= 0 for p in found.partitions.values())
            ):
                return time.perf_counter()
        time.sleep(0.01)
    raise TimeoutError(f"{topic} not served with {partitions} partitions in {timeout} s")


def produce_and_read(bootstrap: str, topic: str, sample: list[int], expect: int) -> dict[str, Any]:
    """Produce one record to each partition of ``sample`` (acks=all), then read each from
    the beginning and check it holds ``expect`` records, the last one just produced."""
    producer = Producer({**QUIET, "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    marker = uuid.uuid4().hex
    failures: list[str] = []
    started = time.perf_counter()

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(f"produce to {msg.partition()}: {err}")

    for p in sample:
        producer.produce(topic, value=f"{marker}-{p}".encode(), partition=p, on_delivery=report)
    left = producer.flush(60)
    if left:
        failures.append(f"{left} records not delivered")
    produced_s = time.perf_counter() - started
    consumer = Consumer({
        **QUIET, "bootstrap.servers": bootstrap, "group.id": f"bench-{marker}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 10,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in sample])
    got: dict[int, list[bytes]] = {p: [] for p in sample}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(len(v) < expect for v in got.values()):
        for msg in consumer.consume(100, timeout=0.5):
            if msg.error() is not None:
                failures.append(f"consume: {msg.error()}")
                continue
            got[msg.partition()].append(msg.value())
    consumer.close()
    del producer, consumer
    for p, values in got.items():
        if len(values) != expect or values[-1] != f"{marker}-{p}".encode():
            failures.append(f"partition {p}: read {len(values)} records, expected {expect}")
    return {
        "partitions": len(sample),
        "ok": not failures,
        "failures": failures[:5],
        "seconds": round(time.perf_counter() - started, 2),
        "produce_s": round(produced_s, 2),
    }


@dataclass
class Figures:
    partitions: int
    created: bool = False
    create_s: float = 0.0
    create_error: str | None = None
    create_probe: dict[str, Any] = field(default_factory=dict)
    served: bool = False
    metadata_s: float = 0.0
    metadata_probe: dict[str, Any] = field(default_factory=dict)
    files_after_create: int = 0
    rss_mb_after_create: float = 0.0
    sample_after_create: dict[str, Any] = field(default_factory=dict)
    files_after_sample: int = 0
    stop_s: float = 0.0
    restart_s: float = 0.0
    files_after_restart: int = 0
    rss_mb_after_restart: float = 0.0
    sample_after_restart: dict[str, Any] = field(default_factory=dict)
    files_after_restart_sample: int = 0
    rss_mb_end: float = 0.0

    def goals(self) -> list[tuple[str, str, bool | None]]:
        n = max(1, self.partitions)
        files = max(self.files_after_create, self.files_after_sample,
                    self.files_after_restart, self.files_after_restart_sample)  # fmt: skip
        rss = max(self.rss_mb_after_create, self.rss_mb_after_restart, self.rss_mb_end)
        return [
            ("created in <= 30 s", f"{self.create_s:.1f} s",
             self.created and self.served and self.create_s <= 30),
            ("no stall over 100 ms while creating",
             f"{self.create_probe.get('max_stall_ms', 0):.0f} ms",
             self.create_probe.get("max_stall_ms", 1e9) <= STALL_BOUND_MS),
            ("(Metadata of the topic, its longest stall)",
             f"{self.metadata_s:.2f} s, {self.metadata_probe.get('max_stall_ms', 0):.0f} ms",
             None),
            ("restart to a served Metadata <= 3 s", f"{self.restart_s:.2f} s",
             0 < self.restart_s <= 3),
            ("<= 1.1 open files per partition", f"{files / n:.3f} ({files} files)",
             files / n <= 1.1),
            ("RSS <= 250 MB", f"{rss:.0f} MB", rss <= 250),
            ("produce/consume to the sample", "after create and restart",
             bool(self.sample_after_create.get("ok") and self.sample_after_restart.get("ok"))),
        ]  # fmt: skip


def run(args: argparse.Namespace, workdir: Path) -> Figures:
    n = args.partitions
    figures = Figures(n)
    broker = BrokerProcess(workdir, dict(kv.split("=", 1) for kv in args.override))
    topic = f"many-{uuid.uuid4().hex[:8]}"
    rng = random.Random(args.seed)
    sample = sorted({0, n - 1, *rng.sample(range(n), min(n, args.sample))})
    broker.start()
    try:
        socket_timeout_ms = min(300_000, int(args.timeout * 1000) + 60_000)
        admin = AdminClient(
            {**QUIET, "bootstrap.servers": broker.bootstrap, "socket.timeout.ms": socket_timeout_ms}
        )
        admin.list_topics(timeout=30)
        log(f"broker up: {broker.open_files()} open files, {broker.rss_mb():.0f} MB")
        with Probe(broker.port) as probe:
            time.sleep(0.2)
            started = time.perf_counter()
            futures = admin.create_topics(
                [NewTopic(topic, n, 1)], operation_timeout=args.timeout,
                request_timeout=args.timeout + 60,
            )  # fmt: skip
            try:
                futures[topic].result(timeout=args.timeout + 120)
                figures.created = True
            except KafkaException as exc:
                figures.create_error = str(exc.args[0])
                log(f"CreateTopics answered {figures.create_error}")
            figures.create_s = time.perf_counter() - started
            time.sleep(0.2)
        figures.create_probe = probe.summary()
        log(f"CreateTopics of {n} partitions answered in {figures.create_s:.2f} s; "
            f"probe {figures.create_probe}")  # fmt: skip
        # Then the topic's Metadata, as a client asks for it next (its cost is the answer
        # for all N partitions, measured apart from the creation).
        with Probe(broker.port) as probe:
            started = time.perf_counter()
            try:
                wait_for_metadata(broker.bootstrap, topic, n, args.timeout + 120)
                figures.served = True
            except TimeoutError as exc:
                figures.create_error = (figures.create_error or "") + f"; {exc}"
            figures.metadata_s = time.perf_counter() - started
        figures.metadata_probe = probe.summary()
        log(f"Metadata with all {n} partitions in {figures.metadata_s:.2f} s; "
            f"probe {figures.metadata_probe}")  # fmt: skip
        figures.files_after_create = broker.open_files()
        figures.rss_mb_after_create = broker.rss_mb()
        log(f"after creation: {figures.files_after_create} open files, "
            f"{figures.rss_mb_after_create:.0f} MB")  # fmt: skip
        if not figures.served:
            return figures
        figures.sample_after_create = produce_and_read(broker.bootstrap, topic, sample, 1)
        figures.files_after_sample = broker.open_files()
        log(f"sample {sample}: {figures.sample_after_create}; "
            f"{figures.files_after_sample} open files")  # fmt: skip
        figures.stop_s = broker.stop(kill=args.kill)
        log(f"stopped in {figures.stop_s:.2f} s ({'SIGKILL' if args.kill else 'SIGTERM'})")
        broker.start()
        served = wait_for_metadata(broker.bootstrap, topic, n, 600)
        figures.restart_s = served - broker.started_at
        figures.files_after_restart = broker.open_files()
        figures.rss_mb_after_restart = broker.rss_mb()
        files, rss = figures.files_after_restart, figures.rss_mb_after_restart
        log(f"restarted to a served Metadata in {figures.restart_s:.2f} s: "
            f"{files} open files, {rss:.0f} MB")  # fmt: skip
        figures.sample_after_restart = produce_and_read(broker.bootstrap, topic, sample, 2)
        figures.files_after_restart_sample = broker.open_files()
        figures.rss_mb_end = broker.rss_mb()
        files, rss = figures.files_after_restart_sample, figures.rss_mb_end
        log(f"sample again: {figures.sample_after_restart}; {files} open files, {rss:.0f} MB")
    finally:
        broker.stop()
        if args.keep_log:
            print(broker.tail(args.keep_log))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=20_000)
    parser.add_argument("--sample", type=int, default=8, help="random partitions besides "
                        "the first and the last")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="CreateTopics operation timeout, seconds")  # fmt: skip
    parser.add_argument("--kill", action="store_true", help="restart after SIGKILL")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker property (repeatable)")  # fmt: skip
    parser.add_argument("--keep-log", type=int, default=0, metavar="CHARS",
                        help="print the end of the broker's log")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--workdir", type=Path, help="keep the broker's directory here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(SRC))
    compile_sluice()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    log(f"{args.partitions} partitions; RLIMIT_NOFILE here: soft {soft}, hard {hard}")
    if args.workdir is not None:  # kept afterwards, for a look at the broker's files
        args.workdir.mkdir(parents=True, exist_ok=True)
        figures = run(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-partitions-") as tmp:
            figures = run(args, Path(tmp))
    print()
    print(f"{'goal':<40} {'figure':>26}  met")
    for name, figure, met in figures.goals():
        verdict = "-" if met is None else "yes" if met else "NO"
        print(f"{name:<40} {figure:>26}  {verdict}")
    if figures.create_error:
        print(f"CreateTopics: {figures.create_error}")
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(figures), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
