"""flush.messages=1: the broker's group commit against fsyncs inline on its event loop.

Each run starts a fresh ``sluice broker`` with ``log.flush.interval.messages=1`` (every
append is flushed before it is acknowledged) and ``log.flush.group.commit`` on
("group": the fsyncs run in rounds on a flush thread, sluice.log.group_flush) or off
("inline": the append fsyncs on the event loop, as Kafka's does on its handler thread),
the two alternating, and measures on it:

* bulk produce: --producers confluent-kafka processes (bench/producers.py: acks=1,
  1 KiB records, linger.ms=5, batch.size=1 MiB) to a topic of --partitions partitions
  for --seconds: MB/s, records/s and the broker's CPU seconds per GB (from /proc);
* produce latency: one record of 100 B in flight, acks=all, paced at --rate for
  --latency-seconds (bench/produce_consume.py's latency row): p50 and p99;
* concurrent producers: --clients connections, each with one Produce request of one
  100 B record (acks=1) in flight, back to back, to a topic of --partitions partitions
  for --latency-seconds (raw requests from one thread, bench/raw_writer.py's, so that
  the clients cost little): records/s of them all, the p50 and p99 of the requests'
  latencies and the broker's CPU per 1,000 records. This is where batching fsyncs
  shows: inline, every request's fsync waits its turn on the loop; in rounds, one
  fsync per partition serves every request that arrived while the round before it ran.

It prints every run, the medians of each mode and group/inline ratios. Figures only:
nothing here asserts a time. Only 127.0.0.1 is used.

    sluice bench flush [--repeat 3] [--seconds 5] [--producers 2] [--partitions 8]
"""

from __future__ import annotations

import argparse
import selectors
import statistics
import sys
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokers import Meter, compile_sluice, log, sluice, wait_idle
from produce_consume import (
    GB,
    MB,
    BrokerHandle,
    Case,
    Result,
    Settings,
    create_topic,
    fmt,
    print_medians,
    run_latency,
)
from producers import multi_produce
from raw_reader import recv_frame
from raw_writer import BatchTemplates, connect, failed_partitions, produce_request, send_buffers

MODES = {"group": "true", "inline": "false"}
RECORD_SIZE = 1024
LATENCY_SIZE = 100


def bulk(handle: BrokerHandle, args: argparse.Namespace) -> Result:
    admin = AdminClient({"bootstrap.servers": handle.bootstrap, "log_level": 3})
    topic = create_topic(admin, args.partitions)
    with Meter(handle.proc) as meter:
        produced, _ = multi_produce(
            handle.bootstrap, topic, RECORD_SIZE, "1", args.producers, args.seconds,
            args.records, handle.proc.pid,
        )  # fmt: skip
    if produced.errors:
        raise RuntimeError(f"producers failed: {produced.errors[:3]}")
    size = produced.records * RECORD_SIZE
    return {
        "MB/s": size / produced.elapsed / MB,
        "broker CPU-s/GB": meter.cpu_s / (size / GB) if size else float("nan"),
    }


def latency(handle: BrokerHandle, args: argparse.Namespace) -> Result:
    admin = AdminClient({"bootstrap.servers": handle.bootstrap, "log_level": 3})
    topic = create_topic(admin, 1)
    cfg = Settings(0, 0.0, 1, args.latency_seconds, args.rate, 0)
    figures = run_latency(handle, topic, Case("latency", LATENCY_SIZE, "all"), cfg)
    return {"p50 ms": figures["p50 ms"], "p99 ms": figures["p99 ms"]}


