"""What one request costs the broker: CPU per request with one in flight, and pipelined.

The latency rows of bench/compare.py (one record in flight, acks=all; end-to-end; the
RF=3 row) are paced at 1,000 requests a second, so their figures follow what each
request costs the broker, not its bytes. This benchmark isolates that cost with a raw
client (Produce v9 and Fetch v11 frames built and read in this process, so the client
adds no librdkafka threads or callbacks):

* ``produce 1-in-flight``: one Produce of one 1 KiB record (acks=all), then wait for its
  answer, again and again: the broker sleeps between requests, as in the latency rows;
* ``produce pipelined``: the same requests with ``--depth`` of them in flight, so the
  broker never sleeps: the difference from the row above is what waking costs;
* ``fetch 1-in-flight``: one Fetch per stored batch (100 B records, one per batch,
  partition limit 1 byte, so each answer carries exactly the next batch).

For each it prints requests/s, the round trip's p50 and p99 as the client saw it, and
the broker's CPU (user + system, from /proc) per request; medians of ``--repeat`` runs
on a fresh broker each, brokers in rotating order, beside Tansu when it is installed.
Figures only: nothing here asserts a time. Only 127.0.0.1 is used.

    python bench/request_cost.py [--requests 3000] [--depth 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import psutil
from confluent_kafka.admin import AdminClient

import brokers
import compare_report
import raw_reader
from compare_report import fmt
from produce_consume import create_topic
from raw_writer import BatchTemplates, connect, failed_partitions, produce_request, send_buffers
from sluice.server.replica_fetch_wire import FetchPartitionRequest

CLIENT_ID = "sluice-bench-request-cost"
CASES = ("produce 1-in-flight", "produce pipelined", "fetch 1-in-flight")

Figures = dict[str, float]


class RequestCostError(RuntimeError):
    """A broker answered in a way the benchmark cannot measure (an error code, no data)."""


def produce_frame(topic: str, value: bytes, acks: int) -> bytes:
    """One framed Produce v9 request of one record, stamped now, to send again and again."""
    batch = BatchTemplates(value).stamped(1, int(time.time() * 1000))
    parts = produce_request(acks, {topic: [(0, batch)]}, 1, CLIENT_ID)
    return b"".join(bytes(part) for part in parts)


def check_produce_answer(frame: memoryview) -> None:
    """An answer with an error code would measure the error path: stop instead."""
    if failed_partitions(frame):
        raise RequestCostError("produce answered with an error code")


def figures(count: int, elapsed: float, cpu: float, round_trips: list[float]) -> Figures:
    out = {"requests/s": count / elapsed, "broker CPU us/request": cpu / count * 1e6}
    if round_trips:
        round_trips.sort()
        out["p50 ms"] = round_trips[len(round_trips) // 2] * 1000
        out["p99 ms"] = round_trips[int(len(round_trips) * 0.99)] * 1000
    return out


def produce_in_flight(bootstrap: str, topic: str, proc: psutil.Process, count: int,
                      depth: int) -> Figures:  # fmt: skip
    """``count`` Produce requests (acks=all), ``depth`` in flight; the round trips are
    measured only with one in flight."""
    frame = produce_frame(topic, b"x" * 1024, -1)  # one request, resent: the broker
    # appends each (no idempotence), so what is measured is the broker's, not the client's
    buf = bytearray(1 << 16)
    round_trips: list[float] = []
    with connect(bootstrap) as sock:
        cpu0, start = brokers.cpu_seconds(proc), time.perf_counter()
        sent = answered = 0
        while answered < count:
            while sent < count and sent - answered < depth:
                sent_at = time.perf_counter()
                send_buffers(sock, [frame])
                sent += 1
            buf, answer = raw_reader.recv_frame(sock, buf)
            check_produce_answer(answer)
            answered += 1
            if depth == 1:
                round_trips.append(time.perf_counter() - sent_at)
        elapsed, cpu = time.perf_counter() - start, brokers.cpu_seconds(proc) - cpu0
    return figures(count, elapsed, cpu, round_trips)


def store_batches(bootstrap: str, topic: str, count: int) -> None:
    """``count`` batches of one 100 B record each (acks=1), for the fetch case."""
    frame = produce_frame(topic, b"x" * 100, 1)
    buf = bytearray(1 << 16)
    with connect(bootstrap) as sock:
        for _ in range(count):
            send_buffers(sock, [frame])
            buf, answer = raw_reader.recv_frame(sock, buf)
            check_produce_answer(answer)


def fetch_in_flight(bootstrap: str, topic: str, proc: psutil.Process, count: int) -> Figures:
    """One Fetch per stored batch, in order; each must carry the next one."""
    store_batches(bootstrap, topic, count)
    buf = bytearray(1 << 20)
    round_trips: list[float] = []
    with connect(bootstrap) as sock:
        cpu0, start = brokers.cpu_seconds(proc), time.perf_counter()
        for offset in range(count):
            sent_at = time.perf_counter()
            buf, _, error, parts = raw_reader.fetch(
                sock, buf, offset + 1, CLIENT_ID, topic,
                [FetchPartitionRequest(0, -1, offset, -1, 1)],
            )  # fmt: skip
            round_trips.append(time.perf_counter() - sent_at)
            if error or not parts or parts[0].error_code or not parts[0].records:
                raise RequestCostError(f"fetch at offset {offset}: no batch in the answer")
        elapsed, cpu = time.perf_counter() - start, brokers.cpu_seconds(proc) - cpu0
    return figures(count, elapsed, cpu, round_trips)


def run_broker(name: str, args: argparse.Namespace) -> dict[str, Figures | str]:
    """Every case once on a fresh broker ``name``: figures, or why a case failed."""
    out: dict[str, Figures | str] = {}
    with brokers.BROKERS[name]() as (bootstrap, proc):
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        cases: dict[str, Callable[[str], Figures]] = {
            CASES[0]: lambda t: produce_in_flight(bootstrap, t, proc, args.requests, 1),
            CASES[1]: lambda t: produce_in_flight(bootstrap, t, proc, args.requests, args.depth),
            CASES[2]: lambda t: fetch_in_flight(bootstrap, t, proc, args.requests),
        }
        for case, run in cases.items():
            try:
                out[case] = run(create_topic(admin, 1))
            except (OSError, RequestCostError, raw_reader.RawReadError) as exc:
                out[case] = f"{type(exc).__name__}: {exc}"
    return out


def median(runs: list[dict[str, Figures | str]], case: str, metric: str) -> float | None:
    """compare_report's median over the runs where ``case`` gave figures."""
    return compare_report.median([f for r in runs if isinstance(f := r.get(case), dict)], metric)


