"""Transaction state: Kafka's ``TransactionState`` and ``TransactionMetadata``."""

from __future__ import annotations

import enum

from sluice.base import TopicPartition

__all__ = ["TransactionMetadata", "TransactionState"]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class TransactionState(enum.Enum):
    """The states of a transactional id, with Kafka's byte ids and names."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def state_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"Unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        for state in cls:
            if state.state_name == name:
                return state
        return None


_S = TransactionState
# Kafka's TransactionState.validPreviousStates.
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class TransactionMetadata:
    """What the coordinator knows about one transactional id: its producer id and epoch
    (and the previous ones, for retries across an epoch bump), timeout, state, the
    partitions of the current transaction and its timestamps. ``pending_state`` is set
    while a state change is being written to ``__transaction_state``: other requests for
    the id then get CONCURRENT_TRANSACTIONS."""

    __slots__ = (
        "last_producer_epoch",
        "last_producer_id",
        "pending_state",
        "producer_epoch",
        "producer_id",
        "state",
        "topic_partitions",
        "transactional_id",
        "txn_last_update_timestamp",
        "txn_start_timestamp",
        "txn_timeout_ms",
    )

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        txn_timeout_ms: int,
        state: TransactionState = TransactionState.EMPTY,
        topic_partitions: set[TopicPartition] | None = None,
        txn_start_timestamp: int = -1,
        txn_last_update_timestamp: int = -1,
        last_producer_id: int = NO_PRODUCER_ID,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_id = last_producer_id
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: set[TopicPartition] = set(topic_partitions or ())
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.pending_state: TransactionState | None = None

    def copy(self) -> TransactionMetadata:
        return TransactionMetadata(
            self.transactional_id, self.producer_id, self.producer_epoch, self.txn_timeout_ms,
            self.state, set(self.topic_partitions), self.txn_start_timestamp,
            self.txn_last_update_timestamp, self.last_producer_id, self.last_producer_epoch,
        )  # fmt: skip

    def can_transition_to(self, new_state: TransactionState) -> bool:
        return self.state in VALID_PREVIOUS_STATES[new_state]

    def apply(self, target: TransactionMetadata) -> None:
        """Take over the fields of ``target`` once its record is written."""
        self.producer_id = target.producer_id
        self.producer_epoch = target.producer_epoch
        self.last_producer_id = target.last_producer_id
        self.last_producer_epoch = target.last_producer_epoch
        self.txn_timeout_ms = target.txn_timeout_ms
        self.state = target.state
        self.topic_partitions = set(target.topic_partitions)
        self.txn_start_timestamp = target.txn_start_timestamp
        self.txn_last_update_timestamp = target.txn_last_update_timestamp

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata({self.transactional_id!r}, producer={self.producer_id}/"
            f"{self.producer_epoch}, state={self.state.state_name}, "
            f"partitions={sorted(self.topic_partitions)}, pending={self.pending_state})"
        )