def concurrent(handle: BrokerHandle, args: argparse.Namespace) -> Result:
    """--clients connections, each with one Produce request of one 100 B record (acks=1)
    in flight, back to back, connection i to partition i mod --partitions, from one
    thread (raw requests, bench/raw_writer.py, so that the clients cost little)."""
    admin = AdminClient({"bootstrap.servers": handle.bootstrap, "log_level": 3})
    topic = create_topic(admin, args.partitions)
    templates = BatchTemplates(b"x" * LATENCY_SIZE)
    socks = [connect(handle.bootstrap) for _ in range(args.clients)]
    selector = selectors.DefaultSelector()
    sent_at: dict[int, int] = {}
    buf = bytearray(64 * 1024)
    samples: list[float] = []
    errors = 0

    def send(index: int) -> None:
        batch = templates.stamped(1, int(time.time() * 1000))
        partition = index % args.partitions
        request = produce_request(1, {topic: [(partition, batch)]}, index, "sluice-bench-flush")
        sent_at[index] = time.perf_counter_ns()
        send_buffers(socks[index], request)

    try:
        for index, sock in enumerate(socks):
            selector.register(sock, selectors.EVENT_READ, index)
        with Meter(handle.proc) as meter:
            started = time.perf_counter()
            deadline = started + args.latency_seconds
            for index in range(len(socks)):
                send(index)
            while sent_at:
                for key, _ in selector.select(timeout=5.0):
                    index = key.data
                    buf, frame = recv_frame(socks[index], buf)
                    samples.append((time.perf_counter_ns() - sent_at.pop(index)) / 1e6)
                    errors += failed_partitions(frame)
                    if time.perf_counter() < deadline:
                        send(index)
            elapsed = time.perf_counter() - started
    finally:
        selector.close()
        for sock in socks:
            sock.close()
    if errors:
        raise RuntimeError(f"{errors} partitions answered with an error")
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {
        "concurrent records/s": len(samples) / elapsed,
        "concurrent p50 ms": cuts[49],
        "concurrent p99 ms": cuts[98],
        "concurrent CPU ms/1k": 1000 * meter.cpu_s / len(samples) * 1000,
    }


def one_run(mode: str, args: argparse.Namespace) -> Result:
    overrides = {"log.flush.interval.messages": "1", "log.flush.group.commit": MODES[mode]}
    with sluice(overrides=overrides) as (bootstrap, proc):
        handle = BrokerHandle(f"sluice-{mode}", bootstrap, proc)
        return {**bulk(handle, args), **latency(handle, args), **concurrent(handle, args)}


METRICS = [
    "MB/s", "broker CPU-s/GB", "p50 ms", "p99 ms", "concurrent records/s",
    "concurrent p50 ms", "concurrent p99 ms", "concurrent CPU ms/1k",
]  # fmt: skip


def print_table(runs: dict[str, list[Result]]) -> None:
    print_medians(" (flush.messages=1)", runs, METRICS, "group", "inline")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sluice bench flush",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per mode (default 3)")
    parser.add_argument("--seconds", type=float, default=5.0, help="bulk run length (5)")
    parser.add_argument("--records", type=int, default=5_000_000, help="most bulk records")
    parser.add_argument("--producers", type=int, default=2, help="producer processes (2)")
    parser.add_argument("--partitions", type=int, default=8, help="bulk topic partitions (8)")
    parser.add_argument("--latency-seconds", type=float, default=5.0, help="latency run (5)")
    parser.add_argument("--rate", type=int, default=1000, help="latency records/s (1000)")
    parser.add_argument("--clients", type=int, default=32, help="concurrent producers (32)")
    parser.add_argument("--idle-cpu", type=float, default=15.0, help="idle below this busy %%")
    parser.add_argument("--idle-wait", type=float, default=20.0, help="most s to wait for idle")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    compile_sluice()
    runs: dict[str, list[Result]] = {mode: [] for mode in MODES}
    for index in range(args.repeat):
        order = list(MODES) if index % 2 == 0 else list(reversed(MODES))
        for mode in order:
            seen = wait_idle(args.idle_cpu, args.idle_wait)
            result = one_run(mode, args)
            runs[mode].append(result)
            figures = "  ".join(f"{m} {fmt(result[m])}" for m in METRICS)
            log(f"{mode} run {index + 1} ({seen}): {figures}")
    print_table(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
