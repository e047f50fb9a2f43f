"""Producer and consumer throughput of Sluice's clients beside kafka-python, aiokafka
and confluent-kafka.

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

Consumer throughput (``--consumers``, on by default; ``--no-producers`` skips the
producer section): N records of one size are written once to a fresh one-partition
topic (untimed), then every client reads all of them from offset 0 in assign mode
(no group, no commits, auto.offset.reset=earliest, otherwise each client's default
fetch settings); the time is from ``assign`` to the N-th record in the application's
hands, so it includes the first metadata and fetch round trips.

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
        from kafka import KafkaProducer  # type: ignore[import-untyped]

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
    from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

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


def _c_sluice(bootstrap: str, topic: str, n: int) -> float:
    from sluice.client import Consumer
    from sluice.client.consumer.consumer import TopicPartition

    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                   "enable.auto.commit": False}) as consumer:  # fmt: skip
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0)])
        got = 0
        while got < n:
            got += len(consumer.poll(1.0))
        return time.perf_counter() - start


def _c_kafka_python(bootstrap: str, topic: str, n: int) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None)  # fmt: skip
    try:
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0)])
        got = 0
        while got < n:
            got += sum(len(v) for v in consumer.poll(timeout_ms=1000).values())
        return time.perf_counter() - start
    finally:
        consumer.close()


def _c_aiokafka(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> float:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False)  # fmt: skip
        await consumer.start()
        try:
            start = time.perf_counter()
            consumer.assign([TopicPartition(topic, 0)])
            got = 0
            while got < n:
                batches = await consumer.getmany(timeout_ms=1000)
                got += sum(len(v) for v in batches.values())
            return time.perf_counter() - start
        finally:
            await consumer.stop()

    return asyncio.run(run())


def _c_confluent(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = 0
        while got < n:
            got += sum(1 for m in consumer.consume(10_000, 1.0) if not m.error())
        return time.perf_counter() - start
    finally:
        consumer.close()


CONSUMERS: dict[str, Callable[[str, str, int], float]] = {
    "sluice": _c_sluice,
    "kafka-python": _c_kafka_python,
    "aiokafka": _c_aiokafka,
    "confluent-kafka": _c_confluent,
}


WORKERS: dict[str, Callable[[str, str, bytes, int], float]] = {
    "sluice": _sluice,
    "kafka-python": _kafka_python,
    "aiokafka": _aiokafka,
    "confluent-kafka": _confluent,
}


def worker(client: str, bootstrap: str, size: int, n: int, topic: str | None = None) -> None:
    if topic is not None:  # consume: the topic holds the records already
        seconds = CONSUMERS[client](bootstrap, topic, n)
        print(json.dumps({"client": client, "size": size, "records": n, "seconds": seconds}))
        return
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


def run_worker(
    client: str, bootstrap: str, size: int, n: int, topic: str | None = None
) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__)), "--worker", client, "--bootstrap", bootstrap,
            "--size", str(size), "--records", str(n)]  # fmt: skip
    if topic is not None:
        argv += ["--topic", topic]
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
    parser.add_argument("--no-producers", action="store_true", help="skip producer runs")
    parser.add_argument("--no-consumers", action="store_true", help="skip consumer runs")
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--worker", choices=CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=100, help=argparse.SUPPRESS)
    args = parser.parse_args()  # fmt: skip
    if args.worker:
        worker(args.worker, args.bootstrap, args.size, args.records, args.topic)
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
        if not args.no_producers:
            producers(bootstrap, clients, args.repeat, args.records)
        if not args.no_consumers:
            consumers(bootstrap, clients, args.repeat, args.records)


def producers(bootstrap: str, clients: list[str], repeats: int, records: int) -> None:
    print(f"# Producer throughput against one Sluice broker at {bootstrap}")
    print(f"# python {platform.python_version()}, {platform.machine()}, acks=1 "
          f"linger.ms={LINGER_MS} batch.size={BATCH_SIZE} max.in.flight=5, "
          f"repeat={repeats}")  # fmt: skip
    for size in SIZES:
        n = records if size <= 100 else records // 2
        runs: dict[str, list[float]] = {c: [] for c in clients}
        for repeat in range(repeats):
            order = clients[repeat % len(clients) :] + clients[: repeat % len(clients)]
            for client in order:
                result = run_worker(client, bootstrap, size, n)
                runs[client].append(n / result["seconds"])
        report(size, n, runs)


def consumers(bootstrap: str, clients: list[str], repeats: int, records: int) -> None:
    print(f"\n# Consumer throughput against one Sluice broker at {bootstrap}")
    print(f"# python {platform.python_version()}, {platform.machine()}, assign mode, "
          f"from offset 0, one partition, repeat={repeats}")  # fmt: skip
    for size in SIZES:
        n = records if size <= 100 else records // 2
        topic = f"bench-consume-{size}-{uuid.uuid4().hex[:8]}"
        _fill(bootstrap, topic, size, n)
        runs: dict[str, list[float]] = {c: [] for c in clients}
        for repeat in range(repeats):
            order = clients[repeat % len(clients) :] + clients[: repeat % len(clients)]
            for client in order:
                result = run_worker(client, bootstrap, size, n, topic)
                runs[client].append(n / result["seconds"])
        report(size, n, runs)


def _fill(bootstrap: str, topic: str, size: int, n: int) -> None:
    """Write ``n`` records of ``size`` bytes to partition 0 of ``topic`` (untimed)."""
    from sluice.client import Producer

    with Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": LINGER_MS,
                   "enable.idempotence": False}) as producer:  # fmt: skip
        payload = b"x" * size
        for _ in range(n):
            producer.send(topic, payload, partition=0)
        producer.flush()


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
