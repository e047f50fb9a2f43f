"""Transactional produce benchmark: transactions/s and records/s with 10, 100 and 1000
records per transaction, beside the same records produced without transactions
(idempotent, acks=all), and the latency a commit adds.

The load generator is confluent-kafka (librdkafka). One Sluice broker runs as a
subprocess on a loopback port; every case uses a fresh topic. For each case the median
of --repeat runs is printed. Figures only: nothing here asserts a time.

    python bench/transactions.py [--repeat 3] [--records 20000] [--commits 200]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sluice.ports import free_port

try:
    from confluent_kafka import Producer
    from confluent_kafka import libversion as librdkafka_version
except ImportError as missing:  # pragma: no cover - depends on the environment
    sys.exit(f"{missing}: pip install confluent-kafka")

VALUE = b"x" * 100
FLUSH_TIMEOUT_S = 60.0


def start_broker(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    args = [
        sys.executable, "-m", "sluice", "broker",
        "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override", f"log.dirs={data}",
        "--override", "transaction.state.log.num.partitions=4",
        "--override", "offsets.topic.num.partitions=4",
        "--override", "num.partitions=1",
    ]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the broker did not start")


def plain_run(bootstrap: str, records: int) -> float:
    """Records/s of an idempotent producer (acks=all) without transactions."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    topic = f"plain-{uuid.uuid4().hex[:8]}"
    producer.produce(topic, VALUE)
    producer.flush(FLUSH_TIMEOUT_S)  # topic creation and metadata outside the timing
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(FLUSH_TIMEOUT_S)
    return records / (time.perf_counter() - started)


def txn_run(bootstrap: str, records: int, per_txn: int) -> tuple[float, float]:
    """(transactions/s, records/s) with ``per_txn`` records per transaction."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
         "linger.ms": 5}
    )  # fmt: skip
    producer.init_transactions(30)
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    producer.begin_transaction()
    producer.produce(topic, VALUE)
    producer.commit_transaction(30)
    transactions = max(1, records // per_txn)
    started = time.perf_counter()
    for _ in range(transactions):
        producer.begin_transaction()
        for _ in range(per_txn):
            while True:
                try:
                    producer.produce(topic, VALUE)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.commit_transaction(30)
    elapsed = time.perf_counter() - started
    return transactions / elapsed, transactions * per_txn / elapsed


def commit_latency(bootstrap: str, commits: int) -> tuple[float, float, float]:
    """Median and p99 of: one record sent and acknowledged, then (separately timed)
    commit_transaction; returned in ms as (produce-ack, commit, p99 commit)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"lat-{uuid.uuid4().hex[:8]}",
         "linger.ms": 0}
    )  # fmt: skip
    producer.init_transactions(30)
    topic = f"lat-{uuid.uuid4().hex[:8]}"
    acks: list[float] = []
    ends: list[float] = []
    for i in range(commits + 5):
        producer.begin_transaction()
        t0 = time.perf_counter()
        producer.produce(topic, VALUE)
        producer.flush(FLUSH_TIMEOUT_S)
        t1 = time.perf_counter()
        producer.commit_transaction(30)
        t2 = time.perf_counter()
        if i >= 5:  # warm-up: coordinator lookup, AddPartitionsToTxn of a new partition
            acks.append((t1 - t0) * 1000)
            ends.append((t2 - t1) * 1000)
    ends.sort()
    return statistics.median(acks), statistics.median(ends), ends[int(len(ends) * 0.99) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--commits", type=int, default=200)
    args = parser.parse_args()
    print(
        f"librdkafka {librdkafka_version()[0]}, Python {sys.version.split()[0]}, "
        f"{args.records} records of {len(VALUE)} B per run, median of {args.repeat} runs"
    )
    with tempfile.TemporaryDirectory(prefix="sluice-bench-txn-") as tmp:
        proc, bootstrap = start_broker(Path(tmp) / "data")
        try:
            plain = statistics.median(
                plain_run(bootstrap, args.records) for _ in range(args.repeat)
            )
            print(f"{'non-transactional (idempotent, acks=all)':<44} {plain:>10,.0f} records/s")
            for per_txn in (10, 100, 1000):
                runs = [txn_run(bootstrap, args.records, per_txn) for _ in range(args.repeat)]
                tps = statistics.median(r[0] for r in runs)
                rps = statistics.median(r[1] for r in runs)
                print(f"{f'transactional, {per_txn} records/transaction':<44} {rps:>10,.0f} "
                      f"records/s {tps:>9,.1f} transactions/s  ({rps / plain:.0%} of "
                      f"non-transactional)")  # fmt: skip
            ack, commit, p99 = commit_latency(bootstrap, args.commits)
            print(f"one record: produce+ack {ack:.2f} ms median; commit_transaction adds "
                  f"{commit:.2f} ms median, {p99:.2f} ms p99 ({args.commits} commits)")  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
