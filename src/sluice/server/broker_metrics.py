"""A broker's Prometheus metrics, named after Kafka's JMX metrics as the Prometheus JMX
exporter renders them (docs/metrics.md lists every family).

``prometheus_client`` does the exposition: each broker has its own
:class:`~prometheus_client.CollectorRegistry` (several brokers may share a process), and
``generate_latest`` renders it. What the registry holds comes in two kinds:

* **Counts kept on the hot path** as plain integers, cheap enough for every produce,
  fetch and request: :class:`BrokerTopicStats` (messages and bytes in and out per topic,
  one ``+=`` per partition's batches) and :class:`RequestMetrics` (requests and the
  stages of their latency per API, a few list increments per request). Both are turned
  into metric families when scraped.
* **Gauges read at scrape time** from the broker's state by :class:`BrokerStateCollector`
  (partitions, ISR, the controller, purgatories, connections, quota throttles): nothing
  runs between scrapes.

``prometheus_client``'s ``ProcessCollector`` adds the process's CPU seconds, resident
memory and open files; each render measures the event loop's lag as it starts. The
per-partition and per-group families (logs, consumer lag) are not in the registry:
:class:`PartitionFamilies` writes them in slices after the registry's text (with 20,000
partitions they are most of a scrape). :class:`MetricsEndpoint` serves it all.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from sluice.protocol.apis import ApiKey
from sluice.server.http_server import HttpRequest, HttpResponse, HttpServer, Router

if TYPE_CHECKING:
    from sluice.coordinator import GroupCoordinator
    from sluice.log.manager import LogManager
    from sluice.purgatory import DelayedOperationPurgatory
    from sluice.quota import QuotaManagers
    from sluice.replication.metadata_cache import MetadataCache
    from sluice.replication.replica_manager import ReplicaManager

__all__ = [
    "LATENCY_BUCKETS_MS",
    "STAGES",
    "BrokerMetrics",
    "BrokerState",
    "BrokerStateCollector",
    "BrokerTopicStats",
    "ClusterStats",
    "MetricsEndpoint",
    "PartitionFamilies",
    "RequestMetrics",
    "TopicCounters",
    "request_name",
]


LATENCY_BUCKETS_MS: Final = (
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1000,
    2500,
    5000,
    10_000,
    30_000,
)
"""The request latency histograms' upper bounds, in ms (``+Inf`` follows)."""
_BOUNDS_NS: Final = tuple(int(ms * 1_000_000) for ms in LATENCY_BUCKETS_MS)
_NS_PER_MS: Final = 1_000_000
# The buckets' "le" labels as Prometheus writes them: 1.0, 0.05, +Inf.
_BUCKET_LABELS: Final = (*(repr(float(ms)) for ms in LATENCY_BUCKETS_MS), "+Inf")

STAGES: Final = (
    "requestqueuetimems",
    "localtimems",
    "remotetimems",
    "responsesendtimems",
    "totaltimems",
)
"""Kafka's RequestMetrics histograms, by their exporter names (docs/metrics.md says what
each measures on Sluice's single event loop)."""

_STAGE_HELP: Final = {
    "requestqueuetimems": "ms from the request's frame being complete to its handler call",
    "localtimems": "ms in the request's handler on the event loop",
    "remotetimems": "ms from the handler's return to its answer (a purgatory wait)",
    "responsesendtimems": "ms from the answer to its bytes handed to the socket (or sent)",
    "totaltimems": "ms from the frame being complete to the answer sent (sum of the others)",
}


def request_name(api_key: int) -> str:
    """Kafka's name of an API (``ApiKeys.name``): ``ListOffsets`` for LIST_OFFSETS."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        return f"Unknown{api_key}"
    return "".join(part.capitalize() for part in name.split("_"))


# -- hot path: per-topic counts -------------------------------------------------------------
class TopicCounters:
    """One topic's Kafka ``BrokerTopicMetrics`` counts."""

    __slots__ = ("bytes_in", "bytes_out", "messages_in")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0


