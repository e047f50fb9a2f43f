"""``sluice bench soak``: mixed produce/consume at half of the measured peak, per minute.

Starts one fresh Sluice broker, measures its peak 1 KiB acks=1 produce rate with the
multi-process load generator of bench/producers.py (the median of --peak-runs 5-s runs,
each on a topic deleted after it; or takes --rate), waits for an idle machine, then runs
a --warmup-minutes warm-up (1 by default, printed as ``w`` rows) and --minutes of paced
producers (acks=1, 1 KiB, the send time is the record's CreateTime; --paced-producers
processes, 2 by default, sharing the rate) and consumers reading the same topic from
offset 0 (--consumers processes, 2 by default, splitting the partitions), each client in
a process of its own so that none shares a GIL. Both kinds of client are by default raw,
with a cost per request rather than per record: the producers (--producer) send
prepared batches re-stamped with the send time, one Produce request every 5 ms
(bench/raw_writer.py), and the consumers (--consumer) are Fetch readers that count
records from the batch headers and time each batch's first record. At half of the peak,
confluent-kafka clients (--producer confluent: linger.ms=5, every 1000th record timed;
--consumer confluent: every 100th record timed) need more CPU than two vCPUs have
beside the broker. Every minute it prints the records/s produced and consumed,
end-to-end latency percentiles (receive time minus CreateTime, wall-clock
milliseconds), produce acknowledgement percentiles, the broker's RSS and CPU, and how
long the broker and the clients waited for a CPU (schedstat). Flat percentiles and a
flat RSS are the goal of issue 9; the script prints the figures and a trend summary
and asserts nothing.

Not part of CI: 10 minutes by default.

    python bench/soak.py [--minutes 10] [--rate RECORDS_PER_S] [--partitions 4]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import queue
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

import brokers
import compare_report
import raw_reader
import raw_writer
from produce_consume import MB, consumer_config, create_topic, delete_topic, producer_config
from producers import multi_produce
from sluice.cli.arguments import UsageError, parse_assignments
from sluice.protocol.records.batch import iter_batches
from sluice.server.replica_fetch_wire import FetchPartitionRequest

SIZE = 1024
TICK_S = 0.01
RAW_TICK_S = 0.005


class Window:
    """Samples of the current minute, shared by the producer and consumer threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.e2e_ms: list[float] = []
        self.ack_ms: list[float] = []
        self.produced = 0
        self.consumed = 0
        self.errors = 0

    def collect(self, producer_out: Any, consumer_out: Any, stop: threading.Event) -> None:
        """Move the clients' reports into the window as they arrive (a thread): a queue
        read only at report time fills its pipe, and its senders' reports lag behind."""
        while not stop.is_set():
            drained = False
            for source in (producer_out, consumer_out):
                try:
                    item = source.get(timeout=0.05)
                except queue.Empty:
                    continue
                drained = True
                with self.lock:
                    if source is producer_out:
                        sent, samples, failed = item
                        self.produced += sent
                        self.errors += failed
                        self.ack_ms += samples
                    else:
                        count, samples, failed = item
                        self.consumed += count
                        self.errors += failed
                        self.e2e_ms += samples
            if not drained:
                time.sleep(0.01)

    def take(self) -> tuple[list[float], list[float], int, int, int]:
        with self.lock:
            out = (self.e2e_ms, self.ack_ms, self.produced, self.consumed, self.errors)
            self.e2e_ms, self.ack_ms = [], []
            self.produced = self.consumed = self.errors = 0
        return out


