"""Offset planning for the ``sluice`` source: Spark's ``KafkaOffsetReader``,
``KafkaOffsetRangeCalculator`` and the micro-batch limits, kept apart from Spark so they
are plain functions over dicts.

:class:`OffsetReader` asks the brokers (through Sluice's consumer) which
partitions a subscription covers, where their logs start and end, and which offsets
timestamps fall on; :func:`resolve` turns a start or end option into offsets;
:func:`split_ranges` cuts offset ranges for ``minPartitions`` and
``maxRecordsPerPartition``; :func:`spread_limit` spreads ``maxOffsetsPerTrigger`` over
partitions by lag; :class:`TriggerDelay` holds micro-batches back for
``minOffsetsPerTrigger`` / ``maxTriggerDelay``; :func:`check_progress` finds offsets that
went backwards or partitions that vanished; :func:`offsets_behind_latest` is Spark's
lag metrics.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sluice.client.consumer.consumer import Consumer, TopicPartition

from .options import (
    EARLIEST,
    LATEST,
    ByTimestamp,
    OffsetMap,
    OffsetSpec,
    ReaderOptions,
    Subscription,
    offsets_from_json_dict,
)

__all__ = [
    "DataLossError",
    "OffsetReader",
    "TriggerDelay",
    "check_progress",
    "offsets_behind_latest",
    "resolve",
    "source_metrics",
    "split_ranges",
    "spread_limit",
]

Range = tuple[str, int, int, int]
"""``(topic, partition, start, end)``: the records ``[start, end)`` of one partition."""

log = logging.getLogger("sluice.spark")


class DataLossError(RuntimeError):
    """Offsets the query still had to read are gone (set failOnDataLoss=false to skip)."""


def data_loss(fail: bool, message: str, log_fn: Callable[[str], None] | None = None) -> None:
    """Raise :class:`DataLossError` when ``fail``, otherwise log and go on."""
    if fail:
        raise DataLossError(
            f"{message}. Some data may have been lost because it is no longer available in "
            "Sluice (retention, DeleteRecords) or the topic was deleted or recreated. If you "
            "want the query to go on anyway, set the source option failOnDataLoss to false."
        )
    (log_fn or log.warning)(f"{message}; failOnDataLoss=false, so the query skips ahead")


class OffsetReader:
    """Driver-side view of a subscription's partitions and their offset bounds.

    The consumer is opened on first use and dropped when pickled, so readers
    holding an ``OffsetReader`` stay picklable for Spark's Python workers."""

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._consumer: Consumer | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_consumer": None}

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            config = {**self.options.driver_config(), "enable.auto.commit": "false"}
            self._consumer = Consumer(config)
        return self._consumer

    def partitions(self) -> list[tuple[str, int]]:
        """The partitions the subscription covers now, sorted."""
        sub: Subscription = self.options.subscription
        if sub.assigned:
            return sorted(sub.assigned)
        topics = list(sub.topics) if sub.pattern is None else self.consumer.list_topics()
        out: list[tuple[str, int]] = []
        for topic in sorted(topics):
            if sub.matches(topic):
                out.extend((topic, p) for p in self.consumer.partitions_for(topic))
        return out

    def _offsets(self, tps: list[tuple[str, int]], latest: bool) -> OffsetMap:
        if not tps:
            return {}
        c = self.consumer
        found = c.end_offsets(tps) if latest else c.beginning_offsets(tps)
        out: OffsetMap = {}
        for tp in tps:
            offset = found.get(TopicPartition(*tp))
            if offset is None:
                raise RuntimeError(f"cannot get the {'end' if latest else 'start'} offset of {tp}")
            out[tp] = offset
        return out

    def earliest(self, tps: list[tuple[str, int]]) -> OffsetMap:
        return self._offsets(tps, latest=False)

    def latest(self, tps: list[tuple[str, int]]) -> OffsetMap:
        """End offsets: the high watermark, or the last stable offset with read_committed."""
        return self._offsets(tps, latest=True)

    def for_times(self, timestamps: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """The earliest offset at or after each timestamp (ListOffsets); partitions with no
        record that recent are left out."""
        if not timestamps:
            return {}
        found = self.consumer.offsets_for_times(
            {TopicPartition(*tp): ts for tp, ts in timestamps.items()}
        )
        out: dict[tuple[str, int], int] = {}
        for tp in timestamps:
            offset = found.get(TopicPartition(*tp))
            if offset is not None:
                out[tp] = offset
        return out

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close(autocommit=False)
            self._consumer = None


def resolve(
    spec: OffsetSpec, tps: list[tuple[str, int]], reader: OffsetReader, what: str
) -> OffsetMap:
    """Concrete offsets for ``spec``: "earliest", "latest", a JSON map with -2/-1, or
    timestamps (``what`` names the option; a start unless it begins with "ending")."""
    if isinstance(spec, str):
        return reader.earliest(tps) if spec == "earliest" else reader.latest(tps)
    if isinstance(spec, ByTimestamp):
        return _resolve_times(spec, tps, reader, what)
    _check_named(spec, tps, reader, what)
    # a partition left out (assign only) starts at earliest and ends at latest
    unnamed = LATEST if what.startswith("ending") else EARLIEST
    need_earliest = [tp for tp in tps if spec.get(tp, unnamed) == EARLIEST]
    need_latest = [tp for tp in tps if spec.get(tp, unnamed) == LATEST]
    out = {tp: spec[tp] for tp in tps if spec.get(tp, unnamed) >= 0}
    out.update(reader.earliest(need_earliest))
    out.update(reader.latest(need_latest))
    return out


def _check_named(
    spec: Mapping[tuple[str, int], int], tps: list[tuple[str, int]], reader: OffsetReader, what: str
) -> None:
    missing = sorted(set(tps) - set(spec))
    if missing and not reader.options.subscription.assigned:
        raise ValueError(f"{what} gives no offset for {missing}; give every partition one")
    unknown = sorted(set(spec) - set(tps))
    if unknown:
        raise ValueError(f"{what} names partitions that do not exist: {unknown}")


def _resolve_times(
    spec: ByTimestamp, tps: list[tuple[str, int]], reader: OffsetReader, what: str
) -> OffsetMap:
    """Spark's timestamp lookup: no record that recent is an error for a start (or the
    latest offset with ``startingOffsetsByTimestampStrategy=latest``), the latest offset
    for an end. A partition the JSON leaves out (``assign`` only) starts at earliest."""
    if spec.everywhere is not None:
        wanted = {tp: spec.everywhere for tp in tps}
    else:
        _check_named(spec.per_partition, tps, reader, what)
        wanted = {tp: spec.per_partition[tp] for tp in tps if tp in spec.per_partition}
    out = reader.for_times(wanted)
    unmatched = sorted(set(wanted) - set(out))
    ending = what.startswith("ending")
    if unmatched and not ending and not spec.latest_when_unmatched:
        tp = unmatched[0]
        raise ValueError(
            f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and timestamp "
            f"{wanted[tp]}. (set startingOffsetsByTimestampStrategy=latest to start such "
            "partitions at the latest offset instead)"
        )
    unnamed = [tp for tp in tps if tp not in wanted]
    out.update(reader.latest(unmatched + unnamed if ending else unmatched))
    if not ending:
        out.update(reader.earliest(unnamed))
    return out


def _round_half_up(x: float) -> int:
    return int(x + 0.5)


def _divide(r: Range, parts: int) -> list[Range]:
    """``r`` in ``parts`` pieces of nearly equal size (the last ones take the remainder)."""
    topic, partition, start, end = r
    out: list[Range] = []
    remaining = end - start
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        out.append((topic, partition, start, min(start + size, end)))
        start = min(start + size, end)
    return [piece for piece in out if piece[3] > piece[2]]


def split_ranges(
    ranges: Iterable[Range], min_partitions: int | None, max_records: int | None
) -> list[Range]:
    """Spark's ``KafkaOffsetRangeCalculator``: empty ranges dropped; with
    ``maxRecordsPerPartition`` every range cut into pieces of at most that many offsets;
    then, if there are still fewer than ``minPartitions``, the large ranges are cut in
    proportion to their share of all offsets, so that there are about ``minPartitions``
    (ranges that would get one piece are left alone and do not count in the share)."""
    out = [r for r in ranges if r[3] > r[2]]
    if max_records is not None:
        out = [p for r in out for p in _divide(r, -(-(r[3] - r[2]) // max_records))]
    if min_partitions is None or len(out) >= min_partitions:
        return out
    total = sum(r[3] - r[2] for r in out)

    def parts_of(size: int, of: int, wanted: int) -> int:
        return max(_round_half_up(size / of * wanted), 1)

    whole = [parts_of(r[3] - r[2], total, min_partitions) == 1 for r in out]
    whole_size = sum(r[3] - r[2] for r, keep in zip(out, whole, strict=True) if keep)
    split_wanted = max(min_partitions - sum(whole), 1)
    split_total = total - whole_size
    return [
        piece
        for r, keep in zip(out, whole, strict=True)
        for piece in ([r] if keep else _divide(r, parts_of(r[3] - r[2], split_total, split_wanted)))
    ]


class TriggerDelay:
    """``minOffsetsPerTrigger`` with ``maxTriggerDelay`` (Spark's ``delayBatch``): a
    micro-batch waits until at least ``min_offsets`` offsets are available, or until
    ``max_delay_ms`` have passed since the last micro-batch was let through (the first
    one always is). ``clock_ms`` is wall-clock milliseconds (tests pass their own)."""

    def __init__(
        self, min_offsets: int, max_delay_ms: int, clock_ms: Callable[[], float] | None = None
    ) -> None:
        self.min_offsets = min_offsets
        self.max_delay_ms = max_delay_ms
        self.clock_ms = clock_ms or (lambda: time.time() * 1000)
        self.last_trigger_ms = 0.0

    def delay(self, available: int) -> bool:
        """Whether to hold the micro-batch back, given the offsets available to it."""
        now = self.clock_ms()
        if now - self.last_trigger_ms >= self.max_delay_ms:
            self.last_trigger_ms = now
            return False
        if available < self.min_offsets:
            return True
        self.last_trigger_ms = now
        return False


def offsets_behind_latest(
    consumed: Mapping[tuple[str, int], int], latest: Mapping[tuple[str, int], int]
) -> dict[str, str]:
    """Spark's Kafka source metrics: how many offsets each partition's latest offset is
    ahead of the query's, as ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and
    ``avgOffsetsBehindLatest`` (strings, as in ``StreamingQueryProgress``); empty without
    partitions."""
    behind = [latest[tp] - consumed.get(tp, 0) for tp in latest]
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": str(sum(behind) / len(behind)),
    }


def source_metrics(source: Mapping[str, Any]) -> dict[str, str]:
    """:func:`offsets_behind_latest` for one entry of a streaming query's progress
    (``query.lastProgress["sources"][i]``): its ``endOffset`` (what the micro-batch
    read up to) against its ``latestOffset`` (what the source saw available)."""

    def offsets(value: Any) -> OffsetMap:
        if value is None or value == "null":
            return {}
        raw = json.loads(value) if isinstance(value, str) else value
        return offsets_from_json_dict(raw) if isinstance(raw, dict) else {}

    return offsets_behind_latest(offsets(source["endOffset"]), offsets(source["latestOffset"]))


def spread_limit(start: Mapping[tuple[str, int], int], latest: OffsetMap, limit: int) -> OffsetMap:
    """End offsets that admit at most ``limit`` records, shared out in proportion to
    each partition's lag (the remainder goes to the partitions with the most lag)."""
    lags = {tp: max(latest[tp] - start.get(tp, latest[tp]), 0) for tp in latest}
    total = sum(lags.values())
    if total <= limit:
        return dict(latest)
    shares = {tp: lag * limit // total for tp, lag in lags.items()}
    left = limit - sum(shares.values())
    for tp in sorted(lags, key=lambda t: (-(lags[t] - shares[t]), t)):
        if left <= 0:
            break
        if shares[tp] < lags[tp]:
            shares[tp] += 1
            left -= 1
    return {tp: start.get(tp, latest[tp]) + shares[tp] for tp in latest}


def check_progress(
    start: Mapping[tuple[str, int], int], latest: OffsetMap, fail: bool
) -> OffsetMap:
    """Compare the last planned offsets with the log ends now: a partition whose end
    went below where the query is, or that disappeared, is data loss. Returns the
    start offsets to plan from (moved back to the log end when not failing)."""
    fixed = dict(start)
    for tp, offset in sorted(start.items()):
        if tp not in latest:
            data_loss(fail, f"partition {tp[0]}-{tp[1]} was at offset {offset} and is gone")
            del fixed[tp]
        elif latest[tp] < offset:
            data_loss(
                fail,
                f"partition {tp[0]}-{tp[1]}: the log ends at {latest[tp]}, before offset "
                f"{offset} the query had reached (offsets went backwards)",
            )
            fixed[tp] = latest[tp]
    return fixed