class BrokerTopicStats:
    """Kafka's ``BrokerTopicStats``: :class:`TopicCounters` per topic, made on first use.
    The replica manager counts leader appends from clients (``record_append``); the fetch
    handler counts the bytes it answers consumers with (``topic(...).bytes_out``)."""

    __slots__ = ("topics",)

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}

    def topic(self, name: str) -> TopicCounters:
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def record_append(self, topic: str, records: int, size: int) -> None:
        counters = self.topics.get(topic)
        if counters is None:
            counters = self.topics[topic] = TopicCounters()
        counters.messages_in += records
        counters.bytes_in += size

    def collect(self, known: Callable[[str], bool]) -> Iterator[Metric]:
        """The three families; a topic that ``known`` no longer knows is forgotten (as
        Kafka removes a deleted topic's metrics)."""
        messages = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended to leader logs here by clients (MessagesInPerSec)",
            labels=["topic"],
        )
        bytes_in = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_bytesin",
            "Record batch bytes appended to leader logs here by clients (BytesInPerSec)",
            labels=["topic"],
        )
        bytes_out = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_bytesout",
            "Record bytes answered to consumers' fetches (BytesOutPerSec)",
            labels=["topic"],
        )
        for topic, counters in list(self.topics.items()):
            if not known(topic):
                del self.topics[topic]
                continue
            messages.add_metric([topic], counters.messages_in)
            bytes_in.add_metric([topic], counters.bytes_in)
            bytes_out.add_metric([topic], counters.bytes_out)
        yield from (messages, bytes_in, bytes_out)


# -- hot path: per-request counts and latencies ------------------------------------------
class _ApiTimes:
    """One API's request count and a latency histogram per stage (bucket counts, the
    last one +Inf, and the sum in ns)."""

    __slots__ = ("buckets", "count", "sums")

    def __init__(self) -> None:
        self.count = 0
        self.buckets = [[0] * (len(_BOUNDS_NS) + 1) for _ in STAGES]
        self.sums = [0] * len(STAGES)


class RequestMetrics:
    """Kafka's ``RequestMetrics`` per API: requests answered, and the time of each stage
    of their handling as histograms. The network layer calls :meth:`record` once per
    answered request; a record is five bisections and a few list increments, no lock (only
    the event loop records)."""

    __slots__ = ("_apis",)

    def __init__(self) -> None:
        self._apis: dict[int, _ApiTimes] = {}

    def record(
        self, api_key: int, queue_ns: int, local_ns: int, remote_ns: int, send_ns: int
    ) -> None:
        times = self._apis.get(api_key)
        if times is None:
            times = self._apis[api_key] = _ApiTimes()
        times.count += 1
        buckets, sums, bounds = times.buckets, times.sums, _BOUNDS_NS
        total = queue_ns + local_ns + remote_ns + send_ns
        buckets[0][bisect.bisect_left(bounds, queue_ns)] += 1
        buckets[1][bisect.bisect_left(bounds, local_ns)] += 1
        buckets[2][bisect.bisect_left(bounds, remote_ns)] += 1
        buckets[3][bisect.bisect_left(bounds, send_ns)] += 1
        buckets[4][bisect.bisect_left(bounds, total)] += 1
        sums[0] += queue_ns
        sums[1] += local_ns
        sums[2] += remote_ns
        sums[3] += send_ns
        sums[4] += total

    def count(self, api_key: int) -> int:
        times = self._apis.get(api_key)
        return 0 if times is None else times.count

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests answered, per API (RequestsPerSec)",
            labels=["request"],
        )
        histograms = [
            HistogramMetricFamily(
                f"kafka_network_requestmetrics_{stage}", _STAGE_HELP[stage], labels=["request"]
            )
            for stage in STAGES
        ]
        for api_key, times in sorted(self._apis.items()):
            name = request_name(api_key)
            requests.add_metric([name], times.count)
            for index, family in enumerate(histograms):
                cumulative, running = [], 0
                counts = times.buckets[index]
                for bound, n in zip(_BUCKET_LABELS, counts, strict=True):
                    running += n
                    cumulative.append((bound, running))
                family.add_metric([name], cumulative, times.sums[index] / _NS_PER_MS)
        yield requests
        yield from histograms


# -- scrape time: the broker's state ----------------------------------------------------
class ClusterStats(Protocol):
    """What a cluster member adds (the ``ClusterManager``)."""

    @property
    def isr_shrinks(self) -> int: ...

    @property
    def isr_expands(self) -> int: ...

    def controller_stats(self) -> tuple[bool, int, int, int] | None:
        """(active, offline partitions, leader elections, unclean leader elections) of
        this broker's controller; None before it has one."""


