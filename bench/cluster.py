"""Cluster benchmark: three Sluice brokers on loopback with a real ZooKeeper.

Measures, with replication factor 3 and ``min.insync.replicas=2``:

* acks=all produce throughput (1 KiB records, linger.ms=5, batch.size=1 MiB) on 1 and
  6 partitions, with the sum of the three brokers' CPU seconds per GB; beside it, in
  the same run and with the same client settings, one standalone Sluice broker at
  acks=1 (RF=1), the baseline of the goal "cluster acks=all >= 50% of single acks=1";
* produce latency: one record in flight, acks=all, paced at --rate records/s
  (goal: p99 <= 2 ms at 1,000 records/s); the standalone broker's acks=all beside it;
* end-to-end latency: a paced producer and a consumer with default fetch settings
  (fetch.wait.max.ms=500), on the cluster and on the standalone broker,
  receive time minus the send time carried in the record;
* leader failover: a producer sends continuously to a 1-partition topic, its leader
  gets kill -9; the time from the kill to the first successful delivery of a record
  sent after the kill, and to the moment a survivor's metadata names a new leader;
  with zookeeper.session.timeout.ms=6000 and again with a smaller one (--short-session-ms);
* controlled shutdown: SIGTERM the broker that leads most of a 12-partition topic;
  the time until its process exits and until every partition it led has a new leader.

Each measurement runs --repeat times (failover: --failover-runs); the machine's load
average is printed before each run, medians and every run's figures at the end.
Figures only: nothing here asserts a time. Only 127.0.0.1 is used.

    python bench/cluster.py [--quick] [--repeat 3] [--records 200000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import signal
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import KafkaError, Producer
from confluent_kafka import libversion as librdkafka_version
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokers import cpu_seconds, log
from brokers import sluice as standalone_sluice
from produce_consume import (
    ADMIN_TIMEOUT_S,
    GB,
    MB,
    BrokerHandle,
    Case,
    Result,
    Settings,
    create_topic,
    delete_topic,
    fmt,
    produce_bulk,
    run_e2e,
    run_latency,
)
from sluice.testing import EmbeddedCluster, wait_until

BROKER_IDS = [1, 2, 3]
RECORD_SIZE = 1024
LATENCY_SIZE = 100
SHUTDOWN_PARTITIONS = 12
TOPIC_CONFIG = {"min.insync.replicas": "2"}
WAIT_S = 60.0

# Partition -> (leader id, ISR) as one broker's Metadata reports it.
Leaders = dict[int, tuple[int, list[int]]]


@dataclass(frozen=True)
class Config:
    """Bounds of one invocation, from the command line."""

    records: int
    seconds: float
    repeat: int
    latency_seconds: float
    rate: int
    failover_runs: int
    session_ms: int
    short_session_ms: int

    def settings(self) -> Settings:
        """The same bounds in the form bench/produce_consume.py's runners take."""
        return Settings(
            records=self.records,
            seconds=self.seconds,
            repeat=self.repeat,
            latency_seconds=self.latency_seconds,
            rate=self.rate,
            latency_linger_ms=0,
        )


@dataclass
class Series:
    """Every run of one measurement: figures per run, and errors."""

    title: str
    runs: list[Result] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def median(self, metric: str) -> float | None:
        values = [r[metric] for r in self.runs if metric in r]
        return statistics.median(values) if values else None


# --- helpers ---------------------------------------------------------------------------


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def leaders_seen_by(cluster: EmbeddedCluster, broker_id: int, topic: str) -> Leaders:
    """The topic's partitions as one given broker's metadata cache reports them (a raw
    MetadataRequest, so that the answer comes from that broker and no other)."""
    body: Any = cluster.raw_metadata(broker_id, [topic])
    out: Leaders = {}
    for t in body.topics:
        if str(t.name) == topic and not t.error_code:
            for p in t.partitions:
                out[int(p.partition_index)] = (int(p.leader_id), [int(b) for b in p.isr_nodes])
    return out


