"""Throughput and driver memory of the ``sluice`` Spark sink, beside confluent-kafka.

One Sluice broker (``python -m sluice broker`` on a loopback port, fresh log directory),
2-partition topics, W records of 100 B values with keys ``k<i>``, and in the same run:

* confluent-kafka: one producer, ``enable.idempotence=true``, ``acks=all``, sends the W
  records and flushes; the yardstick (its rows/s is 1.0);
* ``df.write``: a cached DataFrame of W rows (2 partitions) written with
  ``df.write.format("sluice")`` (transactional, the default): tasks send and prepare,
  the driver commits; timed to the end of the commit;
* streaming: the same W rows, written once as Parquet files (untimed), read with
  ``readStream.parquet`` into ``writeStream.format("sluice")`` with
  ``trigger(availableNow=True)``: one micro-batch, timed to the end of the query
  (the driver's commit included); and the same stream into the ``noop`` sink, so the
  sink's share shows;
* driver memory: the local[2] JVM's peak resident memory (sampled every 50 ms) during
  ``df.write`` of W and of 4W rows, above its level before the write. In local mode
  that JVM is the driver and the executor alike.

Each Spark step runs once untimed (Python workers start, the cache fills), then
``--repeat`` times; confluent-kafka runs ``--repeat`` times. The median and best are
printed, and every ratio is against confluent-kafka's median of the same run. Figures
only: nothing asserts a time. Broker CPU seconds and RSS are printed at the end.

    python bench/spark_sink.py [--records 300000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def create(bootstrap: str, topic: str, partitions: int) -> None:
    from sluice.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def confluent_idempotent(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})  # fmt: skip
    value = b"x" * 100
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, key=b"k%d" % i)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(300) == 0


def rss_kib(pid: int, key: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def jvm_pid() -> int:
    """The local Spark JVM this process started (a child running java)."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        if "java" in child.name():
            return int(child.pid)
    raise RuntimeError("no Spark JVM among this process's children")


def peak_rss_during(pid: int, step: Callable[[], None]) -> tuple[int, int]:
    """(resident KiB before ``step``, peak resident KiB while it ran)."""
    before = rss_kib(pid)
    peak = before
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.05):
            peak = max(peak, rss_kib(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        step()
    finally:
        done.set()
        sampler.join()
    return before, max(peak, rss_kib(pid))


def timed(
    label: str, repeats: int, step: Callable[[], None], rows: int, warm: bool = False
) -> list[float]:
    """``repeats`` timed runs of ``step``, after one untimed run when ``warm``."""
    if warm:
        step()
    rates = []
    for i in range(repeats):
        began = time.perf_counter()
        step()
        took = time.perf_counter() - began
        rates.append(rows / took)
        print(f"  {label} run {i + 1}: {took:6.2f} s  {rows / took:12,.0f} rows/s", flush=True)
    return rates


def spark_steps(
    spark: Any, bootstrap: str, args: argparse.Namespace, results: dict[str, list[float]]
) -> None:
    n = args.records
    out = f"sink-{uuid.uuid4().hex[:8]}"
    create(bootstrap, out, 2)

    def frame(rows: int) -> Any:
        df = (
            spark.range(rows)
            .selectExpr("CAST(CONCAT('k', id) AS BINARY) AS key",
                        "CAST(REPEAT('y', 100) AS BINARY) AS value")
            .repartition(2)
            .cache()
        )  # fmt: skip
        df.count()
        return df

    df = frame(n)

    def write(data: Any = df) -> None:
        data.write.format("sluice").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", out
        ).mode("append").save()

    results["Spark df.write"] = timed("df.write", args.repeat, write, n, warm=True)

    scratch = Path(tempfile.mkdtemp(prefix="sluice-sink-bench-"))
    parquet = str(scratch / "rows.parquet")
    df.write.parquet(parquet)
    schema = spark.read.parquet(parquet).schema

    def stream(sink: str) -> Callable[[], None]:
        def run() -> None:
            reader = spark.readStream.schema(schema).parquet(parquet)
            if sink == "noop":
                query = reader.writeStream.format("noop").trigger(availableNow=True).start()
            else:
                query = (
                    reader.writeStream.format("sluice")
                    .option("kafka.bootstrap.servers", bootstrap).option("topic", out)
                    .option("checkpointLocation", str(scratch / uuid.uuid4().hex))
                    .trigger(availableNow=True).start()
                )  # fmt: skip
            query.awaitTermination()
            rows = sum(int(p["numInputRows"]) for p in query.recentProgress)
            assert rows == n, rows

        return run

    results["Spark streaming, Parquet into noop (no sink)"] = timed(
        "stream to noop", args.repeat, stream("noop"), n, warm=True
    )
    results["Spark streaming, Parquet into the sluice sink"] = timed(
        "stream to sink", args.repeat, stream("sluice"), n, warm=True
    )

    pid = jvm_pid()
    for rows in (n, 4 * n):
        data = frame(rows)
        write(data)  # warm: the cached frame and the workers
        before, peak = peak_rss_during(pid, lambda d=data: write(d))
        grew = (peak - before) / 1024
        print(f"  driver JVM during df.write of {rows:,} rows: {before / 1024:,.0f} MiB "
              f"before, peak {peak / 1024:,.0f} MiB (+{grew:,.0f} MiB)", flush=True)  # fmt: skip
        data.unpersist()
    shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from brokers import sluice

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    load = os.getloadavg()
    print(f"# sluice Spark sink, {args.records:,} records of 100 B; load average at start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")  # fmt: skip
    results: dict[str, list[float]] = {}
    with sluice() as (bootstrap, proc):
        topic = f"confluent-{uuid.uuid4().hex[:8]}"
        create(bootstrap, topic, 2)
        results["confluent-kafka, idempotent, acks=all"] = timed(
            "confluent-kafka", args.repeat,
            lambda: confluent_idempotent(bootstrap, topic, args.records), args.records,
        )  # fmt: skip
        from sluice.spark import local_session

        spark = local_session("sluice-sink-bench")
        try:
            spark_steps(spark, bootstrap, args, results)
        finally:
            spark.stop()
        cpu = proc.cpu_times()
        print(f"  broker: {cpu.user + cpu.system:.1f} CPU s, RSS "
              f"{proc.memory_info().rss / 2**20:,.0f} MiB at the end")  # fmt: skip
    base = statistics.median(results["confluent-kafka, idempotent, acks=all"])
    load = os.getloadavg()
    print(f"\nload average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("\n| measurement | median rows/s | best rows/s | vs confluent-kafka |")
    print("| --- | ---: | ---: | ---: |")
    for label, rates in results.items():
        median = statistics.median(rates)
        print(f"| {label} | {median:,.0f} | {max(rates):,.0f} | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
