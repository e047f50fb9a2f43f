"""Throughput of the ``sluice`` Spark source and sink, beside confluent-kafka's consumer.

One Sluice broker (``python -m sluice broker`` on a loopback port, fresh log directory)
holds N records of 100 B values (keys ``k<i>``) in a 2-partition topic per codec
(``--codecs``, default none, lz4 and zstd), written once with Sluice's producer
(untimed). For each codec, each step runs ``--repeat`` times, and the table gives the
median rows/s, its ratio to the confluent-kafka consumer's median on the same topic in
the same run, and the broker's median CPU seconds (user + system) during the step:

* confluent-kafka consumer: one ``confluent_kafka.Consumer`` (librdkafka, with
  ``fetch.queue.backoff.ms=10``) reads all N records of both partitions (assign, no
  group), from ``assign`` to the N-th record;
* Sluice consumer, ``poll``: the same with Sluice's consumer, one ``ConsumerRecord``
  per record;
* Sluice consumer, ``poll_arrow``: the same with the batch API (Arrow record batches);
* Spark batch read: ``spark.read.format("sluice")`` with ``sum(length(value))`` over all
  rows (so every value crosses from the Python workers into Spark), local[2];
* Spark streaming: ``readStream.format("sluice")`` from earliest with
  ``trigger(availableNow=True)`` into the ``noop`` sink: one big micro-batch, timed
  from ``start()`` to the query's end (so with the query's start); the micro-batch's
  own ``triggerExecution`` time is printed beside it.

Each run also prints the CPU seconds of the broker, of this process, of Spark's JVM
and of Spark's Python workers (psutil), to show where a step's time goes.

Then, once:

* micro-batch overhead: a stream over a small topic with ``maxOffsetsPerTrigger=1``,
  so every micro-batch reads one record; the median ``triggerExecution`` time and the
  medians of its parts (Spark's ``durationMs``), beside the same for a Python streaming
  source that hands out one row per micro-batch and reads nothing (Spark's own cost
  per micro-batch of a Python source), each after a short warm-up query;
* sink: a DataFrame of W rows (100 B values, keys) written with
  ``df.write.format("sluice")``, timed to the end of the commit.

An untimed batch read and streaming micro-batch of the first topic come first: they
start Spark's Python workers and warm the JVM (the first read takes several times as
long). Figures only: nothing asserts a time.

    python bench/spark.py [--records 1000000] [--codecs none,lz4,zstd] [--repeat 3]
                          [--steps consumers,spark,overhead,sink] [--batches 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CONFLUENT = "confluent-kafka consumer"


def produce(bootstrap: str, topic: str, records: int, partitions: int, codec: str = "none") -> None:
    from sluice.client import Admin, NewTopic, Producer

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    value = b"x" * 100
    config = {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144,
              "compression.type": codec}  # fmt: skip
    with Producer(config) as producer:
        for i in range(records):
            producer.send(topic, value, key=b"k%d" % i, partition=i % partitions)
        producer.flush(600)


def confluent_consumer(bootstrap: str, topic: str, records: int, partitions: int) -> None:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # librdkafka stops fetching for 1 s when its queue is full; 10 ms as in
            # produce_consume.py's consume rows, so that it is not held back
            "fetch.queue.backoff.ms": 10,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        seen = 0
        while seen < records:
            for message in consumer.consume(10_000, 1.0):
                if message.error() is None:
                    seen += 1
    finally:
        consumer.close()


def sluice_consumer(bootstrap: str, topic: str, records: int, partitions: int, arrow: bool) -> None:
    from sluice.client import Consumer, TopicPartition

    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "max.poll.records": 65536}  # fmt: skip
    seen = 0
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        while seen < records:
            if arrow:
                seen += sum(batch.num_rows for batch in consumer.poll_arrow(1.0))
            else:
                seen += len(consumer.poll(1.0))


def local_cpu() -> dict[str, float]:
    """CPU seconds (user + system, with reaped children) of this process, of the JVMs
    it started (Spark's driver and executor) and of Spark's Python workers."""
    import psutil

    out = {"bench": 0.0, "jvm": 0.0, "python workers": 0.0}
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            cmdline = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        used = times.user + times.system + times.children_user + times.children_system
        if proc.pid == me.pid:
            out["bench"] += times.user + times.system
        elif "java" in cmdline:
            out["jvm"] += used
        elif "pyspark" in cmdline:
            out["python workers"] += times.user + times.system
    return out


class Results:
    """rows/s and CPU seconds per (step, codec), each run printed as it ends."""

    def __init__(self, proc: Any, repeat: int) -> None:
        self.proc = proc
        self.repeat = repeat
        self.rates: dict[tuple[str, str], list[float]] = {}
        self.cpu: dict[tuple[str, str], list[float]] = {}

    def time(self, label: str, codec: str, rows: int, step: Callable[[], None]) -> None:
        from brokers import Meter

        for i in range(self.repeat):
            before = local_cpu()
            with Meter(self.proc) as meter:
                began = time.perf_counter()
                step()
                took = time.perf_counter() - began
            after = local_cpu()
            self.rates.setdefault((label, codec), []).append(rows / took)
            self.cpu.setdefault((label, codec), []).append(meter.cpu_s)
            spent = ", ".join(f"{k} {after[k] - before[k]:.2f}" for k in after)
            print(f"  {codec:5} {label} run {i + 1}: {took:6.2f} s {rows / took:12,.0f} rows/s, "
                  f"CPU s: broker {meter.cpu_s:.2f}, {spent}", flush=True)  # fmt: skip

    def table(self) -> None:
        print("\n| codec | path | median rows/s | vs confluent-kafka | broker CPU s |")
        print("| --- | --- | ---: | ---: | ---: |")
        for (label, codec), rates in self.rates.items():
            base = self.rates.get((CONFLUENT, codec))
            ratio = statistics.median(rates) / statistics.median(base) if base else float("nan")
            cpu = statistics.median(self.cpu[(label, codec)])
            print(f"| {codec} | {label} | {statistics.median(rates):,.0f} | {ratio:.2f}x | "
                  f"{cpu:.2f} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--write-records", type=int, default=300_000)
    parser.add_argument("--codecs", default="none,lz4,zstd")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batches", type=int, default=15, help="micro-batches for the overhead")
    parser.add_argument("--steps", default="consumers,spark,overhead,sink",
                        help="which of consumers,spark,overhead,sink to run")  # fmt: skip
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from brokers import sluice

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    load = os.getloadavg()
    print(f"# sluice Spark source and sink, {args.records:,} records of 100 B; "
          f"load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"on {os.cpu_count()} CPUs")  # fmt: skip
    n = args.records
    with sluice() as (bootstrap, proc):
        results = Results(proc, args.repeat)
        topics = {}
        for codec in args.codecs.split(","):
            topics[codec] = f"bench-{codec}-{uuid.uuid4().hex[:8]}"
            began = time.perf_counter()
            produce(bootstrap, topics[codec], n, 2, codec)
            print(f"  produced {n:,} records ({codec}) in {time.perf_counter() - began:.1f} s "
                  "(untimed setup)", flush=True)  # fmt: skip
        steps = set(args.steps.split(","))
        for codec, topic in topics.items():
            if "consumers" not in steps:
                break
            results.time(CONFLUENT, codec, n, partial(confluent_consumer, bootstrap, topic, n, 2))
            for label, arrow in (("poll", False), ("poll_arrow", True)):
                step = partial(sluice_consumer, bootstrap, topic, n, 2, arrow)
                results.time(f"Sluice consumer, {label}", codec, n, step)

        from sluice.spark import local_session

        began = time.perf_counter()
        spark = local_session("sluice-bench")
        print(f"  Spark session started in {time.perf_counter() - began:.1f} s", flush=True)
        try:
            if "spark" in steps:  # untimed: start the Python workers, warm the JVM
                began = time.perf_counter()
                spark_reads(spark, bootstrap, topics[next(iter(topics))], "warm-up", None, n)
                print(f"  warm-up read in {time.perf_counter() - began:.1f} s", flush=True)
            for codec, topic in topics.items():
                if "spark" in steps:
                    spark_reads(spark, bootstrap, topic, codec, results, n)
            if "overhead" in steps:
                overhead(spark, bootstrap, topics[next(iter(topics))], args.batches)
            if "sink" in steps:
                sink(spark, bootstrap, topics[next(iter(topics))], results, args.write_records)
        finally:
            spark.stop()
    results.table()


def spark_reads(spark: Any, bootstrap: str, topic: str, codec: str, results: Results | None,
                records: int) -> None:  # fmt: skip
    """The batch read and the streaming micro-batch, timed into ``results`` (once and
    untimed without)."""

    def timed(label: str, step: Callable[[], None]) -> None:
        if results is None:
            step()
        else:
            results.time(label, codec, records, step)

    def batch_read() -> None:
        (total,) = (
            spark.read.format("sluice").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).load().selectExpr("sum(length(value))").first()
        )  # fmt: skip
        assert total == 100 * records, total

    timed("Spark batch read", batch_read)

    def stream_read() -> None:
        query = (
            spark.readStream.format("sluice").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest").load()
            .writeStream.format("noop").trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()
        rows = sum(int(p["numInputRows"]) for p in query.recentProgress)
        assert rows == records, rows
        batch = max(query.recentProgress, key=lambda p: int(p["numInputRows"]))
        took = int(batch["durationMs"]["triggerExecution"]) / 1000
        print(f"        the micro-batch alone: {took:.2f} s, {rows / took:,.0f} rows/s "
              f"(durationMs {batch['durationMs']})")  # fmt: skip

    timed("Spark streaming, one micro-batch", stream_read)


def overhead(spark: Any, bootstrap: str, topic: str, batches: int) -> None:
    """One-record micro-batches of the ``sluice`` source beside those of a Python source
    that reads nothing (Spark's own cost per micro-batch of a Python streaming source),
    on the same session; each after a short warm-up query."""
    spark.dataSource.register(NullSource)
    small = f"{topic}-small"
    produce(bootstrap, small, batches, 1)

    def sluice_stream(name: str) -> Any:
        return (
            spark.readStream.format("sluice").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", name).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "1").load()
        )  # fmt: skip

    def null_stream(count: int) -> Any:
        return spark.readStream.format("bench_null").option("batches", str(count)).load()

    warm_topic = f"{topic}-warm"
    produce(bootstrap, warm_topic, 3, 1)
    for label, reader, warm in (
        ("sluice source", lambda: sluice_stream(small), lambda: sluice_stream(warm_topic)),
        ("a Python source that reads nothing", lambda: null_stream(batches),
         lambda: null_stream(3)),
    ):  # fmt: skip
        warm().writeStream.format("noop").trigger(availableNow=True).start().awaitTermination()
        query = reader().writeStream.format("noop").trigger(availableNow=True).start()
        query.awaitTermination()
        progress = [p for p in query.recentProgress if int(p["numInputRows"]) > 0]
        per_batch = [int(p["durationMs"]["triggerExecution"]) for p in progress]
        print(
            f"  micro-batch overhead, {label}, {len(per_batch)} one-record batches: median "
            f"{statistics.median(per_batch)} ms, min {min(per_batch)} ms, max {max(per_batch)} ms"
        )
        parts = sorted({k for p in progress for k in p["durationMs"]} - {"triggerExecution"})
        medians = {
            k: statistics.median(int(p["durationMs"].get(k, 0)) for p in progress) for k in parts
        }
        print("    of which (medians, ms): " + ", ".join(f"{k} {v:g}" for k, v in medians.items()))


def _null_source() -> type:
    """A Python streaming source of one int row per micro-batch that reads nothing."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import (
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    class Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
        def __init__(self, batches: int) -> None:
            self.batches = batches

        def initialOffset(self) -> dict[str, int]:
            return {"n": 0}

        def getDefaultReadLimit(self) -> ReadLimit:
            return ReadMaxRows(1)

        def prepareForTriggerAvailableNow(self) -> None:
            pass

        def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
            return {"n": min(start["n"] + 1, self.batches)}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[Any]:
            return [InputPartition((start["n"], end["n"]))]

        def read(self, partition: Any) -> Any:
            first, stop = partition.value
            return iter([(i,) for i in range(first, stop)])

    class Source(DataSource):  # type: ignore[misc]
        @classmethod
        def name(cls) -> str:
            return "bench_null"

        def schema(self) -> str:
            return "value int"

        def streamReader(self, schema: Any) -> Any:
            return Reader(int(self.options.get("batches", "10")))

    return Source


NullSource = _null_source() if __name__ == "__main__" else None


def sink(spark: Any, bootstrap: str, topic: str, results: Results, rows: int) -> None:
    out = f"{topic}-out"
    from sluice.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(out, 2, 1)])
    df = (
        spark.range(rows)
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

    results.time("Spark sink write", "none", rows, write)


if __name__ == "__main__":
    main()
