"""murmur2 (Java's vectors) and KIP-794's sticky BuiltInPartitioner."""

from __future__ import annotations

import warnings

import pytest

from sluice.client.producer.partitioner import (
    BuiltInPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)
from support.mock_client import NODE1, cluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

JAVA_VECTORS = {  # Kafka's UtilsTest.testMurmur2
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS.items())
def test_murmur2_matches_the_java_client(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_murmur2_agrees_with_kafka_python_on_every_length() -> None:
    for n in range(70):
        key = bytes((i * 37 + n) & 0xFF for i in range(n))
        assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


def test_partition_for_key() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert partition_for_key(b"foobar", 10) == to_positive(-790332482) % 10


def test_sticky_partition_switches_after_batch_size_bytes(randoms: list[int]) -> None:
    c = cluster(("t", 0, NODE1), ("t", 1, NODE1), ("t", 2, None))
    partitioner = BuiltInPartitioner("t", sticky_batch_size=100)
    randoms.extend([0, 1])
    info = partitioner.peek_current_partition_info(c)
    assert info.partition == 0  # only partitions 0 and 1 have a leader
    partitioner.update_partition_info(info, 60, c)
    assert partitioner.peek_current_partition_info(c) is info
    partitioner.update_partition_info(info, 60, c)  # 120 >= 100: switch
    switched = partitioner.peek_current_partition_info(c)
    assert switched.partition == 1
    assert partitioner.is_partition_changed(info)
    assert not partitioner.is_partition_changed(switched)


def test_switch_waits_for_a_full_batch_but_not_past_twice_the_size(randoms: list[int]) -> None:
    c = cluster(("t", 0, NODE1), ("t", 1, NODE1))
    partitioner = BuiltInPartitioner("t", sticky_batch_size=100)
    randoms.extend([0, 1])
    info = partitioner.peek_current_partition_info(c)
    partitioner.update_partition_info(info, 150, c, enable_switch=False)
    assert partitioner.peek_current_partition_info(c) is info
    partitioner.update_partition_info(info, 60, c, enable_switch=False)  # 210 >= 200
    assert partitioner.peek_current_partition_info(c).partition == 1


def test_adaptive_partitioning_prefers_short_queues(randoms: list[int]) -> None:
    c = cluster(("t", 0, NODE1), ("t", 1, NODE1), ("t", 2, NODE1))
    partitioner = BuiltInPartitioner("t", sticky_batch_size=1)
    partitioner.update_partition_load_stats([5, 0, 5], [0, 1, 2])
    stats = partitioner.partition_load_stats
    assert stats is not None
    assert stats.cumulative_frequency_table == [1, 7, 8]  # weights 1, 6, 1
    randoms.extend([0, 1, 6, 7])
    assert [partitioner.next_partition(c) for _ in range(4)] == [0, 1, 1, 2]
    partitioner.update_partition_load_stats([3, 3, 3], [0, 1, 2])
    assert partitioner.partition_load_stats is None  # equal queues: uniform
