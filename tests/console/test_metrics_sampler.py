"""The console's metrics sampling, from a Prometheus registry built here with the
families the charts read (Kafka's JMX names as the JMX exporter renders them)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sluice.console.metrics_sampler import FAMILIES, MetricsSampler


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _registry() -> tuple[CollectorRegistry, dict[str, object]]:
    registry = CollectorRegistry()
    metrics = {
        "messages": Counter("kafka_server_brokertopicmetrics_messagesin", "", ["topic"],
                            registry=registry),
        "bytes_in": Counter("kafka_server_brokertopicmetrics_bytesin", "", ["topic"],
                            registry=registry),
        "bytes_out": Counter("kafka_server_brokertopicmetrics_bytesout", "", ["topic"],
                             registry=registry),
        "time": Histogram("kafka_network_requestmetrics_totaltimems", "", ["request"],
                          buckets=(1, 10, 100), registry=registry),
        "purgatory": Gauge("kafka_server_delayedoperationpurgatory_purgatorysize", "",
                           ["delayedOperation"], registry=registry),
        "timer": Gauge("kafka_server_delayedoperationpurgatory_numdelayedoperations", "",
                       ["delayedOperation"], registry=registry),
    }  # fmt: skip
    return registry, metrics


def test_rates_latencies_and_gauges_between_two_readings() -> None:
    registry, m = _registry()
    clock = Clock()
    sampler = MetricsSampler(lambda: registry, clock)
    m["messages"].labels("a").inc(10)  # type: ignore[attr-defined]
    first = sampler.sample()
    assert first["available"] and first["missing"] == [] and first["points"] == []

    clock.now += 2.0
    m["messages"].labels("a").inc(30)  # type: ignore[attr-defined]
    m["messages"].labels("b").inc(10)  # type: ignore[attr-defined]
    m["bytes_in"].labels("a").inc(4000)  # type: ignore[attr-defined]
    m["bytes_out"].labels("a").inc(1000)  # type: ignore[attr-defined]
    for ms in (2.0, 4.0):
        m["time"].labels("Produce").observe(ms)  # type: ignore[attr-defined]
    m["time"].labels("Fetch").observe(500.0)  # type: ignore[attr-defined]
    m["purgatory"].labels("Produce").set(3)  # type: ignore[attr-defined]
    m["purgatory"].labels("Fetch").set(7)  # type: ignore[attr-defined]
    m["timer"].labels("Fetch").set(5)  # type: ignore[attr-defined]
    point = sampler.sample()["points"][-1]
    assert point["t"] == 102.0
    assert point["messages_in_per_s"] == 20.0  # 40 more over 2 s, summed over topics
    assert point["bytes_in_per_s"] == 2000.0
    assert point["bytes_out_per_s"] == 500.0
    assert point["request_time_ms"] == {"Fetch": 500.0, "Produce": 3.0}
    assert point["purgatory_size"] == {"Fetch": 7.0, "Produce": 3.0}
    assert point["timer_size"] == {"Fetch": 5.0}

    # the next interval: only what happened in it
    clock.now += 1.0
    m["time"].labels("Produce").observe(10.0)  # type: ignore[attr-defined]
    point = sampler.sample()["points"][-1]
    assert point["messages_in_per_s"] == 0.0
    assert point["request_time_ms"] == {"Produce": 10.0}


def test_at_most_one_reading_per_interval_and_a_bounded_history() -> None:
    registry, m = _registry()
    clock = Clock()
    sampler = MetricsSampler(lambda: registry, clock, min_interval_s=1.0, capacity=3)
    sampler.sample()
    clock.now += 0.5
    assert sampler.sample()["points"] == []  # too soon: the last reading stands
    for _ in range(5):
        clock.now += 1.0
        m["messages"].labels("a").inc()  # type: ignore[attr-defined]
        sampler.sample()
    points = sampler.sample()["points"]
    assert [p["t"] for p in points] == [103.5, 104.5, 105.5]


def test_missing_families_and_no_registry() -> None:
    clock = Clock()
    nothing = MetricsSampler(lambda: None, clock).sample()
    assert nothing["available"] is False
    assert nothing["missing"] == sorted(FAMILIES)
    assert nothing["points"] == []

    registry = CollectorRegistry()
    counter = Counter("kafka_server_brokertopicmetrics_messagesin", "", registry=registry)
    Counter("unrelated", "", registry=registry).inc()
    sampler = MetricsSampler(lambda: registry, clock)
    partial = sampler.sample()
    assert partial["available"] is True
    assert partial["missing"] == sorted(set(FAMILIES) - {"messages_in"})
    clock.now += 1.0
    counter.inc(5)
    point = sampler.sample()["points"][-1]
    assert point == {"t": 101.0, "messages_in_per_s": 5.0}


def test_all_topic_samples_are_not_counted_twice() -> None:
    """A registry with per-topic samples and one without a topic label (all topics, as
    Kafka's BrokerTopicMetrics has) is read from the latter."""
    registry = CollectorRegistry()
    per_topic = Counter("kafka_server_brokertopicmetrics_messagesin", "", ["topic"],
                        registry=registry)  # fmt: skip
    total = Counter("kafka_server_brokertopicmetrics_messagesin", "", registry=CollectorRegistry())
    registry.register(_Renamed(total))
    clock = Clock()
    sampler = MetricsSampler(lambda: registry, clock)
    sampler.sample()
    clock.now += 1.0
    per_topic.labels("a").inc(3)
    total.inc(3)
    assert sampler.sample()["points"][-1]["messages_in_per_s"] == 3.0


class _Renamed:
    """Another collector whose samples carry the same name (no ``topic`` label)."""

    def __init__(self, counter: Counter) -> None:
        self._counter = counter

    def collect(self) -> object:
        return self._counter.collect()
