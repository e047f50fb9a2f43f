"""``TransactionCoordinatorClient``: the transactional producer's requests to its
transaction coordinator and to the group coordinator (Kafka's ``TransactionManager``
request handlers, done as blocking calls on the caller's thread).

FindCoordinator (key type 1) locates the coordinator of the transactional id; then
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn go to it and TxnOffsetCommit
to the group's coordinator. Retriable answers (CONCURRENT_TRANSACTIONS,
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a dropped
connection) are retried until ``max.block.ms``; PRODUCER_FENCED and
INVALID_PRODUCER_EPOCH raise :class:`ProducerFencedException`, which is fatal.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from sluice.base import TopicPartition
from sluice.client.errors import (
    KafkaException,
    NetworkException,
    ProducerFencedException,
    TimeoutException,
    exception_for,
)
from sluice.client.net.cluster import Node
from sluice.client.net.consumer_network_client import ConsumerNetworkClient, coordinator_node
from sluice.client.security import ClientSecurity
from sluice.protocol import ApiKey
from sluice.protocol.errors import ErrorCode

__all__ = ["PreparedTxnState", "ProducerTransactions", "TransactionCoordinatorClient"]

_RETRIABLE = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.request_timed_out,
    }
)
_FENCED = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch})
_COORDINATOR_MOVED = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
TRANSACTION_KEY_TYPE = 1
GROUP_KEY_TYPE = 0
_BACKOFF_S = 0.02


class TransactionCoordinatorClient:
    """Blocking transaction requests of one transactional producer."""

    def __init__(
        self, bootstrap: str | list[str], client_id: str, transactional_id: str, timeout_ms: int,
        request_timeout_ms: int, security: ClientSecurity | None = None,
    ) -> None:  # fmt: skip
        self.transactional_id = transactional_id
        self.timeout_s = timeout_ms / 1000
        self._client = ConsumerNetworkClient(bootstrap, client_id, request_timeout_ms, security)
        self._coordinators: dict[tuple[int, str], Node] = {}

    def close(self) -> None:
        self._client.close()

    def _coordinator(self, key_type: int, key: str, deadline: float) -> Node:
        cached = self._coordinators.get((key_type, key))
        if cached is not None:
            return cached
        while True:
            try:
                body = self._client.send(None, ApiKey.FIND_COORDINATOR, version=3,
                                         key=key, key_type=key_type)  # fmt: skip
                code = ErrorCode(body.error_code)
            except NetworkException:
                code = ErrorCode.coordinator_not_available
            if code is ErrorCode.none:
                found = coordinator_node(body)
                self._coordinators[(key_type, key)] = found
                return found
            if code not in _RETRIABLE:
                raise exception_for(code, f"FindCoordinator {key}: {code.name.upper()}")
            self._wait(deadline, f"FindCoordinator {key}")

    def _wait(self, deadline: float, what: str) -> None:
        if time.monotonic() > deadline:
            raise TimeoutException(f"{what} did not complete within {self.timeout_s} s")
        time.sleep(_BACKOFF_S)

    def _call(
        self, key_type: int, key: str, api_key: int, version: int,
        errors_of: Callable[[Any], list[ErrorCode]], what: str, **fields: Any,
    ) -> Any:  # fmt: skip
        """Send to the coordinator of ``key`` until no retriable error is left."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            node = self._coordinator(key_type, key, deadline)
            try:
                body = self._client.send(node, api_key, version=version, **fields)
                errors = errors_of(body)
            except NetworkException:
                errors = [ErrorCode.coordinator_not_available]
            worst = next((e for e in errors if e is not ErrorCode.none), ErrorCode.none)
            if worst is ErrorCode.none:
                return body
            if worst in _FENCED:
                raise ProducerFencedException(
                    f"{what}: there is a newer producer with the same transactional.id "
                    f"({worst.name.upper()})"
                )
            if worst not in _RETRIABLE:
                raise exception_for(worst, f"{what}: {worst.name.upper()}")
            if worst in _COORDINATOR_MOVED:
                self._coordinators.pop((key_type, key), None)
            self._wait(deadline, what)

    # -- the transaction APIs ----------------------------------------------------------
    def init_producer_id(
        self, transaction_timeout_ms: int, producer_id: int = -1, epoch: int = -1
    ) -> tuple[int, int]:
        """A new epoch (and at first a producer id) for the transactional id; with the
        current ``producer_id`` and ``epoch`` (KIP-360) it bumps that epoch."""
        body = self._call(
            TRANSACTION_KEY_TYPE, self.transactional_id, ApiKey.INIT_PRODUCER_ID, 4,
            lambda b: [ErrorCode(b.error_code)], "InitProducerId",
            transactional_id=self.transactional_id, transaction_timeout=transaction_timeout_ms,
            producer_id=producer_id, producer_epoch=epoch,
        )  # fmt: skip
        return int(body.producer_id), int(body.producer_epoch)

    def add_partitions(self, pid: int, epoch: int, partitions: Iterable[TopicPartition]) -> None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        self._call(
            TRANSACTION_KEY_TYPE, self.transactional_id, ApiKey.ADD_PARTITIONS_TO_TXN, 3,
            lambda b: [ErrorCode(p.partition_error_code)
                       for t in b.results_by_topic_v3_and_below for p in t.results_by_partition],
            "AddPartitionsToTxn",
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        )  # fmt: skip

    def add_offsets(self, pid: int, epoch: int, group_id: str) -> None:
        self._call(
            TRANSACTION_KEY_TYPE, self.transactional_id, ApiKey.ADD_OFFSETS_TO_TXN, 3,
            lambda b: [ErrorCode(b.error_code)], "AddOffsetsToTxn",
            transactional_id=self.transactional_id, producer_id=pid, producer_epoch=epoch,
            group_id=group_id,
        )  # fmt: skip

    def txn_offset_commit(
        self, pid: int, epoch: int, group_id: str, offsets: Mapping[TopicPartition, int],
        generation_id: int = -1, member_id: str = "", group_instance_id: str | None = None,
    ) -> None:  # fmt: skip
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "committed_offset": offset,
                 "committed_leader_epoch": -1, "committed_metadata": ""}
            )  # fmt: skip
        self._call(
            GROUP_KEY_TYPE, group_id, ApiKey.TXN_OFFSET_COMMIT, 3,
            lambda b: [ErrorCode(p.error_code) for t in b.topics for p in t.partitions],
            "TxnOffsetCommit",
            transactional_id=self.transactional_id, group_id=group_id, producer_id=pid,
            producer_epoch=epoch, generation_id=generation_id, member_id=member_id,
            group_instance_id=group_instance_id,
            topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        )  # fmt: skip

    def end_txn(self, pid: int, epoch: int, commit: bool) -> None:
        self._call(
            TRANSACTION_KEY_TYPE, self.transactional_id, ApiKey.END_TXN, 3,
            lambda b: [ErrorCode(b.error_code)], "EndTxn",
            transactional_id=self.transactional_id, producer_id=pid, producer_epoch=epoch,
            committed=commit,
        )  # fmt: skip