def produce_paced(bootstrap: str, topic: str, rate: int, stop: Any, out: Any) -> None:
    """Send ``rate`` records/s in 10 ms ticks; time the acknowledgement of every 1000th.

    Runs in a process of its own (``--paced-producers`` of them share the load; none
    shares a GIL with the consumer) and puts
    (records sent, acknowledgement samples in ms, errors) on ``out`` about once a second.
    Every record has the same value: the send time travels as the record's CreateTime,
    which librdkafka stamps, so a send costs one call (packing a time into each value
    capped two processes at about half of the rate wanted on two vCPUs).
    """
    producer = Producer(producer_config(bootstrap, "1", linger_ms=5))
    produce, poll = producer.produce, producer.poll
    value = b"x" * SIZE
    per_tick = max(1, round(rate * TICK_S))
    acks: list[float] = []
    errors = [0]

    def acked(sent_ns: int) -> Any:
        def report(err: KafkaError | None, _msg: Any) -> None:
            if err is None:
                acks.append((time.perf_counter_ns() - sent_ns) / 1e6)
            else:
                errors[0] += 1

        return report

    seq = sent = tick = 0
    start = time.perf_counter()
    while not stop.is_set():
        for _ in range(per_tick):
            try:
                if seq % 1000 == 0:
                    produce(topic, value, on_delivery=acked(time.perf_counter_ns()))
                else:
                    produce(topic, value)
            except BufferError:
                poll(0.001)
                continue
            seq += 1
            sent += 1
        poll(0)
        tick += 1
        if tick % 100 == 0:
            out.put((sent, acks[:], errors[0]))
            sent, errors[0] = 0, 0
            acks.clear()
        delay = start + tick * TICK_S - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
    producer.flush(5)


def produce_raw(bootstrap: str, topic: str, partitions: list[int], rate: int, stop: Any,
                out: Any) -> None:  # fmt: skip
    """Send ``rate`` records/s of 1 KiB to ``partitions`` as bench/raw_writer.py does: one
    Produce request (acks=1) every 5 ms (the confluent producers' linger.ms), its records
    stamped with its send time. Every answer is an acknowledgement sample (send to
    answer). Runs in a process of its own and puts (records sent, acknowledgement
    samples in ms, errors) on ``out`` about once a second; a broken connection ends it.
    """
    writer = raw_writer.PacedWriter(bootstrap, topic, partitions, b"x" * SIZE)
    per_tick = max(1, round(rate * RAW_TICK_S))
    sent = tick = 0

    def report(failed: int = 0) -> None:
        nonlocal sent
        with writer.lock:
            acks, writer.acks_ms = writer.acks_ms, []
            errors, writer.errors = writer.errors, 0
        out.put((sent, acks, errors + failed))
        sent = 0

    start = time.perf_counter()
    try:
        while not stop.is_set() and writer.failure is None:
            try:
                writer.send(per_tick)
            except OSError as exc:  # the broker closed the connection
                writer.failure = str(exc)
                break
            sent += per_tick
            tick += 1
            if tick % round(1 / RAW_TICK_S) == 0:
                report()
            delay = start + tick * RAW_TICK_S - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
    finally:
        writer.close()
        if writer.failure is not None:
            print(f"raw producer: {writer.failure}; stopping", file=sys.stderr)
        report(failed=writer.failure is not None)


