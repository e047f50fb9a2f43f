"""``sluice bench compare``: issue 9's whole matrix, Sluice beside Tansu, in one run.

Each row starts its brokers fresh (Sluice, Tansu on ``memory://``, and where it is
the ceiling Tansu on ``null://``), runs every broker --repeat times in rotating order,
waits for an idle machine before each run (bounded; the load seen is recorded), and
reports medians, Sluice/Tansu ratios (medians of per-run ratios) and whether each goal
of issue 9 is met. It reuses the workloads of bench/produce_consume.py, bench/cluster.py
and bench/groups.py; broker CPU and RSS come from /proc through psutil (bench/brokers.py).

Load generators (the "generator" column says which one each row used):

* ``N x confluent-kafka procs``: bench/producers.py, N producer processes (librdkafka),
  for the produce rows, where one Python process would cap the figure;
* ``raw Fetch v11 reader`` (bench/raw_reader.py, the 100 B consume row's default): Fetch
  requests with librdkafka's default limits, records counted from the batch headers, so
  its cost is per fetch and the broker sets the pace; at 100 B a record both real
  clients below are the limit (about 320 MB/s against either broker). ``kcat`` (librdkafka's
  C client on the confluent-kafka wheel's librdkafka) and ``confluent-kafka`` can be
  chosen instead with --consume-100-reader;
* ``confluent-kafka``: one librdkafka client in this process (1 KiB consume, latency,
  e2e, cluster, groups), which is enough for those rows and is reported as such.

Figures only: nothing here asserts a time. Only 127.0.0.1 is used.

    python bench/compare.py [--quick] [--repeat N] [--only a,b] [--json F] [--chart F.png]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

sys.path.insert(0, str(Path(__file__).resolve().parent))
import brokers
import compare_report
import groups
from produce_consume import (
    GB,
    MB,
    BrokerHandle,
    Case,
    Result,
    Settings,
    create_topic,
    delete_topic,
    environment,
    run_one,
)
from producers import multi_produce

Launcher = Callable[[], AbstractContextManager[brokers.Broker]]
GROUP_SLUICE = {"group.initial.rebalance.delay.ms": "0"}


@dataclass(frozen=True)
class Options:
    """Bounds of one invocation, from the command line."""

    quick: bool
    repeat: int
    seconds: float
    records: int
    latency_seconds: float
    rate: int
    producers: int
    store_gb: float
    idle_cpu: float
    idle_wait: float
    small_reader: str = "python"

    def settings(self) -> Settings:
        """The same bounds in the form bench/produce_consume.py's runners take."""
        return Settings(self.records, self.seconds, self.repeat, self.latency_seconds,
                        self.rate, 0)  # fmt: skip


