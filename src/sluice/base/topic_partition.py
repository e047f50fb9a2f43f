"""The topic-partition pair, the one definition used by the broker, the clients and the
controller."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


class TopicPartition(NamedTuple):
    """A topic-partition: the key of a partition's log and of its delayed operations."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