class _Listener(Protocol):
    @property
    def listener_name(self) -> str: ...

    @property
    def connection_count(self) -> int: ...


@dataclass
class BrokerState:
    """The broker's collaborators the state collector reads (set as they are built)."""

    broker_id: int
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager | None = None
    log_manager: LogManager | None = None
    purgatories: Sequence[DelayedOperationPurgatory[Any]] = ()
    group_coordinator: Callable[[], GroupCoordinator | None] = lambda: None
    listeners: Sequence[_Listener] = ()
    quotas: QuotaManagers | None = None
    cluster: ClusterStats | None = None


class BrokerStateCollector:
    """Gauges read from the broker's state when scraped (a custom collector: nothing runs
    between scrapes), each a handful of series whatever the partition count."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        state = self.state
        offline = yield from self._replica_manager()
        yield from self._controller(offline)
        yield from self._purgatories()
        connections = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Client connections open, per listener (socket-server-metrics connection-count)",
            labels=["listener"],
        )
        for listener in state.listeners:
            connections.add_metric([listener.listener_name], listener.connection_count)
        yield connections
        yield from self._throttles()
        yield from self._replication()

    def _replication(self) -> Iterator[Metric]:
        """Replication traffic and the replication throttles' measured rates."""
        rm = self.state.replica_manager
        for direction, help_text in (("in", "appended from leaders"), ("out", "sent to followers")):
            family = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_replicationbytes{direction}",
                f"Bytes of record batches {help_text} (ReplicationBytes{direction.title()}PerSec)",
            )
            family.add_metric([], getattr(rm, f"replication_bytes_{direction}", 0))
            yield family
        for name, side in (("leaderreplication", "leader"), ("followerreplication", "follower"),
                           ("alterlogdirsreplication", "alter_log_dirs")):  # fmt: skip
            quota = getattr(rm, f"{side}_quota", None)
            gauge = GaugeMetricFamily(
                f"kafka_server_{name}_byte_rate",
                f"Bytes/s of throttled replicas measured by the {side.replace('_', '-')} "
                "replication throttle (measured while it has a bound)",
            )
            gauge.add_metric([], quota.rate() if quota is not None else 0.0)
            yield gauge

    def _replica_manager(self) -> Generator[Metric, None, int]:
        """The replica manager's families (one pass over the partitions); returns how many
        partitions here are offline."""
        rm = self.state.replica_manager
        partitions = leaders = under = offline = 0
        if rm is not None:
            local = rm.broker_id
            hosted = list(rm.partitions.values())
            partitions = len(hosted)
            for partition in hosted:
                if partition.log.is_offline:
                    offline += 1
                if partition.leader_id == local:
                    leaders += 1
                    if len(partition.isr) < len(partition.assigned_replicas):
                        under += 1
        prefix = "kafka_server_replicamanager_"
        yield GaugeMetricFamily(
            prefix + "partitioncount", "Partitions hosted here", value=partitions
        )
        yield GaugeMetricFamily(prefix + "leadercount", "Partitions led here", value=leaders)
        yield GaugeMetricFamily(
            prefix + "underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replica set",
            value=under,
        )
        yield GaugeMetricFamily(
            prefix + "offlinereplicacount",
            "Partitions here whose log dir is offline",
            value=offline,
        )
        cluster = self.state.cluster
        shrinks = cluster.isr_shrinks if cluster is not None else 0
        expands = cluster.isr_expands if cluster is not None else 0
        yield CounterMetricFamily(
            prefix + "isrshrinks",
            "ISR shrinks written by this leader (IsrShrinksPerSec)",
            value=shrinks,
        )
        yield CounterMetricFamily(
            prefix + "isrexpands",
            "ISR expansions written by this leader (IsrExpandsPerSec)",
            value=expands,
        )
        return offline

    def _controller(self, offline_here: int) -> Iterator[Metric]:
        cluster = self.state.cluster
        if cluster is None:  # a single node is its own controller; no election ever runs
            active, offline, elections, unclean = True, offline_here, 0, 0
        else:
            stats = cluster.controller_stats()
            active, offline, elections, unclean = stats if stats is not None else (False, 0, 0, 0)
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the active controller, 0 elsewhere",
            value=int(active),
        )
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a live leader (reported by the active controller)",
            value=offline if active else 0,
        )
        yield CounterMetricFamily(
            "kafka_controller_controllerstats_leaderelections",
            "Partition leaders elected by this broker's controller "
            "(LeaderElectionRateAndTimeMs count)",
            value=elections,
        )
        yield CounterMetricFamily(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Leaders elected out of the ISR by this broker's controller "
            "(UncleanLeaderElectionsPerSec)",
            value=unclean,
        )

    def _purgatories(self) -> Iterator[Metric]:
        size = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Watch registrations of waiting operations (an operation once per key)",
            labels=["delayedOperation"],
        )
        delayed = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_numdelayedoperations",
            "Operations waiting on the purgatory's timer (its pending timer tasks)",
            labels=["delayedOperation"],
        )
        for purgatory in self.state.purgatories:
            size.add_metric([purgatory.name], purgatory.watched)
            delayed.add_metric([purgatory.name], purgatory.delayed)
        yield size
        yield delayed

    def _throttles(self) -> Iterator[Metric]:
        quotas = self.state.quotas
        managers = (
            ()
            if quotas is None
            else (("produce", quotas.produce), ("fetch", quotas.fetch), ("request", quotas.request))
        )
        for name, manager in managers or (("produce", None), ("fetch", None), ("request", None)):
            family = CounterMetricFamily(
                f"kafka_server_{name}_throttle_time_ms",
                f"ms of {name} quota throttles given, per sensor (user, client id)",
                labels=["user", "client_id"],
            )
            if manager is not None:
                for (user, client_id), stats in list(manager.throttle_stats().items()):
                    family.add_metric([user, client_id], stats.total_ms)
            yield family


