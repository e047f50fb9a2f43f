"""The transaction coordinator without I/O: an in-memory ``__transaction_state``, a marker
writer the test completes by hand, and a manual clock driving the timeout purgatory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sluice.base import TopicPartition
from sluice.base.clock import ManualClock
from sluice.coordinator.group import GroupCoordinator, OffsetAndMetadata
from sluice.coordinator.transaction import (
    TransactionConfig,
    TransactionCoordinator,
    TransactionMetadata,
    TransactionState,
)
from sluice.coordinator.transaction.records import read_txn_value, txn_value
from sluice.protocol import ErrorCode as E
from sluice.purgatory import DelayedOperationPurgatory
from support.group_coordinator import MemoryGroupLog

S = TransactionState
T0 = TopicPartition("orders", 0)
T1 = TopicPartition("orders", 1)


class ManualMarkers:
    """Records marker requests; the test decides when they are written."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, int, bool, int, set[TopicPartition], Callable[[], None]]]
        self.requests = []

    def write_markers(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
        partitions: set[TopicPartition], done: Callable[[], None],
    ) -> None:  # fmt: skip
        self.requests.append((producer_id, producer_epoch, commit, coordinator_epoch,
                              partitions, done))  # fmt: skip

    def complete_all(self) -> int:
        pending, self.requests = self.requests, []
        for *_, done in pending:
            done()
        return len(pending)


class Harness:
    def __init__(self, log: MemoryGroupLog | None = None, load: bool = True) -> None:
        self.clock = ManualClock(1_000_000)
        self.log = log if log is not None else MemoryGroupLog()
        self.markers = ManualMarkers()
        self.next_pid = 100
        self.purgatory = DelayedOperationPurgatory[Any](
            "TxnExpiration", reaper_enabled=False, clock=self.clock
        )
        self.coordinator = TransactionCoordinator(
            TransactionConfig(transaction_max_timeout_ms=60_000, num_partitions=4),
            self.log, self.markers, self._pid, self.clock, self.purgatory,
        )  # fmt: skip
        self.coordinator.startup({p: 5 for p in range(4)}, load=load)

    def _pid(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def advance(self, ms: int) -> None:
        target = self.clock.hi_res_clock_ms() + ms
        while True:
            while self.purgatory.timer.advance_clock(0):
                pass
            step = min(target - self.clock.hi_res_clock_ms(), 100)
            if step <= 0:
                break
            self.clock.advance(step)

    def init(self, txn_id: str, timeout_ms: int = 10_000, expected: Any = None) -> tuple[Any, ...]:
        out: list[tuple[Any, ...]] = []
        self.coordinator.handle_init_producer_id(
            txn_id, timeout_ms, expected, lambda *a: out.append(a)
        )
        return out[0]

    def add(self, txn_id: str, pid: int, epoch: int, *tps: TopicPartition) -> E:
        out: list[E] = []
        self.coordinator.handle_add_partitions(txn_id, pid, epoch, tps, out.append)
        return out[0]

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool) -> E:
        out: list[E] = []
        self.coordinator.handle_end_transaction(txn_id, pid, epoch, commit, out.append)
        return out[0]

    def state(self, txn_id: str) -> TransactionMetadata:
        return self.coordinator.transactions[txn_id]


def test_commit_walks_the_state_machine_and_waits_for_every_marker() -> None:
    h = Harness()
    error, pid, epoch = h.init("tx")
    assert (error, pid, epoch) == (E.none, 101, 0)
    assert h.state("tx").state is S.EMPTY
    assert h.add("tx", pid, epoch, T0) == E.none
    assert h.add("tx", pid, epoch, T1) == E.none
    assert h.state("tx").state is S.ONGOING and h.state("tx").topic_partitions == {T0, T1}
    assert h.end("tx", pid, epoch, commit=True) == E.none
    assert h.state("tx").state is S.PREPARE_COMMIT
    ((m_pid, m_epoch, commit, coordinator_epoch, partitions, _),) = h.markers.requests
    assert (m_pid, m_epoch, commit, coordinator_epoch, partitions) == (pid, 0, True, 5, {T0, T1})
    # Until the markers are written the transaction is not complete and cannot be reused.
    assert h.add("tx", pid, epoch, T0) == E.concurrent_transactions
    assert h.end("tx", pid, epoch, commit=True) == E.concurrent_transactions
    assert h.init("tx")[0] == E.concurrent_transactions
    h.markers.complete_all()
    assert h.state("tx").state is S.COMPLETE_COMMIT and not h.state("tx").topic_partitions
    assert h.end("tx", pid, epoch, commit=True) == E.none  # a retry
    assert h.end("tx", pid, epoch, commit=False) == E.invalid_txn_state


