"""``sluice demo``: the end-to-end pipeline on an embedded broker (or a given cluster, or
with ``--cluster`` three broker processes and a Spark standalone cluster: :mod:`.cluster`).

A producer thread sends an online shop's clickstream (:mod:`.events`) through
Sluice's producer at a steady rate while Spark (:mod:`.pipeline`) turns it into
per-product, per-window metrics in a topic and in Parquet. At the end the
metrics topic is read back, checked against the same figures computed in plain
Python, summarised and drawn (:mod:`.report`).
"""

from __future__ import annotations

import datetime
import logging
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.client import Admin, NewTopic, Producer

from .events import Event, generate_events, reference_aggregates
from .report import Metric, by_key, render_chart, summary_lines

__all__ = ["SPARK_CONF", "DemoConfig", "DemoResult", "run_demo"]

SPARK_CONF = {"spark.python.daemon.module": "sluice.demo.spark_daemon"}
"""The demo's own Spark settings: its Python workers stay out of the terminal's process
group, so that Ctrl-C stops the demo without a traceback from each (:mod:`.spark_daemon`)."""


@dataclass
class DemoConfig:
    """The demo's knobs (``sluice demo --help`` explains them)."""

    events: int = 20_000
    rate: float = 2_000.0  # events per second; 0 = as fast as possible
    window_s: int = 60
    watermark_s: int = 90
    minutes: int = 10
    partitions: int = 3
    output_dir: Path = field(default_factory=lambda: Path("demo-output"))
    bootstrap_server: str | None = None
    seed: int = 7
    trigger_s: float = 3.0
    cluster: bool = False  # 3 broker processes and a Spark standalone cluster (.cluster)


@dataclass
class DemoResult:
    """What the run produced and whether Spark agreed with plain Python."""

    metrics: dict[tuple[str, str], Metric]
    expected: dict[tuple[str, str], Metric]
    chart: Path
    parquet_rows: int

    @property
    def matches(self) -> bool:
        return self.metrics == self.expected


class _ProducerThread(threading.Thread):
    """Sends the events at ``rate`` per second, keyed by user."""

    def __init__(self, bootstrap: str, topic: str, events: list[Event], rate: float) -> None:
        super().__init__(name="demo-producer", daemon=True)
        self.bootstrap, self.topic, self.events, self.rate = bootstrap, topic, events, rate
        self.sent = 0
        self.error: BaseException | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            with Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20}) as producer:
                began = time.monotonic()
                for i, event in enumerate(self.events):
                    if self.stopping.is_set():
                        return
                    if self.rate > 0 and i % 100 == 0:
                        ahead = began + i / self.rate - time.monotonic()
                        if ahead > 0 and self.stopping.wait(ahead):
                            return
                    producer.send(self.topic, event.to_json(), key=event.user_id.encode())
                    self.sent = i + 1
                producer.flush(60)
        except BaseException as exc:
            self.error = exc


def _expected(events: list[Event], window_s: int) -> dict[tuple[str, str], Metric]:
    out = {}
    for agg in reference_aggregates(events, window_s * 1000):
        start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(agg.window_start_ms / 1000))
        out[(start, agg.product_id)] = (agg.views, agg.purchases, agg.revenue_cents)
    return out


def _watermark_ms(progress: dict[str, Any] | None) -> int | None:
    raw = ((progress or {}).get("eventTime") or {}).get("watermark")
    if not raw:
        return None
    moment = datetime.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    return int(moment.timestamp() * 1000)


def _follow(
    query: Any, producer: _ProducerThread, total: int, final_watermark_ms: int,
    say: Callable[[str], None], idle_timeout_s: float = 300.0,
) -> None:  # fmt: skip
    """Print progress until the aggregation has closed every window (or failed)."""
    seen_batch = -1
    read = 0
    idle_deadline = time.monotonic() + idle_timeout_s
    next_note = time.monotonic() + 5.0
    while True:
        if time.monotonic() > next_note:
            next_note = time.monotonic() + 5.0
            status = query.status.get("message", "")
            say(f"produced {producer.sent}/{total}; Spark: {status}")
        if time.monotonic() > idle_deadline:
            raise TimeoutError(f"no micro-batch finished for {idle_timeout_s:.0f} s")
        if query.awaitTermination(1.0):
            raise RuntimeError(f"the aggregation query stopped: {query.exception()}")
        if producer.error is not None:
            raise RuntimeError(f"the producer failed: {producer.error}") from producer.error
        for progress in query.recentProgress:
            if int(progress["batchId"]) <= seen_batch:
                continue
            seen_batch = int(progress["batchId"])
            idle_deadline = time.monotonic() + idle_timeout_s
            next_note = time.monotonic() + 5.0
            read += int(progress["numInputRows"])
            watermark = ((progress.get("eventTime") or {}).get("watermark")) or "-"
            written = int((progress.get("sink") or {}).get("numOutputRows", 0))
            took = int((progress.get("durationMs") or {}).get("triggerExecution", 0)) / 1000
            say(
                f"produced {producer.sent}/{total}; micro-batch {seen_batch}: "
                f"{progress['numInputRows']} events in {took:.1f} s, "
                f"{read} read so far, {written} window rows out, watermark {watermark}"
            )
            reached = _watermark_ms(progress)
            if not producer.is_alive() and reached is not None and reached >= final_watermark_ms:
                say("the watermark passed the last window: every window is closed")
                return


