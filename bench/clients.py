"""Producer throughput of Sluice's producer beside kafka-python, aiokafka and confluent-kafka.

One Sluice broker (``python -m sluice broker`` on a loopback port, fresh log directory)
serves every client in the same run. Each measurement runs in its own Python process
(``--worker``), so no client inherits another's threads, imports or garbage; the order
of the clients rotates between repeats. A measurement sends N records of one size to a
fresh topic (created and warmed up by one acknowledged record first, untimed), then
flushes; the time is from the first ``send`` to the end of the flush, so every record
is acknowledged. All clients use the same settings: acks=1, linger.ms=5 (Kafka 4's
default), batch.size=16384, max.in.flight.requests.per.connection=5 (librdkafka's
own default is 1000000), no compression, idempotence off (it needs acks=all).

For each size it prints the median records/s and MB/s (10**6 payload bytes) over
``--repeat`` runs per client, Sluice's ratio to each other client (median of per-run
ratios), and the raw runs. Figures only: nothing here asserts a time.

    python bench/clients.py [--repeat 3] [--records 100000] [--quick] [--profile]

``--profile`` runs one Sluice measurement under cProfile and prints the top functions
by own time (the producer's network thread gets its own profiler).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CLIENTS = ("sluice", "kafka-python", "aiokafka", "confluent-kafka")
SIZES = (100, 1024)
LINGER_MS = 5
BATCH_SIZE = 16384
MB = 1e6


# -- workers: one measurement, in a fresh process --------------------------------------


def _sluice(bootstrap: str, topic: str, payload: bytes, n: int) -> float:
    from sluice.client import Producer

    config = {"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": LINGER_MS,
              "batch.size": BATCH_SIZE, "enable.idempotence": False}  # fmt: skip
    with Producer(config) as producer:
        producer.send(topic, payload).get(30)
        send = producer.send
        start = time.perf_counter()
        for _ in range(n):
            send(topic, payload)
        producer.flush()
        return time.perf_counter() - start


def _kafka_python(bootstrap: str, topic: str, payload: bytes, n: int) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS,
                             batch_size=BATCH_SIZE, enable_idempotence=False)  # fmt: skip
    try:
        producer.send(topic, payload).get(30)
        send = producer.send
        start = time.perf_counter()
        for _ in range(n):
            send(topic, payload)
        producer.flush()
        return time.perf_counter() - start
    finally:
        producer.close()


def _aiokafka(bootstrap: str, topic: str, payload: bytes, n: int) -> float:
    from aiokafka import AIOKafkaProducer

    async def run() -> float:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS,
            max_batch_size=BATCH_SIZE, enable_idempotence=False,
        )  # fmt: skip
        await producer.start()
        try:
            await (await producer.send(topic, payload))
            send = producer.send
            start = time.perf_counter()
            for _ in range(n):
                await send(topic, payload)
            await producer.flush()
            return time.perf_counter() - start
        finally:
            await producer.stop()

    return asyncio.run(run())


def _confluent(bootstrap: str, topic: str, payload: bytes, n: int) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": LINGER_MS,
                         "batch.size": BATCH_SIZE, "enable.idempotence": False,
                         "max.in.flight.requests.per.connection": 5})  # fmt: skip
    producer.produce(topic, payload)
    producer.flush(30)
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for _ in range(n):
        try:
            produce(topic, payload)
        except BufferError:  # the local queue is full: serve delivery reports, retry
            poll(0.01)
            produce(topic, payload)
    producer.flush(120)
    return time.perf_counter() - start


WORKERS: dict[str, Callable[[str, str, bytes, int], float]] = {
    "sluice": _sluice,
    "kafka-python": _kafka_python,
    "aiokafka": _aiokafka,
    "confluent-kafka": _confluent,
}


def worker(client: str, bootstrap: str, size: int, n: int) -> None:
    topic = f"bench-{client}-{uuid.uuid4().hex[:8]}"
    seconds = WORKERS[client](bootstrap, topic, b"x" * size, n)
    print(json.dumps({"client": client, "size": size, "records": n, "seconds": seconds}))


def profile_worker(bootstrap: str, size: int, n: int) -> None:
    """One Sluice measurement under cProfile (application and network threads)."""
    import cProfile
    import pstats
    import threading

    profiler = cProfile.Profile()
    profiles: list[cProfile.Profile] = []
    original_run = threading.Thread.run

    def profiled_run(self: threading.Thread) -> None:
        thread_profiler = cProfile.Profile()
        profiles.append(thread_profiler)
        thread_profiler.runcall(original_run, self)

    threading.Thread.run = profiled_run  # type: ignore[method-assign]
    topic = f"bench-profile-{uuid.uuid4().hex[:8]}"
    seconds = profiler.runcall(_sluice, bootstrap, topic, b"x" * size, n)
    threading.Thread.run = original_run  # type: ignore[method-assign]
    print(f"{n} records of {size} B in {seconds:.2f} s ({n / seconds:,.0f} records/s)")
    print("\n== application thread (send) ==")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
    for thread_profiler in profiles:
        print("\n== network thread (Sender) ==")
        pstats.Stats(thread_profiler).sort_stats("tottime").print_stats(18)


# -- the harness ----------------------------------------------------------------------


def run_worker(client: str, bootstrap: str, size: int, n: int) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__)), "--worker", client, "--bootstrap", bootstrap,
            "--size", str(size), "--records", str(n)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{client} failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--records",
        type=int,
        default=100_000,
        help="records per run at 100 B (1 KiB runs send half as many)",
    )
    parser.add_argument("--quick", action="store_true", help="1 repeat, 20k records")
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--worker", choices=CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=100, help=argparse.SUPPRESS)
    args = parser.parse_args()  # fmt: skip
    if args.worker:
        worker(args.worker, args.bootstrap, args.size, args.records)
        return
    if args.quick:
        args.repeat, args.records = 1, 20_000
    sys.path.insert(0, str(HERE))
    from brokers import sluice

    clients = [c for c in args.clients.split(",") if c]
    with sluice() as (bootstrap, _proc):
        if args.profile:
            profile_worker(bootstrap, 100, args.records)
            return
        print(f"# Producer throughput against one Sluice broker at {bootstrap}")
        print(f"# python {platform.python_version()}, {platform.machine()}, acks=1 "
              f"linger.ms={LINGER_MS} batch.size={BATCH_SIZE} max.in.flight=5, "
              f"repeat={args.repeat}")  # fmt: skip
        for size in SIZES:
            n = args.records if size <= 100 else args.records // 2
            runs: dict[str, list[float]] = {c: [] for c in clients}
            for repeat in range(args.repeat):
                order = clients[repeat % len(clients) :] + clients[: repeat % len(clients)]
                for client in order:
                    result = run_worker(client, bootstrap, size, n)
                    runs[client].append(n / result["seconds"])
            report(size, n, runs)


def report(size: int, n: int, runs: dict[str, list[float]]) -> None:
    print(f"\n## {size} B records, {n} per run")
    print(f"{'client':<16}{'records/s':>14}{'MB/s':>10}   runs (records/s)")
    for client, rates in runs.items():
        median = statistics.median(rates)
        raw = ", ".join(f"{r:,.0f}" for r in rates)
        print(f"{client:<16}{median:>14,.0f}{median * size / MB:>10.1f}   {raw}")
    ours = runs.get("sluice")
    if not ours:
        return
    for client, rates in runs.items():
        if client != "sluice" and rates:
            ratio = statistics.median(a / b for a, b in zip(ours, rates, strict=False))
            print(f"sluice / {client}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