def test_bad_requests_get_kafkas_errors_and_change_nothing() -> None:
    h = Harness()
    assert h.init("tx", timeout_ms=0)[0] == E.invalid_transaction_timeout
    assert h.init("tx", timeout_ms=60_001)[0] == E.invalid_transaction_timeout
    assert "tx" not in h.coordinator.transactions
    _, pid, epoch = h.init("tx")
    assert h.end("unknown", pid, epoch, True) == E.invalid_producer_id_mapping
    assert h.end("tx", pid + 1, epoch, True) == E.invalid_producer_id_mapping
    assert h.end("tx", pid, epoch + 1, True) == E.producer_fenced
    assert h.end("tx", pid, epoch, True) == E.invalid_txn_state
    assert h.add("tx", pid, epoch - 1, T0) == E.producer_fenced
    assert h.state("tx").state is S.EMPTY and not h.markers.requests


def test_a_new_epoch_fences_the_old_producer_and_aborts_its_transaction() -> None:
    h = Harness()
    _, pid, epoch = h.init("tx")
    h.add("tx", pid, epoch, T0)
    # The second producer finds the transaction open: it is aborted with a bumped epoch.
    assert h.init("tx")[0] == E.concurrent_transactions
    assert h.state("tx").state is S.PREPARE_ABORT and h.state("tx").producer_epoch == 1
    ((_, marker_epoch, commit, *_rest),) = h.markers.requests
    assert (marker_epoch, commit) == (1, False)
    assert h.end("tx", pid, epoch, True) == E.producer_fenced  # the zombie
    h.markers.complete_all()
    assert h.state("tx").state is S.COMPLETE_ABORT
    error, new_pid, new_epoch = h.init("tx")
    assert (error, new_pid, new_epoch) == (E.none, pid, 2)
    assert h.add("tx", pid, epoch, T0) == E.producer_fenced


def test_kip360_recovery_and_no_recovery_for_zombies() -> None:
    h = Harness()
    _, pid, epoch = h.init("tx")
    # The producer asks for its own bump (KIP-360) and loses the answer: its retry with
    # the old epoch gets the bumped one instead of a second bump.
    assert h.init("tx", expected=(pid, epoch)) == (E.none, pid, epoch + 1)
    assert h.init("tx", expected=(pid, epoch)) == (E.none, pid, epoch + 1)
    # A new instance (no expected epoch) takes over: the previous one cannot come back.
    assert h.init("tx") == (E.none, pid, epoch + 2)
    assert h.init("tx", expected=(pid, epoch + 1))[0] == E.producer_fenced
    assert h.init("tx", expected=(pid + 5, 0))[0] == E.producer_fenced
    # After a timeout abort the timed-out producer may recover (KIP-360).
    h.add("tx", pid, epoch + 2, T0)
    h.advance(10_100)
    h.markers.complete_all()
    assert h.state("tx").state is S.COMPLETE_ABORT
    assert h.init("tx", expected=(pid, epoch + 2)) == (E.none, pid, epoch + 3)


def test_epoch_exhaustion_moves_to_a_new_producer_id() -> None:
    h = Harness()
    _, pid, _ = h.init("tx")
    h.state("tx").producer_epoch = 32766
    error, new_pid, epoch = h.init("tx", expected=(pid, 32766))
    assert (error, epoch) == (E.none, 0) and new_pid != pid
    assert (h.state("tx").last_producer_id, h.state("tx").last_producer_epoch) == (pid, 32766)
    assert h.init("tx", expected=(pid, 32766)) == (E.none, new_pid, 0)  # a lost answer


def test_open_transactions_time_out_through_the_timer() -> None:
    h = Harness()
    _, pid, epoch = h.init("tx", timeout_ms=5000)
    h.add("tx", pid, epoch, T0)
    h.advance(4900)
    assert h.state("tx").state is S.ONGOING
    h.advance(200)
    assert h.state("tx").state is S.PREPARE_ABORT and h.state("tx").producer_epoch == epoch + 1
    h.markers.complete_all()
    assert h.state("tx").state is S.COMPLETE_ABORT
    assert h.end("tx", pid, epoch, True) == E.producer_fenced