_LOG_FAMILIES: Final = (
    ("kafka_log_log_size", "Bytes of the log's segments"),
    ("kafka_log_log_numlogsegments", "Segments of the log"),
    ("kafka_log_log_logstartoffset", "The log start offset"),
    ("kafka_log_log_logendoffset", "The log end offset"),
)
_LAG_FAMILIES: Final = (
    ("kafka_consumergroup_current_offset", "The group's committed offset"),
    ("kafka_consumergroup_lag", "High watermark minus the group's committed offset, per "
     "partition with a replica here, for the groups this broker coordinates"),
)  # fmt: skip


def _escape(value: str) -> str:
    """A label value as the text format writes it."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


class PartitionFamilies:
    """The per-partition and per-group families (log size, segments, start and end offsets
    of every log here; committed offset and lag of every partition a group coordinated
    here has committed), written straight in the text format, a slice of
    :data:`SLICE` entries at a time with the event loop free in between: with 20,000
    partitions, building them as ``prometheus_client`` samples held the loop for over a
    second per scrape. They are not in the registry."""

    SLICE: Final = 1000

    def __init__(self, state: BrokerState) -> None:
        self.state = state

    async def render(self) -> str:
        state = self.state
        rows: list[list[str]] = [[] for _ in _LOG_FAMILIES]
        manager = state.log_manager
        # Two lists rather than 20,000 (key, value) tuples for the collector to track.
        tps = list(manager.logs) if manager is not None else []
        logs = list(manager.logs.values()) if manager is not None else []
        for start in range(0, len(logs), self.SLICE):
            if start:
                await asyncio.sleep(0)
            size, segments, first, last = rows
            stop = start + self.SLICE
            for tp, log_ in zip(tps[start:stop], logs[start:stop], strict=True):
                if log_.is_closed or log_.is_offline:
                    continue
                labels = f'{{topic="{tp.topic}",partition="{tp.partition}"}} '
                size.append(f"kafka_log_log_size{labels}{log_.size}\n")
                segments.append(f"kafka_log_log_numlogsegments{labels}{log_.number_of_segments}\n")
                first.append(f"kafka_log_log_logstartoffset{labels}{log_.log_start_offset}\n")
                last.append(f"kafka_log_log_logendoffset{labels}{log_.log_end_offset}\n")
        lag_rows = await self._lag()
        out: list[str] = []
        for (name, doc), lines in zip((*_LOG_FAMILIES, *_LAG_FAMILIES), (*rows, *lag_rows),
                                      strict=True):  # fmt: skip
            out.append(f"# HELP {name} {doc}\n# TYPE {name} gauge\n")
            out.extend(lines)
        return "".join(out)

    async def _lag(self) -> list[list[str]]:
        current: list[str] = []
        lag: list[str] = []
        coordinator = self.state.group_coordinator()
        rm = self.state.replica_manager
        if coordinator is None or rm is None or not coordinator.is_active:
            return [current, lag]
        partitions = rm.partitions
        done = 0
        for group_id, group in list(coordinator.group_manager.groups.items()):
            group_label = f'consumergroup="{_escape(group_id)}"'
            for tp, committed in list(group.all_offsets().items()):
                labels = f'{{{group_label},topic="{tp.topic}",partition="{tp.partition}"}} '
                offset = committed.offset
                current.append(f"kafka_consumergroup_current_offset{labels}{offset}\n")
                partition = partitions.get(tp)
                if partition is not None:
                    behind = max(partition.high_watermark - offset, 0)
                    lag.append(f"kafka_consumergroup_lag{labels}{behind}\n")
                done += 1
                if done % self.SLICE == 0:
                    await asyncio.sleep(0)
        return [current, lag]


class _Collector:
    """A registry entry calling ``collect``."""

    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Metric]:
        return self._collect()


class BrokerMetrics:
    """One broker's registry: the hot-path counts, the state collector and the process
    collector. ``registry`` is what the endpoint and the web console read."""

    def __init__(self, state: BrokerState) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.topic_stats = BrokerTopicStats()
        self.requests = RequestMetrics()
        self.broker_state = state  # the collector reads it; the broker fills it in
        self.collector = BrokerStateCollector(state)
        self.partition_families = PartitionFamilies(state)
        self.event_loop_lag_s = 0.0
        self._rendering: asyncio.Future[bytes] | None = None
        cache = state.metadata_cache
        self.registry.register(_Collector(lambda: self.topic_stats.collect(cache.contains_topic)))
        self.registry.register(_Collector(self.requests.collect))
        self.registry.register(self.collector)
        self.registry.register(_Collector(self._loop_lag))
        ProcessCollector(registry=self.registry)

    def _loop_lag(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "sluice_event_loop_lag_seconds",
            "How late a callback ran on the broker's event loop, measured at the last scrape",
            value=self.event_loop_lag_s,
        )

    async def measure_loop_lag(self) -> None:
        """How long a callback scheduled now waits for the event loop."""
        started = time.perf_counter()
        await asyncio.sleep(0)
        self.event_loop_lag_s = time.perf_counter() - started

    async def render(self) -> bytes:
        """The registry (``generate_latest``), then the per-partition families. Scrapes
        that arrive while one is being rendered share its text: one render at a time,
        however many scrapers."""
        rendering = self._rendering
        if rendering is None:
            rendering = self._rendering = asyncio.ensure_future(self._render())
            rendering.add_done_callback(self._rendered)
        return await asyncio.shield(rendering)

    async def _render(self) -> bytes:
        await self.measure_loop_lag()
        head = generate_latest(self.registry)
        return head + (await self.partition_families.render()).encode()

    def _rendered(self, rendering: asyncio.Future[bytes]) -> None:
        if self._rendering is rendering:
            self._rendering = None

    def cancel_render(self) -> None:
        """Stop a render in progress (the endpoint is stopping)."""
        if self._rendering is not None:
            self._rendering.cancel()


class MetricsEndpoint:
    """``GET /metrics`` (Prometheus' text format) on an :class:`HttpServer`."""

    def __init__(self, metrics: BrokerMetrics, name: str = "metrics") -> None:
        self.metrics = metrics
        router = Router()
        router.add("GET", "/metrics", self._metrics)
        router.add("GET", "/", self._index)
        self.server = HttpServer(name, router, max_connections=16, max_body_bytes=0)

    async def _metrics(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse(200, await self.metrics.render(), CONTENT_TYPE_PLAIN_0_0_4)

    async def _index(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse.text(200, "Sluice broker metrics: /metrics\n")

    async def start(self, host: str, port: int) -> None:
        await self.server.start(host, port)

    async def stop(self) -> None:
        await self.server.stop()
        self.metrics.cancel_render()

    @property
    def url(self) -> str:
        host = self.server.host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.server.port}/metrics"
