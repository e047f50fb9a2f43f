"""Offset planning for the ``sluice`` source: Spark's ``KafkaOffsetReader`` and the
rate limit, kept apart from Spark so they are plain functions over dicts.

:class:`OffsetReader` asks the brokers (through Sluice's consumer) which
partitions a subscription covers and where their logs start and end;
:func:`spread_limit` spreads ``maxOffsetsPerTrigger`` over partitions by lag;
:func:`check_progress` finds offsets that went backwards or partitions that vanished.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from sluice.client.consumer.consumer import Consumer, TopicPartition

from .options import EARLIEST, LATEST, OffsetMap, ReaderOptions, Subscription

__all__ = ["DataLossError", "OffsetReader", "check_progress", "resolve", "spread_limit"]

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
            config = {**self.options.consumer_config, "enable.auto.commit": "false"}
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

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close(autocommit=False)
            self._consumer = None


def resolve(
    spec: str | OffsetMap, tps: list[tuple[str, int]], reader: OffsetReader, what: str
) -> OffsetMap:
    """Concrete offsets for ``spec`` ("earliest", "latest" or a JSON map with -2/-1)."""
    if isinstance(spec, str):
        return reader.earliest(tps) if spec == "earliest" else reader.latest(tps)
    missing = sorted(set(tps) - set(spec))
    if missing and not reader.options.subscription.assigned:
        raise ValueError(f"{what} gives no offset for {missing}; give every partition one")
    unknown = sorted(set(spec) - set(tps))
    if unknown:
        raise ValueError(f"{what} names partitions that do not exist: {unknown}")
    need_earliest = [tp for tp in tps if spec.get(tp, EARLIEST) == EARLIEST]
    need_latest = [tp for tp in tps if spec.get(tp) == LATEST]
    out = {tp: spec[tp] for tp in tps if spec.get(tp, EARLIEST) >= 0}
    out.update(reader.earliest(need_earliest))
    out.update(reader.latest(need_latest))
    return out


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
