"""``MetricsSampler``: the console's live charts, read from the broker's Prometheus
registry (``prometheus_client``'s ``CollectorRegistry``).

Each :meth:`MetricsSampler.sample` collects the registry once, keeps the few families the
charts draw (:data:`FAMILIES`, Kafka's JMX names as the JMX exporter renders them) and
turns two consecutive readings into one chart point: rates per second for the counters,
the mean time of each request type over the interval from the latency histograms, and
the gauges as they are. Samples are taken only while someone watches (the charts poll),
at most one per ``min_interval_s``; the last ``capacity`` points are kept. A family the
registry does not have is left out of the point, and with no registry at all
``available`` is False: the page says "metrics not available".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

__all__ = ["FAMILIES", "MetricsSampler", "Reading", "read_registry"]

FAMILIES: Final = {
    "messages_in": "kafka_server_brokertopicmetrics_messagesin_total",
    "bytes_in": "kafka_server_brokertopicmetrics_bytesin_total",
    "bytes_out": "kafka_server_brokertopicmetrics_bytesout_total",
    "request_time": "kafka_network_requestmetrics_totaltimems",
    "purgatory_size": "kafka_server_delayedoperationpurgatory_purgatorysize",
    "timer_size": "kafka_server_delayedoperationpurgatory_numdelayedoperations",
}
"""What each chart reads: sample names for the counters, the histogram's name (its
``_sum`` and ``_count`` samples, per ``request`` label) and the gauges' names (per
``delayedOperation`` label). ``NumDelayedOperations`` is Kafka's name for the size of a
purgatory's timer."""

_REQUEST_LABEL: Final = "request"
_OPERATION_LABEL: Final = "delayedOperation"
TOP_REQUESTS: Final = 5
"""The request types whose latency a point carries: the most requested in the interval."""


class MetricsRegistry(Protocol):
    """What is read of a ``prometheus_client.CollectorRegistry``."""

    def collect(self) -> Iterable[Any]: ...


@dataclass
class Reading:
    """One collection of the registry: counter totals, per-request histogram sums and
    counts, gauges per operation (None: the family is not in the registry)."""

    at: float
    totals: dict[str, float | None] = field(default_factory=dict)
    request_sum: dict[str, float] | None = None
    request_count: dict[str, float] | None = None
    gauges: dict[str, dict[str, float] | None] = field(default_factory=dict)


def read_registry(registry: MetricsRegistry, at: float) -> Reading:
    """The families of :data:`FAMILIES` in ``registry``, summed over topics. A counter
    with both per-topic samples and samples without a ``topic`` label (all topics) is
    read from the latter only."""
    counters = {FAMILIES[k]: k for k in ("messages_in", "bytes_in", "bytes_out")}
    histogram = FAMILIES["request_time"]
    gauges = {FAMILIES[k]: k for k in ("purgatory_size", "timer_size")}
    per_topic: dict[str, float] = {}
    all_topics: dict[str, float] = {}
    reading = Reading(at)
    for family in registry.collect():
        # A family without samples yet (labelled, no child made) is there, at zero.
        name = family.name
        if name + "_total" in counters or name in counters:
            per_topic.setdefault(name if name in counters else name + "_total", 0.0)
        elif name == histogram:
            reading.request_sum = reading.request_sum or {}
            reading.request_count = reading.request_count or {}
        elif name in gauges:
            reading.gauges[gauges[name]] = reading.gauges.get(gauges[name]) or {}
        for sample in family.samples:
            name, labels, value = sample.name, sample.labels, float(sample.value)
            if name in counters:
                target = per_topic if "topic" in labels else all_topics
                target[name] = target.get(name, 0.0) + value
            elif name in (histogram + "_sum", histogram + "_count"):
                request = labels.get(_REQUEST_LABEL, "")
                if name.endswith("_sum"):
                    sums = reading.request_sum = reading.request_sum or {}
                    sums[request] = sums.get(request, 0.0) + value
                else:
                    counts = reading.request_count = reading.request_count or {}
                    counts[request] = counts.get(request, 0.0) + value
            elif name in gauges:
                by_op = reading.gauges.get(gauges[name]) or {}
                operation = labels.get(_OPERATION_LABEL, "")
                by_op[operation] = by_op.get(operation, 0.0) + value
                reading.gauges[gauges[name]] = by_op
    for name, key in counters.items():
        reading.totals[key] = all_topics.get(name, per_topic.get(name))
    for key in ("purgatory_size", "timer_size"):
        reading.gauges.setdefault(key, None)
    return reading


def _point(previous: Reading, current: Reading) -> dict[str, Any]:
    """The chart point of the interval between two readings."""
    elapsed = max(current.at - previous.at, 1e-9)
    point: dict[str, Any] = {"t": round(current.at, 3)}
    for key, total in current.totals.items():
        before = previous.totals.get(key)
        if total is not None and before is not None:
            point[f"{key}_per_s"] = max(total - before, 0.0) / elapsed
    if current.request_sum is not None and current.request_count is not None:
        before_sum = previous.request_sum or {}
        before_count = previous.request_count or {}
        deltas = {
            request: (
                current.request_sum.get(request, 0.0) - before_sum.get(request, 0.0),
                count - before_count.get(request, 0.0),
            )
            for request, count in current.request_count.items()
        }
        active = [r for r, (_, n) in deltas.items() if n > 0]
        busiest = sorted(active, key=lambda r: -deltas[r][1])[:TOP_REQUESTS]
        point["request_time_ms"] = {r: deltas[r][0] / deltas[r][1] for r in sorted(busiest)}
    for key, gauge in current.gauges.items():
        if gauge is not None:
            point[key] = dict(sorted(gauge.items()))
    return point


class MetricsSampler:
    """Chart points from the registry ``registry()`` returns (None: no metrics), on the
    monotonic clock ``now``."""

    def __init__(
        self,
        registry: Callable[[], MetricsRegistry | None],
        now: Callable[[], float],
        *,
        min_interval_s: float = 1.0,
        capacity: int = 300,
    ) -> None:
        self._registry = registry
        self._now = now
        self.min_interval_s = min_interval_s
        self._last: Reading | None = None
        self.points: deque[dict[str, Any]] = deque(maxlen=capacity)

    def sample(self) -> dict[str, Any]:
        """Read the registry unless the last reading is younger than ``min_interval_s``,
        and return the points so far: ``{"available": bool, "families": {chart: name},
        "missing": [chart, ...], "points": [...]}``."""
        registry = self._registry()
        if registry is None:
            return {"available": False, "families": FAMILIES, "missing": sorted(FAMILIES),
                    "points": []}  # fmt: skip
        now = self._now()
        if self._last is None or now - self._last.at >= self.min_interval_s:
            reading = read_registry(registry, now)
            if self._last is not None:
                self.points.append(_point(self._last, reading))
            self._last = reading
        last = self._last
        missing = [k for k, v in last.totals.items() if v is None]
        if last.request_count is None:
            missing.append("request_time")
        missing += [k for k, v in last.gauges.items() if v is None]
        return {
            "available": len(missing) < len(FAMILIES),
            "families": FAMILIES,
            "missing": sorted(missing),
            "points": list(self.points),
        }
