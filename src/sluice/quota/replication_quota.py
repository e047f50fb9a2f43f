"""Replication throttles as Kafka's ``ReplicationQuotaManager`` applies them (KIP-73).

A broker has three: the leader side (what it sends to followers), the follower side
(what its replica fetchers take) and the copy into future logs when a replica moves
between log directories. Each is one byte rate for everything it throttles, measured
as a client quota is (:class:`~sluice.quota.stats.Rate` over
``replication.quota.window.num`` windows of ``replication.quota.window.size.seconds``)
against a bound in bytes/s (``leader.replication.throttled.rate``,
``follower.replication.throttled.rate``,
``replica.alter.log.dirs.io.max.bytes.per.second``; unbounded by default).

Which partitions a side throttles comes from the topics'
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``:
``*`` (every partition), or ``partition:broker`` entries of which a broker takes those
naming itself (:func:`throttled_partitions`). A throttled replica that is out of the ISR
is held back while the measured rate is over the bound: the leader sends it nothing
that round, the follower leaves it out of its fetch. What is sent or fetched for a
throttled partition is recorded, so the rate stays near the bound; replicas in the ISR
are never held back, so acks=all writes never wait on a throttle.

Plain objects on a millisecond clock: no locking, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sluice import config
from sluice.base import TopicPartition
from sluice.base.clock import Clock
from sluice.quota.stats import MetricConfig, Rate

__all__ = [
    "ALL_PARTITIONS",
    "UNBOUNDED",
    "ReplicationQuotaManager",
    "parse_throttled_replicas",
    "throttled_partitions",
]

INT32_MAX = (1 << 31) - 1
UNBOUNDED = (1 << 63) - 1
"""The default bound (Kafka's ``Long.MAX_VALUE``): no throttle."""

ALL_PARTITIONS: frozenset[int] | None = None
"""``*``: every partition of the topic is throttled."""


def parse_throttled_replicas(raw: str) -> list[str]:
    """The entries of a ``*.replication.throttled.replicas`` value; a value that is
    neither ``*`` nor ``partition:broker`` entries (stored before validation) throttles
    nothing."""
    try:
        return config.parse_throttled_replicas("", raw)
    except config.ConfigError:
        return []


def throttled_partitions(entries: Iterable[str], broker_id: int) -> frozenset[int] | None:
    """The partitions of a topic that ``broker_id`` throttles, from a validated
    ``*.replication.throttled.replicas`` value: None for ``*``, else the partitions of
    the ``partition:broker`` entries naming this broker."""
    items = list(entries)
    if items == ["*"]:
        return ALL_PARTITIONS
    out = set()
    for item in items:
        partition, _, broker = item.partition(":")
        if int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuotaManager:
    """One side's byte rate, its bound and the partitions it throttles.

    ``topic_entries(topic)`` gives the topic's raw throttled-replicas value for this
    side ("" when unset); it is parsed once per distinct value."""

    def __init__(
        self,
        clock: Clock,
        broker_id: int,
        topic_entries: Callable[[str], str] = lambda topic: "",
        samples: int = 11,
        window_s: int = 1,
    ) -> None:
        self.clock = clock
        self.broker_id = broker_id
        self.topic_entries = topic_entries
        self._rate = Rate(MetricConfig(samples, window_s * 1000))
        self.window = (samples, window_s)
        self.bound = UNBOUNDED
        self._parsed: dict[str, frozenset[int] | None] = {}

    def configure(self, samples: int, window_s: int) -> None:
        """New windows (``replication.quota.window.*``); what was measured is dropped."""
        self._rate = Rate(MetricConfig(samples, window_s * 1000))
        self.window = (samples, window_s)

    def update_bound(self, bytes_per_second: int) -> None:
        self.bound = bytes_per_second

    @property
    def is_bounded(self) -> bool:
        return self.bound < UNBOUNDED

    @property
    def window_bytes(self) -> int:
        """What the bound lets through in one window: the most a throttled replica is
        sent or fetched at a time, so that one large fetch cannot pass the bound by
        far before the rate sees it (``replica.fetch.max.bytes`` is 8 MiB here)."""
        return max(1, min(self.bound * self.window[1], INT32_MAX))

    def is_quota_exceeded(self) -> bool:
        """Whether the measured rate is over the bound (never when unbounded)."""
        if self.bound >= UNBOUNDED:
            return False
        return self._rate.measure(self.clock.milliseconds()) > self.bound

    def record(self, size: int) -> None:
        self._rate.record(size, self.clock.milliseconds())

    def rate(self) -> float:
        """The measured bytes/s now."""
        return self._rate.measure(self.clock.milliseconds())

    def is_throttled(self, tp: TopicPartition) -> bool:
        raw = self.topic_entries(tp.topic)
        if not raw:
            return False
        try:
            partitions = self._parsed[raw]
        except KeyError:
            if len(self._parsed) > 1024:
                self._parsed.clear()
            partitions = self._parsed[raw] = throttled_partitions(
                parse_throttled_replicas(raw), self.broker_id
            )
        return partitions is None or tp.partition in partitions

    def holds_back(self, tp: TopicPartition, in_sync: bool) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: an out-of-ISR
        throttled replica while the rate is over the bound."""
        return not in_sync and self.is_quota_exceeded() and self.is_throttled(tp)