@dataclass
class Measured:
    """Every run of one row: per-broker figures, errors, and the idleness before each run."""

    key: str
    title: str
    generator: str
    runs: dict[str, list[Result]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    idle: list[str] = field(default_factory=list)


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def wait_idle(opts: Options) -> str:
    """Wait (at most --idle-wait s) for an idle machine (brokers.wait_idle); say what was seen."""
    return brokers.wait_idle(opts.idle_cpu, opts.idle_wait)


def side_by_side(
    row: Measured,
    launchers: dict[str, Launcher],
    opts: Options,
    run: Callable[[BrokerHandle], Result],
    repeat: int | None = None,
) -> Measured:
    """Start every broker fresh, then run ``run`` on each, ``repeat`` times, rotating the order."""
    with contextlib.ExitStack() as stack:
        handles: list[BrokerHandle] = []
        for name, launcher in launchers.items():
            try:
                bootstrap, proc = stack.enter_context(launcher())
            except brokers.BrokerStartError as exc:
                row.errors.append(f"{name} did not start: {str(exc)[-200:]}")
                continue
            handles.append(BrokerHandle(name, bootstrap, proc))
            row.runs[name] = []
        for index in range(repeat or opts.repeat):
            shift = index % max(1, len(handles))
            for handle in handles[shift:] + handles[:shift]:
                idle = wait_idle(opts)
                row.idle.append(f"{handle.name}: {idle}")
                try:
                    result = run(handle)
                except Exception as exc:  # reported in the table, the other runs go on
                    row.errors.append(f"{handle.name} run {index + 1}: {type(exc).__name__}: {exc}")
                    log(f"{row.key} {handle.name} run {index + 1} ({idle}): ERROR {exc}")
                    continue
                row.runs[handle.name].append(result)
                shown = "  ".join(f"{k} {compare_report.fmt(v)}" for k, v in result.items())
                log(f"{row.key} {handle.name} run {index + 1} ({idle}): {shown}")
    return row


# --- the rows ----------------------------------------------------------------------------


def produce_row(opts: Options, partitions: int) -> Measured:
    """1 KiB acks=1 produce with N producer processes: Sluice, Tansu, and the null ceiling."""
    row = Measured(f"produce-p{partitions}", f"produce 1 KiB acks=1, {partitions} partition(s)",
                   f"{opts.producers} x confluent-kafka procs")  # fmt: skip

    def run(handle: BrokerHandle) -> Result:
        admin = brokers_admin(handle.bootstrap)
        topic = create_topic(admin, partitions)
        try:
            with brokers.Meter(handle.proc) as meter:
                produced, _ = multi_produce(
                    handle.bootstrap, topic, 1024, "1", opts.producers, opts.seconds,
                    opts.records, handle.proc.pid,
                )  # fmt: skip
            if produced.errors:
                raise RuntimeError("; ".join(produced.errors))
            nbytes = produced.records * 1024
            return {
                "MB/s": nbytes / MB / produced.elapsed,
                "broker CPU-s/GB": meter.cpu_s / (max(nbytes, 1) / GB),
                "broker peak RSS MB": meter.peak_rss / MB,
            }
        finally:
            delete_topic(admin, topic)

    launchers = {"sluice": brokers.sluice, "tansu": brokers.tansu, "null": brokers.null_sink}
    return side_by_side(row, launchers, opts, run)


def brokers_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3,
                        "log.connection.close": False})  # fmt: skip


READER_NAMES = {"python": "confluent-kafka", "kcat": "kcat", "raw": "raw Fetch v11 reader"}


def workload_row(
    opts: Options, key: str, title: str, case: Case, generator: str = "confluent-kafka"
) -> Measured:
    """One of bench/produce_consume.py's workloads, on Sluice and Tansu."""
    row = Measured(key, title, generator)
    settings = opts.settings()
    launchers = {"sluice": brokers.sluice, "tansu": brokers.tansu}
    return side_by_side(row, launchers, opts, lambda h: run_one(h, case, settings))


def cluster_row(opts: Options) -> Measured:
    """RF=3 acks=all on three brokers: throughput against one broker at acks=1, and p99."""
    import cluster as rf3

    row = Measured("cluster", "3 brokers RF=3 acks=all vs 1 broker acks=1 (1 KiB, 1 partition)",
                   "confluent-kafka")  # fmt: skip
    cfg = rf3.Config(opts.records, opts.seconds, opts.repeat, opts.latency_seconds, opts.rate,
                     0, 6000, 0)  # fmt: skip
    row.runs = {"cluster": [], "single": []}
    with contextlib.ExitStack() as stack:
        bootstrap, proc = stack.enter_context(brokers.sluice())
        single = BrokerHandle("single", bootstrap, proc)
        nodes = rf3.start_cluster(6000)
        stack.callback(nodes.stop)
        for index in range(opts.repeat):
            try:
                row.idle.append(f"single: {wait_idle(opts)}")
                single_run = rf3.single_throughput(single, 1, cfg)
                row.idle.append(f"cluster: {wait_idle(opts)}")
                cluster_run = rf3.cluster_throughput(nodes, 1, cfg)
                row.idle.append(f"cluster latency: {wait_idle(opts)}")
                latency = rf3.cluster_latency(nodes, "latency", cfg)
                cluster_run.update({k: latency[k] for k in ("p50 ms", "p99 ms", "max ms")})
                # One record in flight: below the paced rate when p50 exceeds its interval.
                cluster_run["latency records/s"] = latency["records/s"]
                cluster_run["leader CPU %"] = latency["broker CPU %"]
            except Exception as exc:
                row.errors.append(f"run {index + 1}: {type(exc).__name__}: {exc}")
                continue
            row.runs["single"].append(single_run)
            row.runs["cluster"].append(cluster_run)
            log(f"cluster run {index + 1}: single {single_run['MB/s']:.1f} MB/s, cluster "
                f"{cluster_run['MB/s']:.1f} MB/s, p99 {cluster_run['p99 ms']:.2f} ms at "
                f"{cluster_run['latency records/s']:,.0f} records/s")  # fmt: skip
    return row