def _interrupted(signum: int, frame: object) -> None:
    """The demo's SIGINT handler: a KeyboardInterrupt, once. Further interrupts are
    ignored while the demo stops its queries, Spark and the broker (PySpark's own
    handler would cancel every Spark job first, and each would log its failure).
    The process's logging is switched off for good: the interrupt lands in the middle
    of a call to Spark's JVM, whose client (py4j) would log it with a traceback, and
    the process is about to exit."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.disable(logging.CRITICAL)
    raise KeyboardInterrupt


def _handle_interrupts() -> Callable[[], None]:
    """Install :func:`_interrupted` (in the main thread; elsewhere nothing changes);
    returns what puts the previous handler back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, _interrupted)

    def restore() -> None:
        signal.signal(signal.SIGINT, previous)

    return restore


def _quiet(spark: Any) -> None:
    """Interrupted: Spark's log says nothing more (its queries and jobs are stopped
    mid-way, which it would report at ERROR with a Java stack trace each)."""
    if spark is None:
        return
    for _ in range(2):  # the first call may meet py4j's connection the interrupt broke
        try:
            spark.sparkContext.setLogLevel("OFF")
            return
        except Exception:  # the JVM may be gone: then it logs nothing anyway
            continue


def run_demo(
    config: DemoConfig, spark: Any = None, log: Callable[[str], None] = print
) -> DemoResult:
    """Run the whole pipeline; ``spark`` reuses a session (else a local one is made
    and stopped at the end). A KeyboardInterrupt (Ctrl-C) stops it cleanly and is
    raised again once everything is stopped."""
    import sluice

    out = config.output_dir
    for old in ("checkpoints", "metrics.parquet"):
        shutil.rmtree(out / old, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()

    def say(message: str) -> None:
        log(f"[{time.monotonic() - began:6.1f}s] {message}")

    broker = None
    demo_cluster = None
    own_spark = spark is None
    producer: _ProducerThread | None = None
    restore_handler = _handle_interrupts()
    try:
        bootstrap = config.bootstrap_server
        if config.cluster:
            from .cluster import DemoCluster

            demo_cluster = DemoCluster(out, say)
            bootstrap, spark = demo_cluster.start()
        elif bootstrap is None:
            # The console and the metrics on free ports: watch the pipeline while it runs.
            broker = sluice.EmbeddedBroker({"console.port": 0, "metrics.port": 0}).start()
            bootstrap = broker.bootstrap_servers
            say(f"embedded Sluice broker on {bootstrap}")
            served = broker.broker
            if served is not None and served.console is not None:
                say(f"web console: {served.console.url} (live charts under Metrics, while the "
                    "demo runs)")  # fmt: skip
            if served is not None and served.metrics_endpoint is not None:
                say(f"Prometheus metrics: {served.metrics_endpoint.url}")
        run_id = uuid.uuid4().hex[:8]
        clicks, metrics_topic = f"shop-clicks-{run_id}", f"shop-metrics-{run_id}"
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic(clicks, config.partitions), NewTopic(metrics_topic, 1)])
        say(f"topics {clicks} ({config.partitions} partitions) and {metrics_topic}")

        start_ms = (int(time.time()) // 60 - config.minutes) * 60_000
        events = generate_events(config.events, config.minutes, start_ms, seed=config.seed)
        producer = _ProducerThread(bootstrap, clicks, events, config.rate)
        producer.start()
        rate = f"{config.rate:g}/s" if config.rate > 0 else "full speed"
        say(f"producing {len(events)} clickstream events at {rate} (the last one ends the stream)")

        if spark is None:
            say("starting Spark (local[2])")
            from sluice.spark import local_session

            spark = local_session("sluice-demo", 2, **SPARK_CONF)
            say(f"Spark {spark.version} ready")
        else:
            from sluice.spark import register

            register(spark)
        _handle_interrupts()  # again: a SparkContext installs its own when it starts
        from .pipeline import ShopPipeline

        pipeline = ShopPipeline(
            spark, bootstrap, clicks, metrics_topic, out, config.window_s, config.watermark_s
        )
        # the marker's event time minus the delay: once the watermark is there, every
        # window has been closed and written
        final_watermark_ms = events[-1].event_time_ms - config.watermark_s * 1000
        query = pipeline.start_aggregation(config.trigger_s)
        try:
            _follow(query, producer, len(events), final_watermark_ms, say)
        except KeyboardInterrupt:
            _quiet(spark)
            raise
        finally:
            if query.isActive:
                query.stop()
        copied = pipeline.copy_to_parquet()
        say(f"copied {copied} window rows from {metrics_topic} to Parquet")

        rows = pipeline.read_results()
        metrics = by_key(rows)
        parquet_rows = spark.read.parquet(str(pipeline.parquet_dir)).count()
        say(f"read {len(rows)} window rows back from {metrics_topic}; {parquet_rows} in Parquet")
        for line in summary_lines(metrics):
            log(line)
        if demo_cluster is not None:
            for line in demo_cluster.read_summary(clicks):
                say(line)
        expected = _expected(events, config.window_s)
        chart = render_chart(
            metrics, out / "shop_metrics.png",
            f"Shop metrics per {config.window_s} s window ({len(events) - 1} events)", log=say,
        )  # fmt: skip
        result = DemoResult(metrics, expected, chart, parquet_rows)
        if result.matches:
            say(f"check: all {len(expected)} window/product rows match a plain-Python computation")
        else:
            missing = sorted(set(expected) - set(metrics))[:3]
            wrong = sorted(k for k in metrics if expected.get(k) != metrics[k])[:3]
            say(f"check FAILED: missing {missing}, differing {wrong}")
        say(f"Parquet: {pipeline.parquet_dir}")
        return result
    except KeyboardInterrupt:
        _quiet(spark)
        raise
    finally:
        if producer is not None:
            producer.stopping.set()
            producer.join(30)
        if own_spark and spark is not None:
            spark.stop()
        if demo_cluster is not None:
            demo_cluster.stop()
        if broker is not None:
            broker.stop()
        restore_handler()
