"""Committed offsets of a group: ``OffsetAndMetadata`` and the group's offset cache.

``GroupOffsets`` is the part of ``GroupMetadata`` that holds committed offsets,
offsets whose commit is being appended to the log (pending), and Kafka 2.1+
offset expiration.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sluice.base import TopicPartition

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["NO_METADATA", "CommitRecordMetadataAndOffset", "GroupOffsets", "OffsetAndMetadata"]

NO_METADATA = ""
CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset with its leader epoch, metadata, commit time and, for commits
    that asked for a retention time (OffsetCommit v2-v4), an explicit expire time."""

    offset: int
    leader_epoch: int | None
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class CommitRecordMetadataAndOffset:
    """A committed offset and the log offset of the record that holds it."""

    appended_batch_offset: int | None
    offset_and_metadata: OffsetAndMetadata

    def older_than(self, other: CommitRecordMetadataAndOffset) -> bool:
        if self.appended_batch_offset is None or other.appended_batch_offset is None:
            return True
        return self.appended_batch_offset < other.appended_batch_offset


class GroupOffsets:
    """Committed and pending offsets of one group (mixed into ``GroupMetadata``)."""

    offsets: dict[TopicPartition, CommitRecordMetadataAndOffset]
    pending_offset_commits: dict[TopicPartition, OffsetAndMetadata]
    # TxnOffsetCommit: producer id -> offsets appended, visible once the transaction commits.
    pending_txn_offset_commits: dict[int, dict[TopicPartition, CommitRecordMetadataAndOffset]]

    def _init_offsets(self) -> None:
        self.offsets = {}
        self.pending_offset_commits = {}
        self.pending_txn_offset_commits = {}

    # -- transactional offset commits (Kafka's pendingTransactionalOffsetCommits) -------------
    def on_txn_offset_commit_append(
        self, producer_id: int, tp: TopicPartition, committed: CommitRecordMetadataAndOffset
    ) -> None:
        self.pending_txn_offset_commits.setdefault(producer_id, {})[tp] = committed

    def complete_pending_txn_offset_commit(self, producer_id: int, commit: bool) -> int:
        """The transaction of ``producer_id`` ended: on commit its offsets become the
        committed ones (unless a newer commit record exists); returns how many moved."""
        pending = self.pending_txn_offset_commits.pop(producer_id, {})
        if not commit:
            return 0
        moved = 0
        for tp, committed in pending.items():
            current = self.offsets.get(tp)
            if current is None or current.older_than(committed):
                self.offsets[tp] = committed
                moved += 1
        return moved

    def has_pending_txn_offsets(self, tp: TopicPartition) -> bool:
        return any(tp in pending for pending in self.pending_txn_offset_commits.values())

    # Provided by GroupMetadata.
    def _offsets_expire_base(
        self,
    ) -> tuple[Callable[[CommitRecordMetadataAndOffset], int], set[str]] | None:
        raise NotImplementedError

    @property
    def has_offsets(self) -> bool:
        return (
            bool(self.offsets)
            or bool(self.pending_offset_commits)
            or bool(self.pending_txn_offset_commits)
        )

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        entry = self.offsets.get(tp)
        return None if entry is None else entry.offset_and_metadata

    def all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: e.offset_and_metadata for tp, e in self.offsets.items()}

    def init_offsets(self, loaded: dict[TopicPartition, CommitRecordMetadataAndOffset]) -> None:
        self.offsets.update(loaded)

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(
        self, tp: TopicPartition, committed: CommitRecordMetadataAndOffset
    ) -> None:
        """The commit record was appended: make the offset visible (if still pending)."""
        if tp in self.pending_offset_commits:
            current = self.offsets.get(tp)
            if current is None or current.older_than(committed):
                self.offsets[tp] = committed
        staged = self.pending_offset_commits.get(tp)
        if staged is not None and staged == committed.offset_and_metadata:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, failed: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == failed:
            del self.pending_offset_commits[tp]

    def remove_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Drop the offsets of ``partitions`` (and their pending commits)."""
        removed = {}
        for tp in partitions:
            self.pending_offset_commits.pop(tp, None)
            entry = self.offsets.pop(tp, None)
            if entry is not None:
                removed[tp] = entry.offset_and_metadata.offset
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, int]:
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(
        self, now_ms: int, retention_ms: int
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Kafka 2.1+ expiration: offsets of an Empty group expire ``retention_ms`` after it
        became empty, those of a simple (protocol-less) group that long after their commit,
        and those of a stable consumer group's unsubscribed topics after their commit.
        Offsets committed with an explicit expire timestamp expire at that time."""
        rule = self._offsets_expire_base()
        if rule is None:
            return {}
        base_timestamp, subscribed = rule
        expired = {}
        for tp, entry in self.offsets.items():
            if tp.topic in subscribed or tp in self.pending_offset_commits:
                continue
            om = entry.offset_and_metadata
            if om.expire_timestamp is not None:
                due = now_ms >= om.expire_timestamp
            else:
                due = now_ms - base_timestamp(entry) >= retention_ms
            if due:
                expired[tp] = om
        for tp in expired:
            del self.offsets[tp]
        return expired