def create_rf3_topic(cluster: EmbeddedCluster, partitions: int) -> tuple[str, Leaders]:
    """A fresh RF=3 topic; returns once every partition has a leader and an ISR of 3."""
    topic = f"bench-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 3})
    futures = admin.create_topics(
        [NewTopic(topic, partitions, 3, config=TOPIC_CONFIG)], operation_timeout=ADMIN_TIMEOUT_S
    )
    futures[topic].result(timeout=ADMIN_TIMEOUT_S)

    def ready() -> Leaders | None:
        seen = [leaders_seen_by(cluster, b, topic) for b in cluster.broker_ids]
        for view in seen:
            if len(view) != partitions:
                return None
            if any(leader < 0 or len(isr) != 3 for leader, isr in view.values()):
                return None
        return seen[0]

    leaders: Leaders = wait_until(ready, WAIT_S, f"ISR of 3 on every partition of {topic}")
    return topic, leaders


def drop_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    with contextlib.suppress(Exception):
        delete_topic(admin, topic)


def broker_procs(cluster: EmbeddedCluster) -> list[psutil.Process]:
    return [psutil.Process(cluster.procs[b].pid) for b in cluster.broker_ids]


def attempt(series: Series, label: str, run: Callable[[], Result]) -> None:
    """One run of a measurement: its figures, or its error, recorded in ``series``."""
    log(f"{series.title} {label}: load {load()}")
    try:
        result = run()
    except Exception as exc:
        series.errors.append(f"{type(exc).__name__}: {exc}")
        log(f"  ERROR {type(exc).__name__}: {exc}")
        return
    series.runs.append(result)
    log("  " + "  ".join(f"{k} {fmt(v)}" for k, v in result.items()))


# --- throughput and latency ---------------------------------------------------------------


def bulk_throughput(
    handle: BrokerHandle, procs: list[psutil.Process], topic: str, case: Case, cfg: Config
) -> Result:
    """Bounded bulk produce; broker CPU is the sum over ``procs``."""
    before = sum(cpu_seconds(p) for p in procs)
    delivery, elapsed = produce_bulk(handle, topic, case, cfg.records, cfg.seconds)
    cpu = sum(cpu_seconds(p) for p in procs) - before
    if delivery.failed or delivery.first_error:
        raise RuntimeError(
            f"{delivery.ok} delivered, {delivery.failed} failed: {delivery.first_error}"
        )
    nbytes = delivery.ok * case.size
    return {
        "MB/s": nbytes / MB / elapsed,
        "records/s": delivery.ok / elapsed,
        "broker CPU-s/GB": cpu / (max(nbytes, 1) / GB),
    }


def cluster_throughput(cluster: EmbeddedCluster, partitions: int, cfg: Config) -> Result:
    topic, leaders = create_rf3_topic(cluster, partitions)
    leader = psutil.Process(cluster.procs[leaders[0][0]].pid)
    handle = BrokerHandle("cluster", cluster.bootstrap_servers, leader)
    try:
        case = Case("produce", RECORD_SIZE, "all", partitions)
        return bulk_throughput(handle, broker_procs(cluster), topic, case, cfg)
    finally:
        drop_topic(cluster.bootstrap_servers, topic)


def single_throughput(single: BrokerHandle, partitions: int, cfg: Config) -> Result:
    admin = AdminClient({"bootstrap.servers": single.bootstrap, "log_level": 3})
    topic = create_topic(admin, partitions)
    try:
        case = Case("produce", RECORD_SIZE, "1", partitions)
        return bulk_throughput(single, [single.proc], topic, case, cfg)
    finally:
        delete_topic(admin, topic)


def cluster_latency(cluster: EmbeddedCluster, workload: str, cfg: Config) -> Result:
    """produce_consume's latency or e2e runner on a 1-partition RF=3 topic ("broker CPU %"
    is the leader's)."""
    topic, leaders = create_rf3_topic(cluster, 1)
    leader = psutil.Process(cluster.procs[leaders[0][0]].pid)
    handle = BrokerHandle("cluster", cluster.bootstrap_servers, leader)
    runner = run_latency if workload == "latency" else run_e2e
    try:
        return runner(handle, topic, Case(workload, LATENCY_SIZE, "all"), cfg.settings())
    finally:
        drop_topic(cluster.bootstrap_servers, topic)


def single_latency(single: BrokerHandle, workload: str, cfg: Config) -> Result:
    admin = AdminClient({"bootstrap.servers": single.bootstrap, "log_level": 3})
    topic = create_topic(admin, 1)
    runner = run_latency if workload == "latency" else run_e2e
    try:
        return runner(single, topic, Case(workload, LATENCY_SIZE, "all"), cfg.settings())
    finally:
        delete_topic(admin, topic)


