"""Produce and consume with the metrics endpoint on against off, and the cost of a scrape.

Each run starts a fresh ``sluice broker``, either without metrics ("off") or with
``metrics.port`` set and /metrics scraped every --scrape-interval seconds from a thread
of this process all along ("on"; Prometheus' usual interval is 15 s, so this is harsher),
the two alternating, and measures on it, with confluent-kafka (bench/produce_consume.py's
load generator):

* produce: --records records of --size bytes (acks=1, linger.ms=5, batch.size=1 MiB)
  for at most --seconds: MB/s and the broker's CPU seconds per GB;
* consume: the same records read back from offset 0 (assign(), no group): MB/s and the
  broker's CPU seconds per GB;

with the broker's peak RSS. It prints every run, the medians of each mode and on/off
ratios (the goal: MB/s within 3%).

With --partitions N (20000 for the figure in docs/performance.md) it then starts one
broker with metrics on, creates N partitions, and times scrapes of /metrics (wall time
and bytes) while a raw connection sends ApiVersions requests one after another: the
longest round trip during scrapes against the longest without shows how long a scrape
holds the event loop at most. Figures only: nothing here asserts a time. Only
127.0.0.1 is used.

    sluice bench metrics [--repeat 3] [--seconds 5] [--size 1024] [--partitions 20000]
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import statistics
import struct
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokers import HOST, compile_sluice, log, sluice, wait_idle
from produce_consume import (
    BrokerHandle,
    Case,
    Result,
    Settings,
    create_topic,
    fmt,
    print_medians,
    run_consume,
    run_produce,
)
from sluice.ports import free_port

MODES = ("off", "on")
METRICS = [
    "produce MB/s",
    "produce broker CPU-s/GB",
    "consume MB/s",
    "consume broker CPU-s/GB",
    "broker peak RSS MiB",
]


class Scraper(threading.Thread):
    """GET ``url`` every ``interval`` s until stopped; counts scrapes and their bytes."""

    def __init__(self, url: str, interval: float) -> None:
        super().__init__(name="scraper", daemon=True)
        self.url = url
        self.interval = interval
        self.stopped = threading.Event()
        self.scrapes = 0
        self.bytes = 0

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            with urllib.request.urlopen(self.url, timeout=30) as answer:
                self.bytes += len(answer.read())
            self.scrapes += 1


@contextmanager
def scraping(url: str | None, interval: float) -> Iterator[Scraper | None]:
    if url is None:
        yield None
        return
    scraper = Scraper(url, interval)
    scraper.start()
    try:
        yield scraper
    finally:
        scraper.stopped.set()
        scraper.join(30)


def one_run(mode: str, args: argparse.Namespace) -> Result:
    overrides: dict[str, str] = {}
    url = None
    if mode == "on":
        port = free_port()
        overrides = {"metrics.port": str(port), "metrics.host": HOST}
        url = f"http://{HOST}:{port}/metrics"
    with sluice(overrides=overrides) as (bootstrap, proc):
        handle = BrokerHandle(f"sluice-metrics-{mode}", bootstrap, proc)
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        cfg = Settings(args.records, args.seconds, 1, 0.0, 0, 0)
        with scraping(url, args.scrape_interval) as scraper:
            produced = run_produce(handle, create_topic(admin, 1), Case("produce", args.size), cfg)
            consumed = run_consume(handle, create_topic(admin, 1), Case("consume", args.size), cfg)
        if scraper is not None and scraper.scrapes == 0:
            raise RuntimeError("the metrics endpoint was never scraped")
    return {
        "produce MB/s": produced["MB/s"],
        "produce broker CPU-s/GB": produced["broker CPU-s/GB"],
        "consume MB/s": consumed["MB/s"],
        "consume broker CPU-s/GB": consumed["broker CPU-s/GB"],
        "broker peak RSS MiB": max(produced["broker peak RSS MiB"],
                                   consumed["broker peak RSS MiB"]),
    }  # fmt: skip


# -- what the hot path pays, in process ----------------------------------------------------
def hot_path_ns(rounds: int = 200_000) -> dict[str, float]:
    """ns per request of what the network layer and the replica manager add with metrics
    on: the timing object and clock readings, one histogram record, one topic count."""
    from sluice.server.broker_metrics import BrokerTopicStats, RequestMetrics
    from sluice.server.network import _Timing

    requests, topics = RequestMetrics(), BrokerTopicStats()
    clock = time.perf_counter_ns
    started = clock()
    for _ in range(rounds):
        begun = clock()
        timing = _Timing(0, begun, begun)
        topics.record_append("bench", 100, 102_400)
        timing.answered = clock()
        sent = clock()
        requests.record(0, timing.started - timing.arrived, timing.handled - timing.started,
                        timing.answered - timing.handled, sent - timing.answered)  # fmt: skip
    per_request = (clock() - started) / rounds
    started = clock()
    for _ in range(rounds):
        clock()
    return {"metrics ns/request": per_request, "one clock reading ns": (clock() - started) / rounds}


# -- the cost of a scrape with many partitions --------------------------------------------
_API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, -1)  # size, key, version, id, no client


def _round_trips(bootstrap: str, seconds: float) -> list[float]:
    """ApiVersions v0 one after another on one connection for ``seconds``: each round
    trip in seconds."""
    host, port = bootstrap.rsplit(":", 1)
    times = []
    until = time.monotonic() + seconds
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        while time.monotonic() < until:
            started = time.perf_counter()
            sock.sendall(_API_VERSIONS_V0)
            size = struct.unpack(">i", _read(sock, 4))[0]
            _read(sock, size)
            times.append(time.perf_counter() - started)
    return times


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def scrape_cost(args: argparse.Namespace) -> None:
    port = free_port()
    url = f"http://{HOST}:{port}/metrics"
    overrides = {"metrics.port": str(port), "metrics.host": HOST}
    with sluice(overrides=overrides) as (bootstrap, proc):
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        started = time.monotonic()
        per_request = 10_000  # CreateTopics' limit per request
        for index, first in enumerate(range(0, args.partitions, per_request)):
            count = min(per_request, args.partitions - first)
            futures = admin.create_topics([NewTopic(f"many-{index}", count, 1)],
                                          operation_timeout=600, request_timeout=600)  # fmt: skip
            for future in futures.values():
                future.result(600)
        log(f"{args.partitions} partitions created in {time.monotonic() - started:.1f} s")
        # The prober runs in a process of its own: in this one, reading a scrape's
        # megabytes would hold the GIL and delay its round trips, not the broker.
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            quiet = pool.apply(_round_trips, (bootstrap, 3.0))
            probing = pool.apply_async(_round_trips, (bootstrap, 2 + 2 * 5))
            time.sleep(1)
            walls, sizes = [], []
            for _ in range(5):
                begun = time.perf_counter()
                with urllib.request.urlopen(url, timeout=60) as answer:
                    sizes.append(len(answer.read()))
                walls.append(time.perf_counter() - begun)
                time.sleep(1)
            during = probing.get(60)
        cpu = proc.cpu_times()
    print(f"\n== scrape of /metrics with {args.partitions} partitions (5 scrapes)")
    print(f"  wall s: median {statistics.median(walls):.3f}, max {max(walls):.3f}; "
          f"{statistics.median(sizes) / 1e6:.1f} MB each")  # fmt: skip
    print(f"  ApiVersions round trip ms without scrapes: max {max(quiet) * 1000:.1f}, "
          f"p99 {_p99(quiet) * 1000:.1f} ({len(quiet)} requests)")  # fmt: skip
    print(f"  ApiVersions round trip ms during scrapes: max {max(during) * 1000:.1f}, "
          f"p99 {_p99(during) * 1000:.1f} ({len(during)} requests)")  # fmt: skip
    print(f"  broker CPU s in all: {cpu.user + cpu.system:.1f}")


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(len(ordered) * 0.99)] if ordered else 0.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sluice bench metrics",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per mode (default 3)")
    parser.add_argument("--seconds", type=float, default=5.0, help="produce time limit (5)")
    parser.add_argument("--records", type=int, default=2_000_000, help="most records (2e6)")
    parser.add_argument("--size", type=int, default=1024, help="record size in bytes (1024)")
    parser.add_argument("--scrape-interval", type=float, default=1.0,
                        help="seconds between scrapes in the on mode (1)")  # fmt: skip
    parser.add_argument("--partitions", type=int, default=0,
                        help="also time scrapes with this many partitions (0: no)")  # fmt: skip
    parser.add_argument("--idle-cpu", type=float, default=15.0, help="idle below this busy %%")
    parser.add_argument("--idle-wait", type=float, default=20.0, help="most s to wait for idle")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    compile_sluice()
    costs = hot_path_ns()
    log(f"hot path with metrics on: {costs['metrics ns/request']:.0f} ns per request "
        f"(a clock reading: {costs['one clock reading ns']:.0f} ns), in process")  # fmt: skip
    runs: dict[str, list[Result]] = {mode: [] for mode in MODES}
    for index in range(args.repeat):
        order = list(MODES) if index % 2 == 0 else list(reversed(MODES))
        for mode in order:
            seen = wait_idle(args.idle_cpu, args.idle_wait)
            result = one_run(mode, args)
            runs[mode].append(result)
            figures = "  ".join(f"{m} {fmt(result[m])}" for m in METRICS)
            log(f"{mode} run {index + 1} ({seen}): {figures}")
    print_medians(f" (metrics on: scraped every {args.scrape_interval:g} s)", runs, METRICS,
                  "on", "off")  # fmt: skip
    if args.partitions:
        scrape_cost(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
