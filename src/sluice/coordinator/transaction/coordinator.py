"""``TransactionCoordinator`` (sans I/O): Kafka's transaction coordinator and its state
machine over ``__transaction_state``.

Every state change is first written to the transactional id's ``__transaction_state``
partition (through a :class:`~sluice.coordinator.group.manager.GroupLog`-shaped log) and
applied once the write succeeded; while it is in flight the id is *pending* and other
requests for it get CONCURRENT_TRANSACTIONS. Ending a transaction writes PrepareCommit or
PrepareAbort (the client is answered then), has the :class:`TxnMarkerWriter` write a
marker to every partition of the transaction, and only then writes CompleteCommit or
CompleteAbort. Transactions open longer than their timeout are aborted with a bumped
epoch (fencing their producer) by a delayed operation on the timer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from sluice.base import TopicPartition
from sluice.base.clock import Clock
from sluice.coordinator.group.manager import GroupLog, map_store_error, partition_for
from sluice.coordinator.group.records import RecordError, build_batch, read_batches
from sluice.coordinator.transaction.admin import TransactionAdminSupport
from sluice.coordinator.transaction.config import (
    TRANSACTION_STATE_TOPIC_NAME,
    TransactionConfig,
    TxnMarkerWriter,
)
from sluice.coordinator.transaction.delayed import DelayedTxnExpiration
from sluice.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
)
from sluice.coordinator.transaction.records import (
    MAX_TRANSACTIONAL_ID_BYTES,
    read_txn_key,
    read_txn_value,
    txn_key,
    txn_value,
)
from sluice.protocol import ErrorCode
from sluice.protocol.records.errors import CorruptRecordException
from sluice.purgatory import DelayedOperationPurgatory

__all__ = [
    "TRANSACTION_STATE_TOPIC_NAME",
    "DelayedTxnExpiration",
    "TransactionConfig",
    "TransactionCoordinator",
    "TxnMarkerWriter",
]

log = logging.getLogger(__name__)

_S = TransactionState
_READ_BYTES = 1 << 20
_MAX_EPOCH = 32767
InitCallback = Callable[[ErrorCode, int, int], None]
ErrorCallback = Callable[[ErrorCode], None]


class TransactionCoordinator(TransactionAdminSupport):
    """Kafka's transaction coordinator for the ``__transaction_state`` partitions this
    broker leads: producer ids and epochs of transactional ids, the transaction state
    machine, markers, timeouts, and recovery from the log."""

    def __init__(
        self,
        config: TransactionConfig,
        txn_log: GroupLog,
        marker_writer: TxnMarkerWriter,
        generate_producer_id: Callable[[], int],
        clock: Clock,
        expiration_purgatory: DelayedOperationPurgatory[DelayedTxnExpiration] | None = None,
    ) -> None:
        self.config = config
        self.txn_log = txn_log
        self.marker_writer = marker_writer
        self.generate_producer_id = generate_producer_id
        self.clock = clock  # wall time: transaction start and update timestamps
        self.expiration_purgatory = expiration_purgatory
        self.transactions: dict[str, TransactionMetadata] = {}
        self.owned: dict[int, int] = {}  # partition -> coordinator epoch
        self.loading: set[int] = set()

    # -- ownership -------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def is_local(self, transactional_id: str) -> bool:
        return self.partition_for(transactional_id) in self.owned

    @property
    def is_active(self) -> bool:
        return bool(self.owned)

    def _check_owner(self, transactional_id: str) -> ErrorCode | None:
        partition = self.partition_for(transactional_id)
        if partition not in self.owned:
            return ErrorCode.not_coordinator
        if partition in self.loading:
            return ErrorCode.coordinator_load_in_progress
        return None

    def startup(self, owned: dict[int, int], load: bool = True) -> None:
        """Own the partitions (with their coordinator epochs); load them now or later."""
        for partition, epoch in owned.items():
            self.on_elected(partition, epoch, load)

    def on_elected(self, partition: int, coordinator_epoch: int, load: bool = True) -> None:
        """This broker leads ``partition`` (again): own it and load it, unless it is
        owned already (a new LeaderAndIsr for the same leadership only moves the epoch)."""
        if partition in self.owned:
            self.owned[partition] = max(self.owned[partition], coordinator_epoch)
            return
        self.owned[partition] = coordinator_epoch
        self.loading.add(partition)
        if load:
            self.load_partition(partition)

    def on_resigned(self, partition: int) -> None:
        """Another broker leads the partition now: forget its transactional ids."""
        self.owned.pop(partition, None)
        self.loading.discard(partition)
        for txn_id in [t for t in self.transactions if self.partition_for(t) == partition]:
            del self.transactions[txn_id]

    def load_partition(self, partition: int) -> int:
        """Read the partition (last record per transactional id wins), then finish what
        was in flight: markers of PrepareCommit/PrepareAbort transactions are written
        again, open transactions get their timeout back. Returns ids loaded. A partition
        not waiting to be loaded (not owned, or loaded already) is left alone."""
        if partition not in self.loading:
            return 0
        loaded: dict[str, TransactionMetadata | None] = {}
        position, end = self.txn_log.offsets(partition)
        while position < end:
            advanced = position
            try:
                chunk = self.txn_log.read(partition, position, _READ_BYTES)
                for _base, next_offset, records in read_batches(chunk):
                    advanced = max(advanced, next_offset)
                    for key, value in records:
                        if key is None:
                            continue
                        try:
                            txn_id = read_txn_key(key)
                            loaded[txn_id] = (
                                None if value is None else read_txn_value(txn_id, value)
                            )
                        except RecordError as exc:
                            log.warning(
                                "skipping a bad %s record: %s", TRANSACTION_STATE_TOPIC_NAME, exc
                            )
            except (RecordError, CorruptRecordException):  # a corrupt batch in the log too
                log.exception(
                    "stopped loading %s-%d at %d", TRANSACTION_STATE_TOPIC_NAME, partition, advanced
                )
                break
            if advanced == position:
                break
            position = advanced
        self.loading.discard(partition)
        count = 0
        for txn_id, meta in loaded.items():
            if meta is None:
                continue
            self.transactions[txn_id] = meta
            count += 1
            if meta.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                self._send_markers(meta, meta.state is _S.PREPARE_COMMIT)
            elif meta.state is _S.ONGOING:
                self._schedule_expiration(meta)
        return count

    def shutdown(self) -> None:
        self.owned.clear()
        self.transactions.clear()
        if self.expiration_purgatory is not None:
            self.expiration_purgatory.shutdown()

    # -- writes ----------------------------------------------------------------------------
    def _write(
        self, meta: TransactionMetadata, target: TransactionMetadata, callback: ErrorCallback
    ) -> None:
        """Persist ``target`` and apply it to ``meta`` once written."""
        partition = self.partition_for(meta.transactional_id)
        coordinator_epoch = self.owned.get(partition)
        meta.pending_state = target.state
        record = (txn_key(meta.transactional_id), txn_value(target))
        batch = build_batch([record], self.clock.milliseconds())

        def done(error: ErrorCode, _base_offset: int) -> None:
            meta.pending_state = None
            if error == ErrorCode.none and self.owned.get(partition) != coordinator_epoch:
                error = ErrorCode.not_coordinator  # the partition moved meanwhile
            if error == ErrorCode.none:
                meta.apply(target)
            else:
                log.warning(
                    "writing %s of transactional id %s failed: %s",
                    target.state.state_name, meta.transactional_id, error.name,
                )  # fmt: skip
            callback(map_store_error(error, for_offsets=False))

        self.txn_log.append(partition, batch, done)

    def _prepare_epoch_bump(
        self, meta: TransactionMetadata, remember_last: bool
    ) -> TransactionMetadata:
        """The same id with the next epoch (a new producer id when the epoch would
        overflow). With ``remember_last`` (the bump was asked for by the current producer,
        KIP-360, or forced by its timeout) that producer may later recover with its old
        id and epoch; a bump by a new instance forgets them, so the old one stays fenced."""
        target = meta.copy()
        target.last_producer_id = meta.producer_id
        target.last_producer_epoch = meta.producer_epoch if remember_last else NO_PRODUCER_EPOCH
        if meta.producer_epoch >= _MAX_EPOCH - 1:
            target.producer_id = self.generate_producer_id()
            target.producer_epoch = 0
        else:
            target.producer_epoch = meta.producer_epoch + 1
        target.txn_last_update_timestamp = self.clock.milliseconds()
        return target

    # -- InitProducerId --------------------------------------------------------------------
    def handle_init_producer_id(
        self,
        transactional_id: str,
        txn_timeout_ms: int,
        expected: tuple[int, int] | None,
        callback: InitCallback,
    ) -> None:
        """A producer id and a new epoch for ``transactional_id``: fences older producers
        with the same id; an open transaction of the previous epoch is aborted first (the
        caller gets CONCURRENT_TRANSACTIONS and retries)."""
        if not 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms:
            callback(ErrorCode.invalid_transaction_timeout, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return
        if len(transactional_id.encode()) > MAX_TRANSACTIONAL_ID_BYTES:  # cannot be stored
            callback(ErrorCode.invalid_request, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return
        error = self._check_owner(transactional_id)
        if error is not None:
            callback(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return
        meta = self.transactions.get(transactional_id)
        if meta is None:
            now = self.clock.milliseconds()
            meta = TransactionMetadata(
                transactional_id, self.generate_producer_id(), NO_PRODUCER_EPOCH,
                txn_timeout_ms, _S.EMPTY, None, -1, now,
            )  # fmt: skip
            self.transactions[transactional_id] = meta
        if meta.pending_state is not None or meta.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            callback(ErrorCode.concurrent_transactions, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return
        current = (meta.producer_id, meta.producer_epoch)
        last = (meta.last_producer_id, meta.last_producer_epoch)
        if expected is not None and expected != current:
            if expected == last and meta.state is not _S.ONGOING:
                # The producer whose epoch was bumped (its own request whose answer it
                # lost, or its timeout) recovers with the current epoch.
                callback(ErrorCode.none, meta.producer_id, meta.producer_epoch)
            else:
                callback(ErrorCode.producer_fenced, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return
        if meta.state is _S.ONGOING:
            self._fence_and_abort(meta, remember_last=expected is not None)
            callback(ErrorCode.concurrent_transactions, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return
        target = self._prepare_epoch_bump(meta, remember_last=expected is not None)
        target.state = _S.EMPTY
        target.topic_partitions = set()
        target.txn_timeout_ms = txn_timeout_ms
        target.txn_start_timestamp = -1

        def written(error: ErrorCode) -> None:
            if error == ErrorCode.none:
                log.info(
                    "transactional id %s: producer %d epoch %d",
                    transactional_id, target.producer_id, target.producer_epoch,
                )  # fmt: skip
                callback(error, target.producer_id, target.producer_epoch)
            else:
                callback(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

        self._write(meta, target, written)

    def _fence_and_abort(self, meta: TransactionMetadata, remember_last: bool) -> None:
        """Bump the epoch of an open transaction and abort it with the new epoch, so the
        old producer's further writes are rejected (Kafka's PrepareEpochFence)."""
        target = self._prepare_epoch_bump(meta, remember_last)
        target.state = _S.PREPARE_ABORT
        log.info("aborting the open transaction of %s with a bumped epoch", meta)

        def written(error: ErrorCode) -> None:
            if error == ErrorCode.none:
                self._send_markers(meta, commit=False)

        self._write(meta, target, written)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------
    def _validate_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:  # as Kafka: an empty id is an invalid request
            return ErrorCode.invalid_request, None
        error = self._check_owner(transactional_id)
        if error is not None:
            return error, None
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping, None
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.producer_fenced, None
        if meta.pending_state is not None:
            return ErrorCode.concurrent_transactions, None
        return ErrorCode.none, meta

    def handle_add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        callback: ErrorCallback,
    ) -> None:
        """Add partitions to the transaction (opening it): Ongoing, with the partitions."""
        error, meta = self._validate_producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            callback(error)
            return
        if meta.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            callback(ErrorCode.concurrent_transactions)
            return
        if meta.state is _S.DEAD:
            callback(ErrorCode.invalid_txn_state)
            return
        new = set(partitions)
        if meta.state is _S.ONGOING and new <= meta.topic_partitions:
            callback(ErrorCode.none)
            return
        target = meta.copy()
        now = self.clock.milliseconds()
        target.topic_partitions |= new
        target.txn_last_update_timestamp = now
        starting = meta.state is not _S.ONGOING
        if starting:
            target.txn_start_timestamp = now
        target.state = _S.ONGOING

        def written(error: ErrorCode) -> None:
            if error == ErrorCode.none and starting:
                self._schedule_expiration(meta)
            callback(error)

        self._write(meta, target, written)

    def verify_partitions_in_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's ``handleVerifyPartitionsInTransaction`` (AddPartitionsToTxn v4+ with
        VerifyOnly, which a partition leader sends before appending a transactional batch,
        KIP-890): each partition NONE if the ongoing transaction holds it, else
        TRANSACTION_ABORTABLE; one error for all of them when the producer does not match
        or the transaction is being completed. A pending state is not checked: a write
        in flight is checked again when the batch is appended."""
        partitions = list(partitions)
        if not transactional_id:
            return dict.fromkeys(partitions, ErrorCode.invalid_request)
        error = self._check_owner(transactional_id)
        meta = self.transactions.get(transactional_id) if error is None else None
        if error is None and meta is None:
            error = ErrorCode.invalid_producer_id_mapping
        if meta is not None:
            if meta.producer_id != producer_id:
                error = ErrorCode.invalid_producer_id_mapping
            elif meta.producer_epoch != producer_epoch:
                error = ErrorCode.producer_fenced
            elif meta.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                error = ErrorCode.concurrent_transactions
        if error is not None:
            return dict.fromkeys(partitions, error)
        assert meta is not None
        held = meta.topic_partitions
        return {
            tp: ErrorCode.none if tp in held else ErrorCode.transaction_abortable
            for tp in partitions
        }

    # -- EndTxn ----------------------------------------------------------------------------
    def handle_end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        callback: ErrorCallback,
    ) -> None:
        """Commit or abort: answered once PrepareCommit/PrepareAbort is written; the
        markers and the Complete state follow."""
        error, meta = self._validate_producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            callback(error)
            return
        state = meta.state
        if state is _S.ONGOING:
            target = meta.copy()
            target.state = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
            target.txn_last_update_timestamp = self.clock.milliseconds()

            def written(error: ErrorCode) -> None:
                callback(error)
                if error == ErrorCode.none:
                    self._send_markers(meta, commit)

            self._write(meta, target, written)
        elif state is (_S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT):
            callback(ErrorCode.none)  # a retry of an EndTxn that succeeded
        elif state is (_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT):
            callback(ErrorCode.concurrent_transactions)
        else:
            callback(ErrorCode.invalid_txn_state)

    def _send_markers(self, meta: TransactionMetadata, commit: bool) -> None:
        partition = self.partition_for(meta.transactional_id)
        coordinator_epoch = self.owned.get(partition, 0)
        producer_id, producer_epoch = meta.producer_id, meta.producer_epoch

        def all_written() -> None:
            if self.owned.get(partition) != coordinator_epoch:
                return  # resigned: the new coordinator completes it
            if meta.state is not (_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT):
                return
            target = meta.copy()
            target.state = _S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT
            target.topic_partitions = set()
            target.txn_last_update_timestamp = self.clock.milliseconds()

            def written(error: ErrorCode) -> None:
                if error != ErrorCode.none:
                    log.warning("completing %s failed: %s", meta, error.name)
                elif self.expiration_purgatory is not None:
                    self.expiration_purgatory.check_and_complete(meta.transactional_id)

            self._write(meta, target, written)

        self.marker_writer.write_markers(
            producer_id, producer_epoch, commit, coordinator_epoch, set(meta.topic_partitions),
            all_written,
        )  # fmt: skip

    # -- timeouts --------------------------------------------------------------------------
    def _schedule_expiration(self, meta: TransactionMetadata) -> None:
        if self.expiration_purgatory is None:
            return
        delay = meta.txn_start_timestamp + meta.txn_timeout_ms - self.clock.milliseconds()
        op = DelayedTxnExpiration(self, meta, delay)
        self.expiration_purgatory.try_complete_else_watch(op, [meta.transactional_id])

    def abort_timed_out_transaction(self, transactional_id: str) -> bool:
        """Abort an open transaction past its timeout, bumping the epoch so its producer
        is fenced. Returns whether an abort started."""
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state is not _S.ONGOING or not self.is_local(transactional_id):
            return False
        if meta.pending_state is not None:
            return False
        log.info("transaction of %s timed out after %d ms", transactional_id, meta.txn_timeout_ms)
        self._fence_and_abort(meta, remember_last=True)
        return True

    def abort_timed_out_transactions(self) -> int:
        """Kafka's periodic sweep: abort every open transaction past its timeout."""
        now = self.clock.milliseconds()
        due = [
            m.transactional_id for m in self.transactions.values()
            if m.state is _S.ONGOING and m.pending_state is None
            and m.txn_start_timestamp + m.txn_timeout_ms <= now
        ]  # fmt: skip
        return sum(self.abort_timed_out_transaction(t) for t in due)
