"""``Partition``: one topic-partition's replica state on this broker (leader epoch, ISR, HW)."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable

from sluice.base import TopicPartition
from sluice.log import FetchDataInfo, Log, LogAppendInfo, LogOffsetMetadata
from sluice.log.append import AppendOrigin
from sluice.log.transaction_index import AbortedTxn
from sluice.protocol import ErrorCode

__all__ = ["FetchIsolation", "LogReadInfo", "NotEnoughReplicasError", "Partition"]

log = logging.getLogger(__name__)

_NO_LEO = 2**63  # above every offset: the start of a search for the smallest LEO


class FetchIsolation(enum.Enum):
    """How far a fetch may read: followers to the LEO, consumers to the HW (or the LSO)."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


class NotEnoughReplicasError(Exception):
    """The ISR is smaller than min.insync.replicas for an acks=all write."""

    code = ErrorCode.not_enough_replicas


class LogReadInfo:
    """A log read with the partition's offsets at the time of the read."""

    __slots__ = (
        "aborted_transactions",
        "data",
        "high_watermark",
        "last_stable_offset",
        "log_end_offset",
        "log_start_offset",
    )

    def __init__(self, data: FetchDataInfo, hw: int, lso: int, log_start: int, leo: int) -> None:
        self.data = data
        self.high_watermark = hw
        self.last_stable_offset = lso
        self.log_start_offset = log_start
        self.log_end_offset = leo
        self.aborted_transactions: list[AbortedTxn] | None = None