def test_a_transaction_ended_in_time_is_not_expired() -> None:
    h = Harness()
    _, pid, epoch = h.init("tx", timeout_ms=5000)
    h.add("tx", pid, epoch, T0)
    h.end("tx", pid, epoch, True)
    assert h.purgatory.delayed == 1
    h.markers.complete_all()
    assert h.purgatory.delayed == 0  # completed (its timer task cancelled) by the commit
    h.advance(10_000)
    assert h.state("tx").state is S.COMPLETE_COMMIT and h.state("tx").producer_epoch == epoch


def test_a_failed_write_changes_nothing_and_maps_the_error() -> None:
    h = Harness()
    _, pid, epoch = h.init("tx")
    h.log.fail_with = E.not_leader_or_follower
    assert h.add("tx", pid, epoch, T0) == E.not_coordinator
    assert h.state("tx").state is S.EMPTY and h.state("tx").pending_state is None
    h.log.fail_with = E.not_enough_replicas
    assert h.init("tx")[0] == E.coordinator_not_available
    assert h.state("tx").producer_epoch == epoch


def test_state_is_recovered_from_the_log_and_prepared_transactions_complete() -> None:
    h = Harness()
    _, pid, epoch = h.init("committing")
    h.add("committing", pid, epoch, T0, T1)
    h.end("committing", pid, epoch, True)  # PrepareCommit written, markers never finished
    _, pid2, epoch2 = h.init("open", timeout_ms=3000)
    h.add("open", pid2, epoch2, T0)
    _, pid3, _ = h.init("idle")
    # A new coordinator (failover or restart) reads the same log.
    h2 = Harness(h.log, load=True)
    assert h2.state("committing").state is S.PREPARE_COMMIT
    ((m_pid, _, commit, coordinator_epoch, partitions, _),) = h2.markers.requests
    assert (m_pid, commit, coordinator_epoch, partitions) == (pid, True, 5, {T0, T1})
    h2.markers.complete_all()
    assert h2.state("committing").state is S.COMPLETE_COMMIT
    assert h2.state("idle").producer_id == pid3 and h2.state("idle").state is S.EMPTY
    assert h2.state("open").state is S.ONGOING
    h2.clock.set(h.clock.milliseconds())
    h2.advance(3100)
    assert h2.state("open").state is S.PREPARE_ABORT
    assert h2.init("idle")[1:] == (pid3, 1)


def test_not_owned_and_loading_partitions() -> None:
    h = Harness(load=False)
    assert h.init("tx")[0] == E.coordinator_load_in_progress
    h.coordinator.load_partition(h.coordinator.partition_for("tx"))
    assert h.init("tx")[0] == E.none
    h.coordinator.on_resigned(h.coordinator.partition_for("tx"))
    assert h.init("tx")[0] == E.not_coordinator and "tx" not in h.coordinator.transactions


def test_list_and_describe() -> None:
    h = Harness()
    _, pid, epoch = h.init("a")
    h.add("a", pid, epoch, T0)
    h.init("b")
    assert [m.transactional_id for m in h.coordinator.handle_list({S.ONGOING}, None)] == ["a"]
    assert {m.transactional_id for m in h.coordinator.handle_list(None, None)} == {"a", "b"}
    h.clock.advance(500)
    assert [m.transactional_id for m in h.coordinator.handle_list(None, None, 400)] == ["a"]
    assert h.coordinator.handle_list(None, None, 600) == []
    assert h.coordinator.handle_describe("zzz") == (E.transactional_id_not_found, None)


@pytest.mark.parametrize("state", list(S))
def test_transaction_log_value_round_trips(state: TransactionState) -> None:
    meta = TransactionMetadata("x", 7, 3, 9000, state, {T0, T1, TopicPartition("b", 4)}, 11, 12)
    back = read_txn_value("x", txn_value(meta))
    assert (back.producer_id, back.producer_epoch, back.txn_timeout_ms, back.state) == (
        7, 3, 9000, state,
    )  # fmt: skip
    assert back.topic_partitions == meta.topic_partitions
    assert (back.txn_start_timestamp, back.txn_last_update_timestamp) == (11, 12)