def startup_row(opts: Options) -> Measured:
    """Launch to accepting TCP connections and to the first ApiVersions answer, then the
    RSS after one idle second."""
    row = Measured("startup", "startup to accepting connections (and to the first answer); "
                   "idle RSS", "TCP connect poll")  # fmt: skip
    row.runs = {"sluice": [], "tansu": []}
    for index in range(opts.repeat):
        for name, launcher in (("sluice", brokers.sluice), ("tansu", brokers.tansu)):
            row.idle.append(f"{name}: {wait_idle(opts)}")
            started = time.perf_counter()
            try:
                with launcher() as (bootstrap, proc):
                    ready = time.perf_counter() - started
                    brokers.first_answer(bootstrap)
                    answered = time.perf_counter() - started
                    time.sleep(1.0)
                    rss = brokers.rss_bytes(proc)
            except brokers.BrokerStartError as exc:
                row.errors.append(f"{name} run {index + 1}: {exc}")
                continue
            row.runs[name].append({"ready ms": ready * 1000, "first answer ms": answered * 1000,
                                   "idle RSS MB": rss / MB})  # fmt: skip
    return row


def stored_row(opts: Options) -> Measured:
    """Sluice's RSS after --store-gb of 1 KiB records went into one fresh broker (once)."""
    row = Measured("stored", f"RSS after storing {opts.store_gb:g} GB (Sluice only, 1 run)",
                   f"{opts.producers} x confluent-kafka procs")  # fmt: skip
    records = int(opts.store_gb * GB / 1024)

    def run(handle: BrokerHandle) -> Result:
        topic = create_topic(brokers_admin(handle.bootstrap), 8)
        with brokers.Meter(handle.proc) as meter:
            produced, _ = multi_produce(handle.bootstrap, topic, 1024, "1", opts.producers,
                                        3600.0, records, handle.proc.pid)  # fmt: skip
        if produced.errors:
            raise RuntimeError("; ".join(produced.errors))
        time.sleep(1.0)
        return {
            "stored GB": produced.records * 1024 / GB,
            "RSS MB": brokers.rss_bytes(handle.proc) / MB,
            "peak RSS MB": meter.peak_rss / MB,
        }

    return side_by_side(row, {"sluice": brokers.sluice}, opts, run, repeat=1)


def group_row(opts: Options) -> Measured:
    """A fresh consumer subscribes to a 1-partition topic: seconds to its first assignment."""
    row = Measured("group", "group join, fresh consumer, to first assignment",
                   "confluent-kafka")  # fmt: skip

    def run(handle: BrokerHandle) -> Result:
        topic, group = f"j-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
        groups.create_topic(handle.bootstrap, topic, 1)
        started = time.perf_counter()
        member = groups.Member(handle.bootstrap, group, topic)
        try:
            groups.wait_stable([member], 1, [0])
            return {"join ms": (time.perf_counter() - started) * 1000}
        finally:
            member.close()

    launchers = {"sluice": lambda: brokers.sluice(overrides=GROUP_SLUICE), "tansu": brokers.tansu}
    return side_by_side(row, launchers, opts, run)


ROWS: dict[str, Callable[[Options], Measured]] = {
    "produce-p1": lambda o: produce_row(o, 1),
    "produce-p8": lambda o: produce_row(o, 8),
    "consume-1k": lambda o: workload_row(o, "consume-1k", "consume 1 KiB from offset 0",
                                         Case("consume", 1024)),
    "consume-100": lambda o: workload_row(o, "consume-100", "consume 100 B from offset 0",
                                          Case("consume", 100, client=o.small_reader),
                                          generator=READER_NAMES[o.small_reader]),
    "latency": lambda o: workload_row(o, "latency", f"produce latency, acks=all, one in flight"
                                      f" @ {o.rate}/s", Case("latency", 100, "all")),
    "e2e": lambda o: workload_row(o, "e2e", f"end-to-end latency @ {o.rate}/s, default "
                                  "consumer", Case("e2e", 100, "all")),
    "cluster": cluster_row,
    "startup": startup_row,
    "stored": stored_row,
    "group": group_row,
}  # fmt: skip


