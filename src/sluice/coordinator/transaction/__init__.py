"""Kafka's transaction coordinator (sans I/O): transactional ids, their producer ids and
epochs, the transaction state machine and its records in ``__transaction_state``."""

from sluice.coordinator.transaction.coordinator import (
    TRANSACTION_STATE_TOPIC_NAME,
    DelayedTxnExpiration,
    TransactionConfig,
    TransactionCoordinator,
    TxnMarkerWriter,
)
from sluice.coordinator.transaction.metadata import TransactionMetadata, TransactionState
from sluice.coordinator.transaction.records import build_marker_batch

__all__ = [
    "TRANSACTION_STATE_TOPIC_NAME",
    "DelayedTxnExpiration",
    "TransactionConfig",
    "TransactionCoordinator",
    "TransactionMetadata",
    "TransactionState",
    "TxnMarkerWriter",
    "build_marker_batch",
]