def print_table(results: dict[str, list[dict[str, Figures | str]]]) -> None:
    names = list(results)
    print(f"{'case':22s} {'broker':8s} {'requests/s':>11s} {'p50 ms':>8s} {'p99 ms':>8s} "
          f"{'CPU us/req':>11s}")  # fmt: skip
    for case in CASES:
        for name in names:
            runs = results[name]
            errors = [r[case] for r in runs if isinstance(r.get(case), str)]
            print(f"{case:22s} {name:8s} {fmt(median(runs, case, 'requests/s')):>11s} "
                  f"{fmt(median(runs, case, 'p50 ms')):>8s} "
                  f"{fmt(median(runs, case, 'p99 ms')):>8s} "
                  f"{fmt(median(runs, case, 'broker CPU us/request')):>11s}"
                  + (f"  ({len(errors)} failed: {errors[0]})" if errors else ""))  # fmt: skip
        if len(names) == 2:
            a = median(results[names[0]], case, "broker CPU us/request")
            b = median(results[names[1]], case, "broker CPU us/request")
            if a is not None and b:
                print(f"{'':22s} {'ratio':8s} CPU per request {names[0]}/{names[1]} {a / b:.2f}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python bench/request_cost.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--requests", type=int, default=3000, help="requests per case (3000)")
    parser.add_argument("--depth", type=int, default=16, help="in flight when pipelined (16)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per broker, medians (3)")
    parser.add_argument("--brokers", default="sluice,tansu", help="sluice and/or tansu")
    parser.add_argument("--idle-cpu", type=float, default=25.0, help="busy %% counted as idle")
    parser.add_argument("--idle-wait", type=float, default=10.0, help="most s to wait for idle")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    names = [n.strip() for n in args.brokers.split(",") if n.strip()]
    unknown = [n for n in names if n not in ("sluice", "tansu")]
    if unknown or not names or args.requests < 1 or args.depth < 1 or args.repeat < 1:
        print(f"bad arguments: brokers {names}", file=sys.stderr)
        return 2
    print(f"# request cost  {time.strftime('%Y-%m-%dT%H:%M:%S%z')}  {psutil.cpu_count()} CPUs  "
          f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"# {compare_report.machine_line(brokers.machine())}")
    results: dict[str, list[dict[str, Figures | str]]] = {n: [] for n in names}
    for turn in range(args.repeat):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            seen = brokers.wait_idle(args.idle_cpu, args.idle_wait)
            try:
                run = run_broker(name, args)
            except brokers.BrokerStartError as exc:
                run = {case: f"did not start: {exc}" for case in CASES}
            results[name].append(run)
            summary = ", ".join(
                f"{c} {v['broker CPU us/request']:.0f} us" if isinstance(v, dict) else f"{c} {v}"
                for c, v in run.items()
            )
            print(f"[{time.strftime('%H:%M:%S')}] {name} run {turn + 1} ({seen}): {summary}",
                  flush=True)  # fmt: skip
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