# --- failover ------------------------------------------------------------------------------


class PacedProducer:
    """An acks=all producer on a thread, sending at ``rate`` records/s and recording
    (send time, delivery time, error) of every record on the perf_counter clock."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 0,
                "message.timeout.ms": 60_000,
                "log_level": 0,
                "log.connection.close": False,
            }
        )
        self.topic, self.interval = topic, 1 / rate
        self.delivered: list[tuple[float, float]] = []
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="paced-producer", daemon=True)

    def _report(self, sent: float) -> Callable[[KafkaError | None, Any], None]:
        def done(err: KafkaError | None, _msg: Any) -> None:
            if err is None:
                self.delivered.append((sent, time.perf_counter()))
            else:
                self.failed.append(str(err))

        return done

    def _run(self) -> None:
        next_at = time.perf_counter()
        while not self._stop.is_set():
            now = time.perf_counter()
            try:
                self.producer.produce(
                    self.topic, b"f" * LATENCY_SIZE, on_delivery=self._report(now)
                )
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0)
            next_at += self.interval
            delay = next_at - time.perf_counter()
            if delay > 0:
                self._stop.wait(delay)

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def first_after(self, moment: float) -> float | None:
        """Delivery time of the first successful record sent after ``moment``."""
        times = [done for sent, done in list(self.delivered) if sent > moment]
        return min(times) if times else None

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(10)
        return int(self.producer.flush(30))


def failover_once(cluster: EmbeddedCluster, cfg: Config) -> Result:
    """kill -9 the leader of a 1-partition topic under a paced producer."""
    topic, leaders = create_rf3_topic(cluster, 1)
    victim = leaders[0][0]
    controller = cluster.controller_id
    survivors = [b for b in cluster.broker_ids if b != victim]
    producer = PacedProducer(cluster.bootstrap_servers, topic, 200).start()
    try:
        wait_until(lambda: len(producer.delivered) >= 100, 30, "100 deliveries before the kill")
        killed = time.perf_counter()
        os.kill(cluster.procs[victim].pid, signal.SIGKILL)
        elected: float | None = None
        deadline = killed + WAIT_S
        while time.perf_counter() < deadline:
            if elected is None:
                with contextlib.suppress(OSError, ConnectionError, ValueError):
                    view = leaders_seen_by(cluster, survivors[0], topic)
                    if view and view[0][0] not in (victim, -1):
                        elected = time.perf_counter()
            first = producer.first_after(killed)
            if first is not None and elected is not None:
                break
            time.sleep(0.01)
        else:
            raise TimeoutError(f"no delivery within {WAIT_S:.0f} s of killing broker {victim}")
        undelivered = producer.stop()
    finally:
        producer.stop()
    cluster.procs[victim].wait(10)
    cluster.restart_broker(victim)
    cluster.wait_ready(timeout_s=WAIT_S)
    drop_topic(cluster.bootstrap_servers, topic)
    return {
        "first delivery s": first - killed,
        "new leader in metadata s": elected - killed,
        "failed deliveries": float(len(producer.failed) + undelivered),
        "victim was controller": float(victim == controller),
    }


# --- controlled shutdown ---------------------------------------------------------------------


def shutdown_once(cluster: EmbeddedCluster, cfg: Config) -> Result:
    """SIGTERM the broker leading most partitions of a fresh topic."""
    topic, leaders = create_rf3_topic(cluster, SHUTDOWN_PARTITIONS)
    counts = Counter(leader for leader, _ in leaders.values())
    victim = counts.most_common(1)[0][0]
    led = [p for p, (leader, _) in leaders.items() if leader == victim]
    controller = cluster.controller_id
    survivor = next(b for b in cluster.broker_ids if b != victim)
    proc = cluster.procs[victim]
    started = time.perf_counter()
    os.kill(proc.pid, signal.SIGTERM)
    exited: float | None = None
    moved: float | None = None
    deadline = started + WAIT_S
    while (exited is None or moved is None) and time.perf_counter() < deadline:
        if exited is None and proc.poll() is not None:
            exited = time.perf_counter()
        if moved is None:
            with contextlib.suppress(OSError, ConnectionError, ValueError):
                view = leaders_seen_by(cluster, survivor, topic)
                if all(p in view and view[p][0] not in (victim, -1) for p in led):
                    moved = time.perf_counter()
        time.sleep(0.005)
    if exited is None or moved is None:
        raise TimeoutError(f"broker {victim}: exited={exited} moved={moved} after SIGTERM")
    cluster.start(victim)
    cluster.wait_ready(timeout_s=WAIT_S)
    drop_topic(cluster.bootstrap_servers, topic)
    return {
        "process exit s": exited - started,
        "leaders moved s": moved - started,
        "partitions led": float(len(led)),
        "victim was controller": float(victim == controller),
    }


# --- orchestration ---------------------------------------------------------------------


def start_cluster(session_ms: int) -> EmbeddedCluster:
    started = time.perf_counter()
    cluster = EmbeddedCluster(
        brokers=3,
        broker_ids=BROKER_IDS,
        zookeeper=True,
        overrides={"zookeeper.session.timeout.ms": session_ms},
    ).start_all()
    log(
        f"cluster up in {time.perf_counter() - started:.1f} s: {cluster.bootstrap_servers}, "
        f"pids {[cluster.procs[b].pid for b in BROKER_IDS]}, "
        f"zookeeper.session.timeout.ms={session_ms}, data {cluster.data_dir}"
    )
    return cluster


def run_failovers(cluster: EmbeddedCluster, series: Series, cfg: Config) -> None:
    for i in range(cfg.failover_runs):
        attempt(series, f"run {i + 1}", lambda: failover_once(cluster, cfg))
        if not all(cluster.is_running(b) for b in BROKER_IDS):
            with contextlib.suppress(Exception):
                for b in BROKER_IDS:
                    cluster.start(b)
                cluster.wait_ready(timeout_s=WAIT_S)


def run_all(cfg: Config) -> dict[str, Series]:
    s: dict[str, Series] = {
        key: Series(title)
        for key, title in [
            ("single p1", "single broker acks=1 RF=1, 1 partition"),
            ("cluster p1", "3 brokers acks=all RF=3, 1 partition"),
            ("single p6", "single broker acks=1 RF=1, 6 partitions"),
            ("cluster p6", "3 brokers acks=all RF=3, 6 partitions"),
            ("single latency", f"single broker acks=all latency @ {cfg.rate}/s"),
            ("single e2e", f"single broker end-to-end latency @ {cfg.rate}/s"),
            ("latency", f"3 brokers acks=all RF=3 latency @ {cfg.rate}/s"),
            ("e2e", f"3 brokers end-to-end latency @ {cfg.rate}/s"),
            ("shutdown", "controlled shutdown (SIGTERM)"),
            ("failover", f"failover, session {cfg.session_ms} ms"),
            ("failover short", f"failover, session {cfg.short_session_ms} ms"),
        ]
    }
    with contextlib.ExitStack() as stack:
        bootstrap, proc = stack.enter_context(standalone_sluice())
        single = BrokerHandle("single", bootstrap, proc)
        log(f"single broker up: {bootstrap}, pid {proc.pid}")
        cluster = start_cluster(cfg.session_ms)
        stack.callback(cluster.stop)
        # Unrecorded warm-up on each, so that no first run is cold.
        short = Config(**{**cfg.__dict__, "records": cfg.records // 10, "seconds": 1.0})
        with contextlib.suppress(Exception):
            single_throughput(single, 1, short)
        with contextlib.suppress(Exception):
            cluster_throughput(cluster, 1, short)
        for i in range(cfg.repeat):
            for partitions in (1, 6):
                attempt(
                    s[f"single p{partitions}"],
                    f"run {i + 1}",
                    lambda p=partitions: single_throughput(single, p, cfg),
                )
                attempt(
                    s[f"cluster p{partitions}"],
                    f"run {i + 1}",
                    lambda p=partitions: cluster_throughput(cluster, p, cfg),
                )
        for i in range(cfg.repeat):
            attempt(
                s["single latency"], f"run {i + 1}", lambda: single_latency(single, "latency", cfg)
            )
            attempt(s["single e2e"], f"run {i + 1}", lambda: single_latency(single, "e2e", cfg))
            attempt(s["latency"], f"run {i + 1}", lambda: cluster_latency(cluster, "latency", cfg))
            attempt(s["e2e"], f"run {i + 1}", lambda: cluster_latency(cluster, "e2e", cfg))
        for i in range(cfg.repeat):
            attempt(s["shutdown"], f"run {i + 1}", lambda: shutdown_once(cluster, cfg))
            if not all(cluster.is_running(b) for b in BROKER_IDS):
                with contextlib.suppress(Exception):
                    for b in BROKER_IDS:
                        cluster.start(b)
        run_failovers(cluster, s["failover"], cfg)
        report_logs(cluster)
    if cfg.short_session_ms:
        cluster = start_cluster(cfg.short_session_ms)
        try:
            run_failovers(cluster, s["failover short"], cfg)
            report_logs(cluster)
        finally:
            cluster.stop()
    return s


def report_logs(cluster: EmbeddedCluster) -> None:
    """Warnings and errors the brokers logged, a few lines each, for the report."""
    for b in BROKER_IDS:
        try:
            lines = cluster.log_path(b).read_text(errors="replace").splitlines()
        except OSError:
            continue
        bad = [line for line in lines if "ERROR" in line or "Traceback" in line]
        if bad:
            log(f"broker {b}: {len(bad)} ERROR/Traceback log lines, the last ones:")
            for line in bad[-5:]:
                print(f"    {line[:220]}")


# --- report ------------------------------------------------------------------------------


def print_table(s: dict[str, Series], cfg: Config) -> None:
    print("\n== medians (per-run values in brackets)")
    for series in s.values():
        if not series.runs and not series.errors:
            continue
        print(f"-- {series.title}  ({len(series.runs)} runs, {len(series.errors)} errors)")
        for metric in series.runs[0] if series.runs else []:
            values = " ".join(fmt(r[metric]) for r in series.runs)
            print(f"   {metric:26} {fmt(series.median(metric)):>10}   [{values}]")
        for error in series.errors:
            print(f"   ERROR {error}")
    print("\n== goals")
    for p in (1, 6):
        top = s[f"cluster p{p}"].median("MB/s")
        bottom = s[f"single p{p}"].median("MB/s")
        ratio = top / bottom if top is not None and bottom else None
        verdict = "-" if ratio is None else ("met" if ratio >= 0.5 else "NOT met")
        print(
            f"   acks=all RF=3 / single acks=1 throughput, {p} partition(s): "
            f"{fmt(None if ratio is None else 100 * ratio)} % (goal >= 50 %): {verdict}"
        )
    p99 = s["latency"].median("p99 ms")
    verdict = "-" if p99 is None else ("met" if p99 <= 2.0 else "NOT met")
    print(
        f"   p99 produce latency acks=all RF=3 @ {cfg.rate} records/s: "
        f"{fmt(p99)} ms (goal <= 2 ms): {verdict}"
    )


# --- command line ----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
    )
    add = parser.add_argument
    add("--quick", action="store_true", help="a short run: 1 repeat, small bounds")
    add("--repeat", type=int, help="runs per measurement; medians (default 3)")
    add("--records", type=int, help="records per throughput run (default 200000 of 1 KiB)")
    add("--seconds", type=float, help="time limit of a throughput run (default 20)")
    add("--latency-seconds", type=float, help="length of a latency run (default 10)")
    add("--rate", type=int, default=1000, help="records/s of the latency runs (default 1000)")
    add("--failover-runs", type=int, help="kill -9 runs per session timeout (default 3)")
    add("--session-ms", type=int, default=6000, help="zookeeper.session.timeout.ms (6000)")
    add(
        "--short-session-ms",
        type=int,
        default=2000,
        help="the extra failover runs' session timeout; 0 skips them (default 2000; the "
        "embedded ZooKeeper's minSessionTimeout is 2 * tickTime = 1000)",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> Config:
    args = build_parser().parse_args(argv)
    quick = args.quick
    return Config(
        records=args.records or (50_000 if quick else 200_000),
        seconds=args.seconds or (5.0 if quick else 20.0),
        repeat=args.repeat or (1 if quick else 3),
        latency_seconds=args.latency_seconds or (2.0 if quick else 10.0),
        rate=args.rate,
        failover_runs=args.failover_runs or (1 if quick else 3),
        session_ms=args.session_ms,
        short_session_ms=args.short_session_ms,
    )


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    started = time.perf_counter()
    print(
        f"# {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}  "
        f"{psutil.cpu_count()} CPUs  load {load()}  librdkafka {librdkafka_version()[0]}"
    )
    print(f"# {cfg}", flush=True)
    series = run_all(cfg)
    print_table(series, cfg)
    print(f"\n# wall {time.perf_counter() - started:.0f} s, load at the end {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