class Reports:
    """What a consumer read since its last report, put on ``out`` as (records, e2e
    samples in ms, errors) about once a second and when it stops."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.records = 0
        self.samples: list[float] = []
        self.last = time.monotonic()

    def put_if_due(self) -> None:
        if time.monotonic() - self.last >= 1.0:
            self.put()

    def put(self, errors: int = 0) -> None:
        self.out.put((self.records, self.samples, errors))
        self.records, self.samples = 0, []
        self.last = time.monotonic()


def consume_partitions(bootstrap: str, topic: str, partitions: list[int], stop: Any,
                       out: Any) -> None:  # fmt: skip
    """Read ``partitions`` from offset 0; put (records, e2e samples in ms) on ``out`` about
    once a second. Runs in a process of its own (``--consumers`` of them split the
    partitions), so that no consumer shares a GIL with a producer or another consumer.
    End to end is the receive time minus the record's CreateTime, both wall-clock
    milliseconds, for every 100th record of each batch consumed."""
    consumer = Consumer(consumer_config(bootstrap, tuned=False))
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    reports = Reports(out)
    try:
        while not stop.is_set():
            batch = consumer.consume(1000, 0.1)
            now_ms = time.time() * 1000
            for msg in batch[::100]:
                if msg.error() is None:
                    reports.samples.append(now_ms - msg.timestamp()[1])
            reports.records += sum(1 for msg in batch if msg.error() is None)
            reports.put_if_due()
    finally:
        reports.put()
        consumer.close()


def consume_raw(bootstrap: str, topic: str, partitions: list[int], stop: Any,
                out: Any) -> None:  # fmt: skip
    """Read ``partitions`` from offset 0 as bench/raw_reader.py does, without making a
    Python object per record: Fetch v11 requests for all of them, one in flight, with
    librdkafka's default limits, records counted from the batch headers. End to end is the
    receive time minus each batch's first timestamp (its first record's CreateTime): one
    sample per batch, of the record that waited longest in the producer's linger. Puts
    (records, e2e samples in ms, errors) on ``out`` about once a second; an error code in
    an answer ends the reader (a consumer that fell behind retention has failed the soak).
    """
    host, port = bootstrap.rsplit(":", 1)
    offsets = dict.fromkeys(partitions, 0)
    buf = bytearray(raw_reader.FETCH_MAX_BYTES)
    reports, correlation = Reports(out), 0
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while not stop.is_set():
                correlation += 1
                parts = [FetchPartitionRequest(p, -1, offsets[p], -1,
                                               raw_reader.PARTITION_MAX_BYTES)
                         for p in partitions]  # fmt: skip
                buf, _, error, answers = raw_reader.fetch(
                    sock, buf, correlation, "sluice-soak-raw", topic, parts
                )
                now_ms = time.time() * 1000
                if error or any(answer.error_code for answer in answers):
                    codes = [error] + [answer.error_code for answer in answers]
                    print(f"raw consumer: error codes {codes}; stopping", file=sys.stderr)
                    reports.put(errors=1)
                    return
                for answer in answers:
                    if answer.records is None:
                        continue
                    start = offsets[answer.partition_index]
                    for batch in iter_batches(answer.records):
                        if batch.next_offset <= start:
                            continue
                        reports.records += batch.records_count
                        reports.samples.append(now_ms - batch.base_timestamp)
                        start = batch.next_offset
                    offsets[answer.partition_index] = start
                reports.put_if_due()
        finally:
            reports.put()


def pct(samples: list[float], q: int) -> str:
    value = quantile(samples, q)
    return "-" if value is None else f"{value:.2f}"


def quantile(samples: list[float], q: int) -> float | None:
    if len(samples) < 2:
        return None
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


def trend(minutes: list[dict[str, float]]) -> list[str]:
    """Whether the measured reports drift: for each figure its range, and the median of
    the first half of the reports beside that of the second (a leak or a creeping
    latency shows as a second half above the first)."""
    lines = []
    for key in (
        "e2e p50",
        "e2e p99",
        "ack p50",
        "ack p99",
        "RSS MB",
        "CPU %",
        "wait %",
        "cli wait",
    ):
        values = [m[key] for m in minutes if key in m]
        if len(values) < 2:
            continue
        half = len(values) // 2
        first, second = statistics.median(values[:half]), statistics.median(values[half:])
        lines.append(
            f"{key:>8}: {min(values):.1f}-{max(values):.1f}; median of the first "
            f"{half} reports {first:.1f}, of the last {len(values) - half} {second:.1f}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="sluice bench soak", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=int, help="records/s (default: half the measured peak)")
    ap.add_argument("--fraction", type=float, default=0.5, help="of the peak (default 0.5)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--producers", type=int, default=2, help="processes for the peak runs")
    ap.add_argument("--peak-runs", type=int, default=3,
                    help="5-s peak runs; the soak takes the median (default 3)")  # fmt: skip
    ap.add_argument("--paced-producers", type=int, default=2,
                    help="processes sharing the paced load (default 2: one Python process "
                         "cannot pace half of the peak on two vCPUs)")  # fmt: skip
    ap.add_argument("--producer", choices=("raw", "confluent"), default="raw",
                    help="raw: prepared batches re-stamped per request, one Produce request "
                         "every 5 ms, an acknowledgement sample per request (default; at "
                         "half the peak, confluent-kafka producers cost a produce() call "
                         "per record and kept the clients waiting for a CPU); confluent: "
                         "confluent-kafka producers, linger.ms=5, every 1000th record "
                         "timed")  # fmt: skip
    ap.add_argument("--consumers", type=int, default=2,
                    help="consumer processes, splitting the partitions (default 2)")  # fmt: skip
    ap.add_argument("--consumer", choices=("raw", "confluent"), default="raw",
                    help="raw: Fetch requests, records counted from batch headers, e2e "
                         "per batch (default; a confluent-kafka consumer costs a Python "
                         "object per record and cannot keep up at half the peak on two "
                         "vCPUs); confluent: confluent-kafka consumers, e2e of every 100th "
                         "record")  # fmt: skip
    ap.add_argument("--report-seconds", type=float, default=60.0, help="report interval")
    ap.add_argument("--warmup-minutes", type=float, default=1.0,
                    help="minutes at the rate before the measured ones, printed as w rows "
                         "(default 1)")  # fmt: skip
    ap.add_argument(
        "--idle-wait",
        type=float,
        default=60.0,
        help="most seconds to wait for an idle machine before the soak",
    )
    ap.add_argument("--delete-delay-ms", type=int, default=60_000,
                    help="the broker's log.segment.delete.delay.ms: how long removed "
                         "segments wait before deletion or reuse (default 60000, "
                         "Kafka's and the broker's)")  # fmt: skip
    ap.add_argument(
        "--retention-check-ms",
        type=int,
        default=5000,
        help="the broker's log.retention.check.interval.ms (default 5000)",
    )
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a property of the soak's broker, as `sluice broker --override` "
                         "takes it (repeatable), e.g. log.segment.recycle=false")  # fmt: skip
    args = ap.parse_args(argv)
    try:
        overrides = parse_assignments(args.override, "--override")
    except UsageError as exc:
        ap.error(str(exc))
    # Half of the peak is hundreds of MB/s: keep ~1 GiB per partition, as a soak of a
    # real cluster would, or ten minutes fill the disk.
    retention = {
        "log.retention.bytes": str(1 << 30),
        "log.segment.bytes": str(128 << 20),
        "log.retention.check.interval.ms": str(args.retention_check_ms),
        "log.segment.delete.delay.ms": str(args.delete_delay_ms),
    }
    settings = {**retention, **overrides}
    print(f"# {compare_report.machine_line(brokers.machine())}", flush=True)
    with brokers.sluice(overrides=settings) as (bootstrap, proc):
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        rate = args.rate
        if not rate:
            peaks = []
            for _ in range(args.peak_runs):  # each on a topic of its own, deleted after
                brokers.wait_idle(25.0, args.idle_wait)
                peak_topic = create_topic(admin, args.partitions)
                produced, _ = multi_produce(bootstrap, peak_topic, SIZE, "1", args.producers,
                                            5.0, 10_000_000, proc.pid)  # fmt: skip
                peaks.append(produced.records / produced.elapsed)
                # Gigabytes of page cache, much of it dirty: deleted, not left to compete
                # with the soak's first minute as writeback.
                delete_topic(admin, peak_topic)
            peak = statistics.median(peaks)
            rate = int(peak * args.fraction)
            runs = ", ".join(f"{p:,.0f}" for p in peaks)
            print(
                f"peak {peak:,.0f} records/s ({peak * SIZE / MB:.1f} MB/s; median of {runs}) "
                f"with {args.producers} producer processes; "
                f"soak at {args.fraction:.0%}: {rate:,} records/s",
                flush=True,
            )
        print("broker settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
        print(f"before the soak: {brokers.wait_idle(25.0, args.idle_wait)}", flush=True)
        topic = create_topic(admin, args.partitions)
        del admin  # an admin client left open would reconnect noisily once the broker stops
        window = Window()
        spawn = multiprocessing.get_context("spawn")
        producer_stop, producer_out, consumer_out = spawn.Event(), spawn.Queue(), spawn.Queue()
        shares = [rate // args.paced_producers] * args.paced_producers
        shares[0] += rate - sum(shares)
        every = list(range(args.partitions))
        producers = [
            spawn.Process(target=produce_raw,
                          args=(bootstrap, topic, every, share, producer_stop, producer_out))
            if args.producer == "raw"
            else spawn.Process(target=produce_paced,
                               args=(bootstrap, topic, share, producer_stop, producer_out))
            for share in shares
        ]  # fmt: skip
        consumers = [
            spawn.Process(
                target=consume_raw if args.consumer == "raw" else consume_partitions,
                args=(
                    bootstrap,
                    topic,
                    list(range(args.partitions))[index :: args.consumers],
                    producer_stop,
                    consumer_out,
                ),
            )
            for index in range(min(args.consumers, args.partitions))
        ]
        for process in producers + consumers:
            process.start()
        collecting = threading.Event()
        collector = threading.Thread(
            target=window.collect, args=(producer_out, consumer_out, collecting), daemon=True
        )
        collector.start()
        heads = ("e2e p50", "p99", "max", "ack p50", "p99")
        print(f"{'min':>5} {'prod/s':>9} {'cons/s':>9} " + " ".join(f"{h:>8}" for h in heads)
              + f" {'RSS MB':>7} {'CPU %':>6} {'wait %':>6} {'cli CPU':>7} {'cli wait':>8}"
              + f" {'errs':>5}", flush=True)  # fmt: skip
        started = time.monotonic()
        cpu = brokers.cpu_seconds(proc)
        broker_pids = [member.pid for member in brokers.process_tree(proc)]
        client_pids = [process.pid for process in producers + consumers if process.pid]
        broker_sched = brokers.scheduled_seconds(broker_pids)
        client_sched = brokers.scheduled_seconds(client_pids)
        measured: list[dict[str, float]] = []  # the reports after the warm-up
        try:
            elapsed = 0.0
            warmup_s = args.warmup_minutes * 60
            reports, warmup_reports = 0, math.ceil(warmup_s / args.report_seconds)
            while elapsed < warmup_s + args.minutes * 60 and brokers.alive(proc):
                time.sleep(args.report_seconds)
                e2e, ack, produced_n, consumed_n, errors = window.take()
                now_cpu = brokers.cpu_seconds(proc)
                span = args.report_seconds
                elapsed = time.monotonic() - started
                reports += 1
                label = f"{(elapsed - warmup_s) / 60:5.1f}"
                if reports <= warmup_reports:
                    label = f"w{elapsed / 60:4.1f}"
                now_broker = brokers.scheduled_seconds(broker_pids)
                now_client = brokers.scheduled_seconds(client_pids)
                figures = {"e2e p50": quantile(e2e, 50), "e2e p99": quantile(e2e, 99),
                           "ack p50": quantile(ack, 50), "ack p99": quantile(ack, 99),
                           "RSS MB": brokers.rss_bytes(proc) / MB,
                           "CPU %": 100 * (now_cpu - cpu) / span,
                           "wait %": 100 * (now_broker[1] - broker_sched[1]) / span,
                           "cli CPU": 100 * (now_client[0] - client_sched[0]) / span,
                           "cli wait": 100 * (now_client[1] - client_sched[1]) / span}  # fmt: skip
                broker_sched, client_sched = now_broker, now_client
                print(f"{label} {produced_n / span:9,.0f} {consumed_n / span:9,.0f} "
                      f"{pct(e2e, 50):>8} {pct(e2e, 99):>8} "
                      f"{(max(e2e) if e2e else 0):8.1f} {pct(ack, 50):>8} {pct(ack, 99):>8} "
                      f"{figures['RSS MB']:7.1f} {figures['CPU %']:6.1f} "
                      f"{figures['wait %']:6.1f} {figures['cli CPU']:7.1f} "
                      f"{figures['cli wait']:8.1f} {errors:>5}", flush=True)  # fmt: skip
                if reports > warmup_reports:
                    measured.append({k: v for k, v in figures.items() if v is not None})
                cpu = now_cpu
        finally:
            producer_stop.set()
            for process in producers + consumers:  # the collector drains them meanwhile
                process.join(timeout=30)
                if process.is_alive():
                    process.kill()
            collecting.set()
            collector.join(timeout=5)
        if not brokers.alive(proc):
            print(f"the broker {brokers.exit_report(proc)}")
            return 1
        print("\n".join(["trend over the measured reports:", *trend(measured)]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