# --- command line ------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sluice bench compare", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    add = parser.add_argument
    add("--against", default="tansu", choices=["tansu"], help="the other broker (only Tansu)")
    add("--quick", action="store_true", help="1 repeat, short runs, 0.2 GB stored: a smoke run")
    add("--repeat", type=int, help="runs per broker per row; medians (default 3, --quick 1)")
    add("--only", help=f"comma-separated rows, from {','.join(ROWS)} (default: all)")
    add("--seconds", type=float, help="time limit of a produce run (default 5, --quick 1)")
    add("--records", type=int, help="most records per produce run (default 5,000,000)")
    add("--latency-seconds", type=float, help="length of a latency run (default 5, --quick 1)")
    add("--rate", type=int, default=1000, help="records/s of the latency rows (default 1000)")
    add("--producers", type=int, default=2, help="producer processes in the produce rows")
    add("--store-gb", type=float, help="GB stored before the RSS reading (default 3, --quick 0.2)")
    add("--idle-cpu", type=float, default=25.0, help="busy %% under which the machine is idle")
    add("--idle-wait", type=float, help="most seconds to wait for idle (default 20, --quick 3)")
    add("--consume-100-reader", choices=sorted(READER_NAMES), default="raw",
        help="the 100 B consume row's reader: raw (default; bench/raw_reader.py sends Fetch "
        "requests and counts records from the batch headers, so it costs per fetch, not "
        "per record), kcat (librdkafka's C client, run on the confluent-kafka wheel's "
        "librdkafka) or python (one confluent-kafka consumer); the last two are the limit "
        "at 100 B, about 320 MB/s against either broker")  # fmt: skip
    add("--json", metavar="FILE", help="also write every figure as JSON")
    add("--chart", metavar="FILE.png", help="also draw the goals as a PNG bar chart")
    return parser


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, Options, list[str]]:
    args = build_parser().parse_args(argv)
    quick = args.quick
    opts = Options(
        quick=quick,
        repeat=args.repeat or (1 if quick else 3),
        seconds=args.seconds or (1.0 if quick else 5.0),
        records=args.records or 5_000_000,
        latency_seconds=args.latency_seconds or (1.0 if quick else 5.0),
        rate=args.rate,
        producers=max(1, args.producers),
        store_gb=args.store_gb or (0.2 if quick else 3.0),
        idle_cpu=args.idle_cpu,
        idle_wait=args.idle_wait if args.idle_wait is not None else (3.0 if quick else 20.0),
        small_reader=args.consume_100_reader,
    )
    only = [r.strip() for r in (args.only or ",".join(ROWS)).split(",") if r.strip()]
    unknown = [r for r in only if r not in ROWS]
    if unknown or not only:
        sys.exit(f"unknown rows: {','.join(unknown) or '(none)'}; choose from {','.join(ROWS)}")
    return args, opts, only


def main(argv: list[str] | None = None) -> int:
    args, opts, only = parse_args(argv)
    env = environment(opts.settings(), ["sluice", args.against, "null"])
    env["options"] = opts.__dict__
    log(compare_report.machine_line(env))
    log(f"load before the run: {env['loadavg']}; rows: {','.join(only)}")
    brokers.compile_sluice()
    started = time.perf_counter()
    rows: list[Measured] = []
    for key in only:
        log(f"--- {key}")
        try:
            rows.append(ROWS[key](opts))
        except Exception as exc:  # one broken row must not lose the others
            rows.append(Measured(key, key, "-", errors=[f"{type(exc).__name__}: {exc}"]))
            log(f"{key}: ERROR {exc}")
    env["wall_seconds"] = round(time.perf_counter() - started, 1)
    env["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    lines = compare_report.goal_lines(rows)
    compare_report.print_report(env, rows, lines)
    if args.json:
        payload = {"environment": env, "rows": [r.__dict__ for r in rows],
                   "goals": [line.__dict__ for line in lines]}  # fmt: skip
        Path(args.json).write_text(json.dumps(payload, indent=1, default=str))
    if args.chart:
        compare_report.chart(lines, args.chart, env)
        log(f"chart written to {args.chart}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
