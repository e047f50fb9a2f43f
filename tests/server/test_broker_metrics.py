"""The metrics' own bookkeeping (sluice.server.broker_metrics), without a broker: request
names, the latency histograms' buckets and sums, per-topic counts, and the per-partition
families written by hand, checked by prometheus_client's own parser."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sluice.base import TopicPartition
from sluice.server.broker_metrics import (
    BrokerMetrics,
    BrokerState,
    BrokerTopicStats,
    PartitionFamilies,
    RequestMetrics,
    request_name,
)

MS = 1_000_000


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


class _Registered:
    def __init__(self, collect: Any) -> None:
        self.collect = collect


def test_request_names_are_kafkas() -> None:
    assert request_name(0) == "Produce"
    assert request_name(1) == "Fetch"
    assert request_name(2) == "ListOffsets"
    assert request_name(18) == "ApiVersions"
    assert request_name(23) == "OffsetForLeaderEpoch"
    assert request_name(999) == "Unknown999"


def test_request_latencies_land_in_their_buckets() -> None:
    metrics = RequestMetrics()
    metrics.record(0, queue_ns=0, local_ns=3 * MS, remote_ns=40 * MS, send_ns=MS // 100)
    metrics.record(0, queue_ns=MS // 10, local_ns=2 * MS, remote_ns=0, send_ns=0)
    metrics.record(1, queue_ns=0, local_ns=MS, remote_ns=500 * MS, send_ns=60_000 * MS)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Registered(metrics.collect))  # type: ignore[arg-type]
    got = samples(generate_latest(registry).decode())

    def value(name: str, request: str, le: str | None = None) -> float:
        labels = [("request", request)] + ([("le", le)] if le else [])
        return got[(f"kafka_network_requestmetrics_{name}", tuple(sorted(labels)))]

    assert value("requests_total", "Produce") == 2
    assert value("requests_total", "Fetch") == 1
    assert metrics.count(0) == 2 and metrics.count(3) == 0
    assert value("localtimems_bucket", "Produce", "2.5") == 1  # 2 ms
    assert value("localtimems_bucket", "Produce", "5.0") == 2  # and 3 ms
    assert value("localtimems_sum", "Produce") == 5.0
    assert value("remotetimems_bucket", "Produce", "0.05") == 1  # answered at once
    assert value("remotetimems_bucket", "Produce", "50.0") == 2
    assert value("requestqueuetimems_bucket", "Produce", "0.1") == 2
    assert value("totaltimems_count", "Produce") == 2
    assert value("totaltimems_sum", "Produce") == 3 + 40 + 0.01 + 0.1 + 2
    # Beyond the last bound: only +Inf holds it.
    assert value("responsesendtimems_bucket", "Fetch", "30000.0") == 0
    assert value("responsesendtimems_bucket", "Fetch", "+Inf") == 1


def test_topic_counts_and_deleted_topics() -> None:
    stats = BrokerTopicStats()
    stats.record_append("a", 10, 1000)
    stats.record_append("a", 5, 500)
    stats.topic("a").bytes_out += 700
    stats.record_append("gone", 1, 10)
    families = {f.name: f for f in stats.collect(lambda topic: topic != "gone")}
    messages = families["kafka_server_brokertopicmetrics_messagesin"].samples
    assert [(s.labels, s.value) for s in messages] == [({"topic": "a"}, 15)]
    assert families["kafka_server_brokertopicmetrics_bytesin"].samples[0].value == 1500
    assert families["kafka_server_brokertopicmetrics_bytesout"].samples[0].value == 700
    assert "gone" not in stats.topics  # forgotten with its topic, as Kafka removes them


def _log(size: int, segments: int, start: int, end: int, offline: bool = False) -> Any:
    return SimpleNamespace(size=size, number_of_segments=segments, log_start_offset=start,
                           log_end_offset=end, is_offline=offline, is_closed=False)  # fmt: skip


def test_partition_families_parse_and_escape_group_ids() -> None:
    logs = {TopicPartition("t", p): _log(100 * p, 1 + p, p, 10 + p) for p in range(2500)}
    logs[TopicPartition("bad", 0)] = _log(1, 1, 0, 1, offline=True)
    partition = SimpleNamespace(high_watermark=50)
    offsets = {TopicPartition("t", 7): SimpleNamespace(offset=20),
               TopicPartition("u", 0): SimpleNamespace(offset=3)}  # fmt: skip
    group = SimpleNamespace(all_offsets=lambda: offsets)
    coordinator = SimpleNamespace(is_active=True, group_manager=SimpleNamespace(
        groups={'odd "group"\\\n': group}))  # fmt: skip
    state = BrokerState(
        0, metadata_cache=None,  # type: ignore[arg-type]
        replica_manager=SimpleNamespace(partitions={TopicPartition("t", 7): partition}),  # type: ignore[arg-type]
        log_manager=SimpleNamespace(logs=logs),  # type: ignore[arg-type]
        group_coordinator=lambda: coordinator,  # type: ignore[arg-type,return-value]
    )  # fmt: skip
    text = asyncio.run(PartitionFamilies(state).render())
    got = samples(text)
    assert got[("kafka_log_log_size", (("partition", "3"), ("topic", "t")))] == 300
    assert got[("kafka_log_log_numlogsegments", (("partition", "2499"), ("topic", "t")))] == 2500
    assert got[("kafka_log_log_logendoffset", (("partition", "0"), ("topic", "t")))] == 10
    assert not any(labels == (("partition", "0"), ("topic", "bad")) for _, labels in got)
    assert sum(1 for name, _ in got if name == "kafka_log_log_logstartoffset") == 2500
    labels = (("consumergroup", 'odd "group"\\\n'), ("partition", "7"), ("topic", "t"))
    assert got[("kafka_consumergroup_lag", labels)] == 30
    assert got[("kafka_consumergroup_current_offset", labels)] == 20
    # No replica of u-0 here: its committed offset is known, its lag is not.
    assert sum(1 for name, _ in got if name == "kafka_consumergroup_lag") == 1
    assert sum(1 for name, _ in got if name == "kafka_consumergroup_current_offset") == 2


def test_concurrent_scrapes_share_one_render(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = SimpleNamespace(contains_topic=lambda topic: True)
    metrics = BrokerMetrics(BrokerState(0, metadata_cache=cache))  # type: ignore[arg-type]
    renders = []
    original = PartitionFamilies.render

    async def counted(self: PartitionFamilies) -> str:
        renders.append(1)
        await asyncio.sleep(0.01)
        return await original(self)

    monkeypatch.setattr(PartitionFamilies, "render", counted)

    async def scrapes() -> list[bytes]:
        return list(await asyncio.gather(*(metrics.render() for _ in range(5))))

    texts = asyncio.run(scrapes())
    assert len(renders) == 1 and len(set(texts)) == 1
    assert b"kafka_server_replicamanager_partitioncount 0.0" in texts[0]
    asyncio.run(scrapes())
    assert len(renders) == 2  # the next scrape renders afresh
