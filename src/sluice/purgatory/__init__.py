"""Delayed operations and the purgatory that holds them (DESIGN.md section 3)."""

from sluice.base import TopicPartition
from sluice.purgatory.operation import DelayedOperation
from sluice.purgatory.purgatory import DelayedOperationPurgatory, PurgatoryFactory, Watchers

__all__ = [
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "PurgatoryFactory",
    "TopicPartition",
    "Watchers",
]
