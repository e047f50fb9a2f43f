"""The accumulator's value types and small helpers (kept apart to keep it readable)."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from sluice.base.clock import Clock
from sluice.protocol.records.compression import CompressionType

from .partitioner import BuiltInPartitioner
from .producer_batch import FutureRecordMetadata, ProducerBatch

if TYPE_CHECKING:
    from .cluster import Node

__all__ = [
    "UNKNOWN_PARTITION",
    "AccumulatorConfig",
    "IncompleteBatches",
    "PartitionDeque",
    "ReadyCheckResult",
    "RecordAppendResult",
    "TopicInfo",
    "all_batches_full",
    "insert_in_sequence_order",
]

UNKNOWN_PARTITION = -1
"""A record for the sticky partitioner to place (Kafka's RecordMetadata.UNKNOWN_PARTITION)."""


class RecordAppendResult(NamedTuple):
    """What ``append`` did: the record's future, and whether to wake the Sender."""

    future: FutureRecordMetadata
    batch_is_full: bool
    new_batch_created: bool
    appended_bytes: int = 0


class ReadyCheckResult(NamedTuple):
    """Nodes with sendable data, when to check again, topics lacking a leader."""

    ready_nodes: set[Node]
    next_ready_check_delay_ms: int
    unknown_leader_topics: set[str]


@dataclass(frozen=True)
class AccumulatorConfig:
    """The producer settings the accumulator uses (Kafka's names, in snake case)."""

    batch_size: int = 16384
    compression: CompressionType = CompressionType.NONE
    compression_level: int | None = None
    linger_ms: int = 5
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    delivery_timeout_ms: int = 120000
    adaptive_partitioning: bool = True
    backoff_jitter: float = 0.2


class PartitionDeque(deque[ProducerBatch]):
    """A partition's batches and the lock guarding them (Java synchronizes on the deque)."""

    __slots__ = ("lock",)

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()


class TopicInfo:
    """A topic's deques by partition and its sticky partitioner (Kafka's TopicInfo)."""

    __slots__ = ("batches", "partitioner")

    def __init__(self, topic: str, sticky_batch_size: int) -> None:
        self.partitioner = BuiltInPartitioner(topic, sticky_batch_size)
        self.batches: dict[int, PartitionDeque] = {}


class IncompleteBatches:
    """Batches created and not yet completed: what flush waits for and close aborts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: set[ProducerBatch] = set()

    def add(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._batches.add(batch)

    def remove(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._batches.discard(batch)

    def copy_all(self) -> list[ProducerBatch]:
        with self._lock:
            return list(self._batches)

    def is_empty(self) -> bool:
        with self._lock:
            return not self._batches

    def await_all(self, clock: Clock, timeout_ms: int | None) -> bool:
        """Wait for the batches incomplete now; False if ``timeout_ms`` ran out."""
        deadline = None if timeout_ms is None else clock.now_ms() + timeout_ms
        for batch in self.copy_all():
            result = batch.produce_future
            if deadline is None:
                result.wait()
                continue
            remaining = (deadline - clock.now_ms()) / 1000
            if not (result.completed() or (remaining > 0 and result.wait(remaining))):
                return False
        return True


def all_batches_full(dq: PartitionDeque) -> bool:
    """Whether the sticky partitioner may switch away from this partition."""
    return not dq or dq[-1].is_full()


def insert_in_sequence_order(dq: PartitionDeque, batch: ProducerBatch) -> None:
    """Re-enqueue ``batch`` ahead of later sequences (batches without one come last)."""
    first = dq[0] if dq else None
    if first is not None and first.has_sequence() and first.base_sequence < batch.base_sequence:
        ordered: list[ProducerBatch] = []
        while dq and dq[0].has_sequence() and dq[0].base_sequence < batch.base_sequence:
            ordered.append(dq.popleft())
        dq.appendleft(batch)
        for earlier in reversed(ordered):
            dq.appendleft(earlier)
    else:
        dq.appendleft(batch)
