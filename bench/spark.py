"""Throughput of the ``sluice`` Spark source and sink, beside Sluice's consumer alone.

One Sluice broker (``python -m sluice broker`` on a loopback port, fresh log directory)
holds N records of 100 B values (keys ``k<i>``) in a 2-partition topic, written once
with Sluice's producer (untimed). Then, on one local[2] Spark session:

* consumer alone: Sluice's consumer reads all N records in this process (assign mode,
  no group), from ``assign`` to the N-th record in hand;
* batch read: ``spark.read.format("sluice")`` with ``sum(length(value))`` over all
  rows (so every value crosses from the Python workers into Spark);
* streaming: ``readStream.format("sluice")`` from earliest with
  ``trigger(availableNow=True)`` into the ``noop`` sink: one big micro-batch;
* micro-batch overhead: a stream over a small topic with ``maxOffsetsPerTrigger=1``,
  so every micro-batch reads one record; the median ``triggerExecution`` time;
* sink: a DataFrame of W rows (100 B values, keys) written with
  ``df.write.format("sluice")`` (tasks stage the rows, the driver publishes them with
  the idempotent producer on commit), timed to the end of the commit.

Each timed Spark step runs ``--repeat`` times (the first also warms up the Python
workers) and the median and best are printed. Figures only: nothing asserts a time.

    python bench/spark.py [--records 1000000] [--write-records 300000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> None:
    from sluice.client import Admin, NewTopic, Producer

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    value = b"x" * 100
    config = {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144}
    with Producer(config) as producer:
        for i in range(records):
            producer.send(topic, value, key=b"k%d" % i, partition=i % partitions)
        producer.flush(600)


def consumer_alone(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    from sluice.client import Consumer, TopicPartition

    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "max.poll.records": 16384}  # fmt: skip
    began = time.perf_counter()
    seen = 0
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        while seen < records:
            seen += len(consumer.poll(1.0))
        took = time.perf_counter() - began
    return records / took


def timed(label: str, repeats: int, step: Any, rows: int) -> list[float]:
    rates = []
    for i in range(repeats):
        began = time.perf_counter()
        step()
        took = time.perf_counter() - began
        rates.append(rows / took)
        print(f"  {label} run {i + 1}: {took:6.2f} s  {rows / took:12,.0f} rows/s", flush=True)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--write-records", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--batches", type=int, default=15, help="micro-batches for the overhead")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from brokers import sluice

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    load = os.getloadavg()
    print(f"# sluice Spark source and sink, {args.records:,} records of 100 B; "
          f"load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"on {os.cpu_count()} CPUs")  # fmt: skip
    with sluice() as (bootstrap, _proc):
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        began = time.perf_counter()
        produce(bootstrap, topic, args.records, 2)
        print(f"  produced {args.records:,} records in {time.perf_counter() - began:.1f} s "
              "(untimed setup)", flush=True)  # fmt: skip
        results: dict[str, list[float]] = {}
        results["consumer alone"] = [
            consumer_alone(bootstrap, topic, args.records, 2) for _ in range(args.repeat)
        ]
        print(f"  consumer alone: {[f'{r:,.0f}' for r in results['consumer alone']]} rows/s")

        from sluice.spark import local_session

        began = time.perf_counter()
        spark = local_session("sluice-bench")
        print(f"  Spark session started in {time.perf_counter() - began:.1f} s", flush=True)
        try:
            results.update(spark_steps(spark, bootstrap, topic, args))
        finally:
            spark.stop()
    print("\n| measurement | median rows/s | best rows/s |\n| --- | ---: | ---: |")
    for label, rates in results.items():
        print(f"| {label} | {statistics.median(rates):,.0f} | {max(rates):,.0f} |")


def spark_steps(
    spark: Any, bootstrap: str, topic: str, args: argparse.Namespace
) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}

    def source() -> Any:
        return (spark.read.format("sluice").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic).load())  # fmt: skip

    def batch_read() -> None:
        (total,) = source().selectExpr("sum(length(value))").first()
        assert total == 100 * args.records, total

    results["Spark batch read"] = timed("batch read", args.repeat, batch_read, args.records)

    def stream_read() -> None:
        query = (
            spark.readStream.format("sluice").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest").load()
            .writeStream.format("noop").trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()
        rows = sum(int(p["numInputRows"]) for p in query.recentProgress)
        assert rows == args.records, rows

    results["Spark streaming, one micro-batch"] = timed(
        "streaming", args.repeat, stream_read, args.records
    )

    small = f"{topic}-small"
    produce(bootstrap, small, args.batches, 1)
    query = (
        spark.readStream.format("sluice").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", small).option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "1").load()
        .writeStream.format("noop").trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    per_batch = [int(p["durationMs"]["triggerExecution"]) for p in query.recentProgress]
    print(
        f"  micro-batch overhead over {len(per_batch)} one-record batches: median "
        f"{statistics.median(per_batch)} ms, min {min(per_batch)} ms, max {max(per_batch)} ms"
    )

    out = f"{topic}-out"
    from sluice.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(out, 2, 1)])
    df = (
        spark.range(args.write_records)
        .selectExpr(
            "CAST(CONCAT('k', id) AS BINARY) AS key", "CAST(REPEAT('y', 100) AS BINARY) AS value"
        )
        .repartition(2)
        .cache()
    )
    df.count()

    def write() -> None:
        df.write.format("sluice").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", out
        ).mode("append").save()

    results["Spark sink write"] = timed("sink write", args.repeat, write, args.write_records)
    return results


if __name__ == "__main__":
    main()