class Partition:
    """Replica state of one partition: its log, leader and epoch, assigned replicas, ISR,
    and the high watermark (min LEO over the ISR). Followers are tracked by LEO."""

    def __init__(
        self,
        tp: TopicPartition,
        log: Log,
        local_broker_id: int,
        replicas: list[int],
        leader_id: int,
        leader_epoch: int = 0,
        isr: list[int] | None = None,
        min_isr: Callable[[], int] = lambda: 1,
        topic_id: object = None,
    ) -> None:
        self.tp = tp
        self.log = log
        self.local_broker_id = local_broker_id
        self.assigned_replicas = list(replicas)
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.isr = set(isr if isr is not None else replicas)
        self.min_isr = min_isr
        self.topic_id = topic_id
        # Followers' log end offsets (replication fills these in).
        self.replica_leos: dict[int, int] = {}
        # Cluster mode: when each follower last fetched up to the leader's LEO, the
        # partition epoch (state znode version) and controller epoch of the last state.
        self.last_caught_up_ms: dict[int, int] = {}
        self.partition_epoch = 0
        self.controller_epoch = 0
        self.needs_truncation = False
        self._hw = log.log_end_offset if self.isr == {local_broker_id} else 0
        self._hw = max(self._hw, log.log_start_offset)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, or the first offset of the earliest open transaction below it
        (read_committed consumers read up to here)."""
        first_unstable = self.log.first_unstable_offset
        if first_unstable is None or first_unstable > self._hw:
            return self._hw
        return max(first_unstable, self.log.log_start_offset)

    def maybe_increment_high_watermark(self) -> bool:
        """Advance HW to the smallest LEO in the ISR; True when it moved. A leader whose
        ISR is below min.insync.replicas holds its HW: what only that few replicas have
        is not committed (consumers do not see it until the ISR recovers)."""
        isr = self.isr
        if not isr:
            return False
        # The smallest LEO in the ISR (a follower's is its last fetch offset), without a
        # call per replica: this runs on every follower fetch and every append.
        local, leos = self.local_broker_id, self.replica_leos
        new_hw = self.log.log_end_offset if local in isr else _NO_LEO
        for b in isr:
            if b != local:
                leo = leos.get(b, 0)
                if leo < new_hw:
                    new_hw = leo
        if new_hw <= self._hw:
            return False
        # Asked only when the HW would move: min_isr() reads the topic's configs.
        if self.is_leader and len(self.isr) < self.min_isr():
            return False
        self._hw = new_hw
        return True

    # -- replication (cluster mode) ------------------------------------------------------
    def make_leader(
        self, leader_epoch: int, isr: list[int], replicas: list[int], partition_epoch: int,
        controller_epoch: int, now_ms: int,
    ) -> bool:  # fmt: skip
        """Become leader at ``leader_epoch``; followers start as caught up now."""
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.assigned_replicas = list(replicas)
        self.isr = set(isr)
        self.partition_epoch = partition_epoch
        self.controller_epoch = controller_epoch
        self.replica_leos = {}
        self.last_caught_up_ms = {r: now_ms for r in replicas if r != self.local_broker_id}
        self._hw = max(min(self._hw, self.log.log_end_offset), self.log.log_start_offset)
        return self.maybe_increment_high_watermark()

    def make_follower(
        self, leader: int, leader_epoch: int, isr: list[int], replicas: list[int],
        partition_epoch: int, controller_epoch: int,
    ) -> None:  # fmt: skip
        """Follow ``leader``; the replica fetcher truncates the log first (see
        ``needs_truncation``), then fetches from the log end."""
        self.leader_id = leader
        self.leader_epoch = leader_epoch
        self.assigned_replicas = list(replicas)
        self.isr = set(isr)
        self.partition_epoch = partition_epoch
        self.controller_epoch = controller_epoch
        self.replica_leos = {}
        self.last_caught_up_ms = {}
        # Truncation waits for the leader's answer to OffsetForLeaderEpoch (KIP-101): a
        # follower's high watermark may lag what was acknowledged.
        self.needs_truncation = True

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """A follower fetched from ``fetch_offset`` (its LEO); True when the HW moved."""
        self.replica_leos[replica_id] = fetch_offset
        if fetch_offset >= self.log.log_end_offset:
            self.last_caught_up_ms[replica_id] = now_ms
        return self.maybe_increment_high_watermark()

    def should_expand_isr(self, replica_id: int) -> bool:
        return (
            self.is_leader
            and replica_id not in self.isr
            and replica_id in self.assigned_replicas
            and self.replica_leos.get(replica_id, -1) >= self._hw
        )

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> set[int]:
        return {
            r for r in self.isr
            if r != self.local_broker_id
            and now_ms - self.last_caught_up_ms.get(r, now_ms) > max_lag_ms
        }  # fmt: skip

    def restore_high_watermark(self, checkpointed: int) -> None:
        """At startup: the HW from replication-offset-checkpoint, never beyond the LEO."""
        self._hw = max(self._hw, min(checkpointed, self.log.log_end_offset))

    def update_follower_high_watermark(self, leader_hw: int) -> None:
        self._hw = max(self._hw, min(leader_hw, self.log.log_end_offset))

    def append_records_to_leader(
        self,
        records: bytes,
        required_acks: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Append as leader (Log.append_as_leader); acks=all needs min.insync.replicas."""
        if required_acks == -1 and len(self.isr) < self.min_isr():
            raise NotEnoughReplicasError(
                f"ISR {sorted(self.isr)} of {self.tp} is below min.insync.replicas {self.min_isr()}"
            )
        return self.log.append_as_leader(records, self.leader_epoch, origin)

    def _produce_cannot_wait(self) -> tuple[bool, ErrorCode] | None:
        """A DelayedProduce's answer when the wait is over for another reason: the log
        went offline (a failed fsync), or this replica no longer leads."""
        if self.log.write_error is not None:
            return True, ErrorCode.kafka_storage_error
        if not self.is_leader:
            return False, ErrorCode.not_leader_or_follower
        return None

    def check_written(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For an acks=1 DelayedProduce (waiting for a group flush): does the log still
        hold ``required_offset``?"""
        over = self._produce_cannot_wait()
        if over is not None:
            return over
        return self.log.log_end_offset >= required_offset, ErrorCode.none

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For DelayedProduce: has the HW reached ``required_offset``?"""
        over = self._produce_cannot_wait()
        if over is not None:
            return over
        if self._hw >= required_offset:
            if len(self.isr) < self.min_isr():
                return True, ErrorCode.not_enough_replicas_after_append
            return True, ErrorCode.none
        return False, ErrorCode.none

    def low_watermark(self) -> int:
        """The smallest log start offset over the replicas (DeleteRecords waits on it)."""
        return self.log.log_start_offset

    def fetch_end_offset(self, isolation: FetchIsolation) -> int:
        if isolation is FetchIsolation.LOG_END:
            return self.log.log_end_offset
        if isolation is FetchIsolation.TXN_COMMITTED:
            return self.last_stable_offset
        return self._hw

    def read_records(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation: FetchIsolation,
        min_one_message: bool,
    ) -> LogReadInfo:
        # Offsets first, then the read: the read never goes past what was captured.
        hw, lso = self._hw, self.last_stable_offset
        leo, start = self.log.log_end_offset, self.log.log_start_offset
        if isolation is FetchIsolation.LOG_END:
            limit = leo
        elif isolation is FetchIsolation.HIGH_WATERMARK:
            limit = hw
        else:
            limit = lso
        data = self.log.read(fetch_offset, max_bytes, limit, min_one_message)
        info = LogReadInfo(data, hw, lso, start, leo)
        if isolation is FetchIsolation.TXN_COMMITTED:
            info.aborted_transactions = (
                self.log.collect_aborted_transactions(fetch_offset, lso)
                if data.records.size
                else []
            )
        return info

    def offset_metadata(self, isolation: FetchIsolation) -> LogOffsetMetadata:
        """The end a delayed fetch waits for, with its segment position when known."""
        end = self.fetch_end_offset(isolation)
        leo_meta = self.log.log_end_offset_metadata
        if end == leo_meta.message_offset:
            return leo_meta
        return LogOffsetMetadata(end)
