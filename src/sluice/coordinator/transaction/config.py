"""The transaction coordinator's settings, its topic's name and the marker writer it
drives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from sluice.base import TopicPartition

__all__ = ["TRANSACTION_STATE_TOPIC_NAME", "TransactionConfig", "TxnMarkerWriter"]

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"


class TransactionConfig:
    """The coordinator's settings (Kafka's names): transaction.max.timeout.ms,
    transaction.state.log.num.partitions and transactional.id.expiration.ms."""

    __slots__ = ("num_partitions", "transaction_max_timeout_ms", "transactional_id_expiration_ms")

    def __init__(
        self,
        transaction_max_timeout_ms: int = 900_000,
        num_partitions: int = 50,
        transactional_id_expiration_ms: int = 604_800_000,
    ) -> None:
        self.transaction_max_timeout_ms = transaction_max_timeout_ms
        self.num_partitions = num_partitions
        self.transactional_id_expiration_ms = transactional_id_expiration_ms


class TxnMarkerWriter(Protocol):
    """Writes a COMMIT or ABORT marker to each partition (retrying retriable errors;
    a partition that no longer exists counts as written) and calls ``done`` once all are."""

    def write_markers(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
        partitions: set[TopicPartition], done: Callable[[], None],
    ) -> None: ...  # fmt: skip
