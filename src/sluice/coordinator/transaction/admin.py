"""The transaction coordinator's administrative side: transactional id expiration and
the DescribeTransactions / ListTransactions answers (mixed into ``TransactionCoordinator``)."""

from __future__ import annotations

import logging

from sluice.base.clock import Clock
from sluice.coordinator.group.manager import GroupLog
from sluice.coordinator.group.records import build_batch
from sluice.coordinator.transaction.config import TransactionConfig
from sluice.coordinator.transaction.metadata import TransactionMetadata, TransactionState
from sluice.coordinator.transaction.records import txn_key
from sluice.protocol import ErrorCode

__all__ = ["TransactionAdminSupport"]

log = logging.getLogger(__name__)

_S = TransactionState


class TransactionAdminSupport:
    """Expiration of idle transactional ids, DescribeTransactions and ListTransactions."""

    # Provided by TransactionCoordinator.
    config: TransactionConfig
    txn_log: GroupLog
    clock: Clock
    transactions: dict[str, TransactionMetadata]
    owned: dict[int, int]

    def partition_for(self, transactional_id: str) -> int:
        raise NotImplementedError

    def is_local(self, transactional_id: str) -> bool:
        raise NotImplementedError

    def _check_owner(self, transactional_id: str) -> ErrorCode | None:
        raise NotImplementedError

    # -- transactional id expiration -------------------------------------------------------
    def expire_transactional_ids(self) -> int:
        """Kafka's transactional id expiration: an id without an open transaction, idle for
        transactional.id.expiration.ms, goes Dead and is removed with a tombstone in
        ``__transaction_state`` (a later InitProducerId starts it afresh). Returns how many
        expirations started."""
        now = self.clock.milliseconds()
        limit = self.config.transactional_id_expiration_ms
        due = [
            m for m in self.transactions.values()
            if m.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
            and m.pending_state is None and self.is_local(m.transactional_id)
            and now - m.txn_last_update_timestamp >= limit
        ]  # fmt: skip
        for meta in due:
            self._expire(meta)
        return len(due)

    def _expire(self, meta: TransactionMetadata) -> None:
        txn_id = meta.transactional_id
        partition = self.partition_for(txn_id)
        coordinator_epoch = self.owned.get(partition)
        meta.pending_state = _S.DEAD
        batch = build_batch([(txn_key(txn_id), None)], self.clock.milliseconds())

        def done(error: ErrorCode, _base_offset: int) -> None:
            meta.pending_state = None
            if error != ErrorCode.none or self.owned.get(partition) != coordinator_epoch:
                log.info("expiring transactional id %s failed: %s", txn_id, error.name)
                return
            meta.state = _S.DEAD
            if self.transactions.get(txn_id) is meta:
                del self.transactions[txn_id]
            log.info("transactional id %s expired", txn_id)

        self.txn_log.append(partition, batch, done)

    # -- Describe / List -------------------------------------------------------------------
    def handle_describe(
        self, transactional_id: str
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        error = self._check_owner(transactional_id)
        if error is not None:
            return error, None
        meta = self.transactions.get(transactional_id)
        if meta is None:
            return ErrorCode.transactional_id_not_found, None
        return ErrorCode.none, meta

    def handle_list(
        self, states: set[TransactionState] | None, producer_ids: set[int] | None,
        min_duration_ms: int = -1,
    ) -> list[TransactionMetadata]:  # fmt: skip
        now = self.clock.milliseconds()
        out = []
        for meta in self.transactions.values():
            if states and meta.state not in states:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (
                meta.state is not _S.ONGOING or now - meta.txn_start_timestamp < min_duration_ms
            ):
                continue
            out.append(meta)
        return out