def test_transactional_offsets_become_visible_only_on_commit() -> None:
    """The group coordinator's side of TxnOffsetCommit: pending per producer, moved into
    the committed offsets by a COMMIT marker, dropped by an ABORT, and rebuilt on load."""
    clock = ManualClock(1_000_000)
    log = MemoryGroupLog()

    def coordinator() -> GroupCoordinator:
        from sluice.coordinator.group import GroupConfig

        purgatories = [
            DelayedOperationPurgatory[Any](n, reaper_enabled=False, clock=clock)
            for n in ("Rebalance", "Heartbeat")
        ]
        c = GroupCoordinator(GroupConfig(), log, 1, *purgatories, clock=clock)
        c.startup([0])
        return c

    gc = coordinator()
    results: list[dict[TopicPartition, E]] = []
    om = OffsetAndMetadata(42, None, "", clock.milliseconds())
    gc.handle_txn_commit_offsets("g", 500, 0, "", None, -1, {T0: om}, results.append)
    assert results == [{T0: E.none}]
    assert gc.handle_fetch_offsets("g", [T0])[1] == {T0: None}
    assert gc.unstable_partitions("g", [T0, T1]) == {T0}
    # A restart before the marker keeps the offsets pending.
    assert coordinator().unstable_partitions("g", [T0]) == {T0}
    _append_marker(log, 500, commit=True)
    assert gc.handle_txn_completion(0, 500, commit=True) == 1
    assert gc.handle_fetch_offsets("g", [T0])[1][T0] == om
    assert gc.unstable_partitions("g", [T0]) == frozenset()
    assert coordinator().handle_fetch_offsets("g", [T0])[1][T0] == om
    om2 = OffsetAndMetadata(50, None, "", clock.milliseconds())
    gc.handle_txn_commit_offsets("g", 600, 0, "", None, -1, {T0: om2}, results.append)
    _append_marker(log, 600, commit=False)
    gc.handle_txn_completion(0, 600, commit=False)
    assert gc.handle_fetch_offsets("g", [T0])[1][T0] == om
    assert coordinator().handle_fetch_offsets("g", [T0])[1][T0] == om


def _append_marker(log: MemoryGroupLog, producer_id: int, commit: bool) -> None:
    from sluice.coordinator.transaction import build_marker_batch

    log.append(0, build_marker_batch(producer_id, 0, commit, 0, 1_000_000), lambda e, o: None)


def test_idle_transactional_ids_expire_with_a_tombstone() -> None:
    h = Harness()
    h.coordinator.config.transactional_id_expiration_ms = 60_000
    _, pid, epoch = h.init("idle")
    _, pid2, epoch2 = h.init("busy")
    h.add("busy", pid2, epoch2, T0)  # an open transaction never expires
    h.clock.advance(59_999)
    assert h.coordinator.expire_transactional_ids() == 0
    h.clock.advance(1)
    assert h.coordinator.expire_transactional_ids() == 1
    assert "idle" not in h.coordinator.transactions
    assert h.state("busy").state is S.ONGOING
    assert h.end("idle", pid, epoch, True) == E.invalid_producer_id_mapping
    # The tombstone is in the log: a reload does not bring the id back.
    assert "idle" not in Harness(h.log).coordinator.transactions
    error, new_pid, new_epoch = h.init("idle")
    assert (error, new_epoch) == (E.none, 0) and new_pid != pid


def test_verify_partitions_answers_per_partition_as_kafka() -> None:
    """AddPartitionsToTxn v4+ with VerifyOnly (KIP-890): what the ongoing transaction holds
    is NONE, the rest TRANSACTION_ABORTABLE; a mismatched producer or a transaction being
    completed gives every partition one error; nothing changes."""
    h = Harness()
    verify = h.coordinator.verify_partitions_in_transaction
    _, pid, epoch = h.init("tx")
    assert verify("tx", pid, epoch, [T0]) == {T0: E.transaction_abortable}  # Empty
    h.add("tx", pid, epoch, T0)
    assert verify("tx", pid, epoch, [T0, T1]) == {T0: E.none, T1: E.transaction_abortable}
    mismatched = dict.fromkeys((T0, T1), E.invalid_producer_id_mapping)
    assert verify("tx", pid + 1, epoch, [T0, T1]) == mismatched
    assert verify("tx", pid, epoch + 1, [T0]) == {T0: E.producer_fenced}
    assert verify("other", pid, epoch, [T0]) == {T0: E.invalid_producer_id_mapping}
    assert verify("", pid, epoch, [T0]) == {T0: E.invalid_request}
    assert h.state("tx").topic_partitions == {T0} and h.state("tx").state is S.ONGOING
    h.end("tx", pid, epoch, commit=False)
    assert verify("tx", pid, epoch, [T0]) == {T0: E.concurrent_transactions}  # PrepareAbort
    h.markers.complete_all()
    assert verify("tx", pid, epoch, [T0]) == {T0: E.transaction_abortable}  # CompleteAbort
