"""``DelayedTxnExpiration``: the timer side of transaction.timeout.ms."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.coordinator.transaction.metadata import TransactionMetadata, TransactionState
from sluice.purgatory import DelayedOperation

if TYPE_CHECKING:
    from sluice.coordinator.transaction.coordinator import TransactionCoordinator

__all__ = ["DelayedTxnExpiration"]

_S = TransactionState


class DelayedTxnExpiration(DelayedOperation):
    """Fires when an open transaction outlives its timeout; completes (harmlessly) as soon
    as that transaction ended."""

    __slots__ = ("coordinator", "producer_epoch", "producer_id", "start", "transactional_id")

    def __init__(
        self, coordinator: TransactionCoordinator, meta: TransactionMetadata, delay_ms: int
    ) -> None:
        super().__init__(max(delay_ms, 0))
        self.coordinator = coordinator
        self.transactional_id = meta.transactional_id
        self.producer_id = meta.producer_id
        self.producer_epoch = meta.producer_epoch
        self.start = meta.txn_start_timestamp

    def _still_open(self) -> bool:
        meta = self.coordinator.transactions.get(self.transactional_id)
        return (
            meta is not None
            and meta.state is _S.ONGOING
            and meta.producer_id == self.producer_id
            and meta.producer_epoch == self.producer_epoch
            and meta.txn_start_timestamp == self.start
        )

    def try_complete(self) -> bool:
        return False if self._still_open() else self.force_complete()

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        if self._still_open():
            self.coordinator.abort_timed_out_transaction(self.transactional_id)