class PreparedTxnState(NamedTuple):
    """A transaction whose records are written but which is neither committed nor aborted
    (KIP-939's name): enough for another process to finish it. Any producer with the same
    ``transactional.id`` can :meth:`~sluice.client.Producer.resume_transaction` it and
    commit or abort it, as long as no newer producer with that id was initialized and the
    transaction did not outlive its ``transaction.timeout.ms``."""

    transactional_id: str
    producer_id: int
    epoch: int


class ProducerTransactions:
    """The transactional state of one producer (Kafka's ``TransactionManager`` states,
    reduced to READY / IN_TRANSACTION / PREPARED / FATAL): partitions added to the
    current transaction, records of it that failed, and the calls a transactional
    :class:`~sluice.client.producer.producer.Producer` makes. PREPARED is an open
    transaction that takes no more records: prepared by this producer, or resumed from
    another one's :class:`PreparedTxnState`; only commit or abort may follow."""

    def __init__(self, client: TransactionCoordinatorClient, transaction_timeout_ms: int) -> None:
        self.client = client
        self.transaction_timeout_ms = transaction_timeout_ms
        self.state = "UNINITIALIZED"
        self.partitions: set[TopicPartition] = set()
        self.sticky: dict[str, int] = {}
        self.failed: Exception | None = None
        self.added_offsets = False
        self.resumed = False
        self.producer_id, self.epoch = -1, -1
        self._lock = threading.Lock()

    def _fatal(self, exc: KafkaException) -> KafkaException:
        self.state = "FATAL"
        return exc

    def _require(self, *states: str, what: str) -> None:
        if self.state not in states:
            raise KafkaException(f"Cannot {what} in state {self.state}")

    def init(self) -> tuple[int, int]:
        self._require("UNINITIALIZED", "READY", what="initialize transactions")
        try:
            self.producer_id, self.epoch = self.client.init_producer_id(self.transaction_timeout_ms)
        except ProducerFencedException as exc:
            raise self._fatal(exc) from None
        # a resumed transaction's producer id and epoch were borrowed: sending again
        # needs init_transactions
        self.state = "UNINITIALIZED" if self.resumed else "READY"
        self.resumed = False
        return self.producer_id, self.epoch

    def begin(self) -> None:
        self._require("READY", what="begin a transaction")
        self.partitions.clear()
        self.sticky.clear()
        self.failed = None
        self.added_offsets = False
        self.resumed = False
        self.state = "IN_TRANSACTION"

    def prepare(self) -> PreparedTxnState:
        """Stop taking records (they are flushed already); the state to finish it with."""
        self._require("IN_TRANSACTION", what="prepare a transaction")
        if self.failed is not None:
            raise KafkaException(
                f"Cannot prepare: a record of the transaction failed ({self.failed}); abort it"
            )
        self.state = "PREPARED"
        return PreparedTxnState(self.client.transactional_id, self.producer_id, self.epoch)

    def resume(self, prepared: PreparedTxnState) -> None:
        """Take over another producer's prepared transaction (no InitProducerId: that
        would abort it)."""
        self._require("UNINITIALIZED", "READY", what="resume a transaction")
        if prepared.transactional_id != self.client.transactional_id:
            raise KafkaException(
                f"Cannot resume a transaction of {prepared.transactional_id!r} with a "
                f"producer whose transactional.id is {self.client.transactional_id!r}"
            )
        self.partitions.clear()
        self.failed = None
        self.added_offsets = False
        self.resumed = True
        self.producer_id, self.epoch = prepared.producer_id, prepared.epoch
        self.state = "PREPARED"

    def check_send(self) -> None:
        self._require("IN_TRANSACTION", what="send a record outside a transaction")

    def maybe_add_partition(self, topic: str, partition: int) -> None:
        """AddPartitionsToTxn before the first record of a partition in this transaction."""
        if (topic, partition) in self.partitions:  # TopicPartition is a named tuple
            return
        tp = TopicPartition(topic, partition)
        with self._lock:
            if tp in self.partitions:
                return
            try:
                self.client.add_partitions(self.producer_id, self.epoch, [tp])
            except ProducerFencedException as exc:
                raise self._fatal(exc) from None
            self.partitions.add(tp)

    def record_failure(self, exc: Exception) -> None:
        if self.failed is None:
            self.failed = exc

    def send_offsets(
        self, offsets: Mapping[TopicPartition, int], group_id: str, generation_id: int = -1,
        member_id: str = "", group_instance_id: str | None = None,
    ) -> None:  # fmt: skip
        self._require("IN_TRANSACTION", what="send offsets to a transaction")
        try:
            self.client.add_offsets(self.producer_id, self.epoch, group_id)
            self.added_offsets = True
            self.client.txn_offset_commit(
                self.producer_id, self.epoch, group_id, offsets, generation_id, member_id,
                group_instance_id,
            )  # fmt: skip
        except ProducerFencedException as exc:
            raise self._fatal(exc) from None

    def end(self, commit: bool, bump_epoch: bool = False) -> tuple[int, int] | None:
        """EndTxn. ``bump_epoch`` (an abort after a batch the broker rejected, whose
        sequence left a gap): then bump the epoch (InitProducerId with the current id and
        epoch, KIP-360) so that sequences start again at 0; returns the new id and epoch
        then, else None."""
        self._require("IN_TRANSACTION", "PREPARED", what="commit" if commit else "abort")
        if commit and self.failed is not None:
            raise KafkaException(
                f"Cannot commit: a record of the transaction failed ({self.failed}); abort it"
            )
        try:
            # nothing to end on the broker if nothing was added; a resumed transaction's
            # partitions are known to its coordinator only
            if self.partitions or self.added_offsets or self.resumed:
                self.client.end_txn(self.producer_id, self.epoch, commit)
        except ProducerFencedException as exc:
            raise self._fatal(exc) from None
        bumped = None
        if bump_epoch and not commit and not self.resumed:
            try:
                bumped = self.client.init_producer_id(
                    self.transaction_timeout_ms, self.producer_id, self.epoch
                )
            except ProducerFencedException as exc:
                raise self._fatal(exc) from None
            self.producer_id, self.epoch = bumped
        # a resumed transaction's producer id and epoch were borrowed: sending again
        # needs init_transactions
        self.state = "UNINITIALIZED" if self.resumed else "READY"
        self.resumed = False
        return bumped
