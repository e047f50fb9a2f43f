"""The Java client's built-in partitioner: murmur2 for keys, sticky for the rest.

* Keyed records go to ``to_positive(murmur2(key)) % num_partitions``, bit for bit
  the Java client's ``Utils.murmur2`` (and librdkafka's ``murmur2_random`` for
  keys), so Sluice, Java and confluent-kafka producers agree on every key.
* Records without a key (or with ``partitioner.ignore.keys``) use KIP-794's
  uniform sticky partitioner (``BuiltInPartitioner``): all of them go to one
  partition until ``batch.size`` bytes were produced to it, then to another,
  chosen at random among partitions with a leader, weighted by how short their
  queues are when ``partitioner.adaptive.partitioning.enable`` is on (the
  accumulator's :meth:`ready` feeds the queue sizes in).
"""

from __future__ import annotations

import bisect
import random
import struct
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from sluice.client.net.cluster import Cluster

__all__ = [
    "BuiltInPartitioner",
    "PartitionLoadStats",
    "StickyPartitionInfo",
    "murmur2",
    "partition_for_key",
    "to_positive",
]

_M: Final = 0x5BD1E995
_SEED: Final = 0x9747B28C
_MASK: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Java's ``Utils.murmur2``: a signed 32-bit MurmurHash2 of ``data``."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    length4 = length // 4
    for k in struct.unpack_from(f"<{length4}I", data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & ~3
    extra = length & 3
    if extra == 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java client picks for a keyed record."""
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitionInfo:
    """The current sticky partition and the bytes produced to it so far."""

    __slots__ = ("partition", "produced_bytes")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.produced_bytes = 0


class PartitionLoadStats:
    """A cumulative frequency table of partition weights (inverse queue sizes)."""

    __slots__ = ("cumulative_frequency_table", "length", "partition_ids")

    def __init__(self, cumulative_frequency_table: list[int], partition_ids: list[int]) -> None:
        self.cumulative_frequency_table = cumulative_frequency_table
        self.partition_ids = partition_ids
        self.length = len(partition_ids)


class BuiltInPartitioner:
    """KIP-794 sticky partitioning for one topic (Kafka's ``BuiltInPartitioner``)."""

    mock_random: Callable[[], int] | None = None
    """Tests may set this to make partition switches deterministic."""

    def __init__(self, topic: str, sticky_batch_size: int) -> None:
        if sticky_batch_size < 1:
            raise ValueError("sticky_batch_size must be at least 1")
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        self.partition_load_stats: PartitionLoadStats | None = None
        self.sticky_partition_info: StickyPartitionInfo | None = None
        """The current sticky partition (None until the first unkeyed record)."""
        self._lock = threading.Lock()

    def _random(self) -> int:
        mock = BuiltInPartitioner.mock_random
        return mock() if mock is not None else random.getrandbits(31)

    def next_partition(self, cluster: Cluster) -> int:
        """Pick the next sticky partition: uniform over partitions with a leader, or
        weighted by the load stats when adaptive partitioning has them."""
        rnd = self._random()
        stats = self.partition_load_stats
        if stats is None:
            available = cluster.available_partitions_for_topic(self.topic)
            if available:
                return available[rnd % len(available)].partition
            count = cluster.partition_count_for_topic(self.topic) or 1
            return rnd % count
        table = stats.cumulative_frequency_table
        weighted = rnd % table[stats.length - 1]
        index = bisect.bisect_right(table, weighted, 0, stats.length)
        return stats.partition_ids[index]

    def peek_current_partition_info(self, cluster: Cluster) -> StickyPartitionInfo:
        """The current sticky partition, choosing one if there is none yet."""
        info = self.sticky_partition_info
        if info is not None:
            return info
        with self._lock:
            if self.sticky_partition_info is None:
                self.sticky_partition_info = StickyPartitionInfo(self.next_partition(cluster))
            return self.sticky_partition_info

    def is_partition_changed(self, info: StickyPartitionInfo | None) -> bool:
        """Whether another thread switched partitions since ``info`` was peeked."""
        return info is not None and self.sticky_partition_info is not info

    def update_partition_info(
        self,
        info: StickyPartitionInfo | None,
        appended_bytes: int,
        cluster: Cluster,
        enable_switch: bool = True,
    ) -> None:
        """Count bytes produced to the sticky partition; switch after batch.size bytes.

        The switch waits while the partition's last batch is not full (to avoid
        fractional batches), but not past twice batch.size.
        """
        if info is None:
            return
        info.produced_bytes += appended_bytes  # called under the partition's deque lock
        produced = info.produced_bytes
        if (produced >= self.sticky_batch_size and enable_switch) or (
            produced >= self.sticky_batch_size * 2
        ):
            self.sticky_partition_info = StickyPartitionInfo(self.next_partition(cluster))

    def update_partition_load_stats(
        self, queue_sizes: list[int] | None, partition_ids: list[int]
    ) -> None:
        """Turn per-partition queue sizes into inverse weights (None: uniform)."""
        if not queue_sizes or len(queue_sizes) < 2:
            self.partition_load_stats = None
            return
        max_size_plus1 = max(queue_sizes) + 1
        if all(size == queue_sizes[0] for size in queue_sizes):
            self.partition_load_stats = None
            return
        table: list[int] = []
        total = 0
        for size in queue_sizes:
            total += max_size_plus1 - size
            table.append(total)
        self.partition_load_stats = PartitionLoadStats(table, list(partition_ids))
