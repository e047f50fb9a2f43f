"""``GroupMetadataManager``: the group cache and its durable copy in ``__consumer_offsets``.

Groups live in the partition ``abs(java_hash(group_id)) % partitions`` of the
internal topic, with their committed offsets. The manager writes group
metadata and offset commits there (through a ``GroupLog``), loads partitions
back into the cache (last value per key wins, tombstones delete), and writes
tombstones for deleted groups and expired or deleted offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from sluice.base import TopicPartition
from sluice.base.clock import Clock
from sluice.coordinator.group.config import GroupConfig
from sluice.coordinator.group.member import MemberMetadata
from sluice.coordinator.group.metadata import GroupMetadata, GroupState
from sluice.coordinator.group.offsets import CommitRecordMetadataAndOffset, OffsetAndMetadata
from sluice.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    RecordError,
    build_batch,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
    read_batch_entries,
    read_group_metadata_value,
    read_key,
    read_offset_commit_value,
)
from sluice.protocol import ErrorCode
from sluice.protocol.records.errors import CorruptRecordException

__all__ = ["GroupLog", "GroupMetadataManager", "java_string_hash", "partition_for"]

log = logging.getLogger(__name__)

AppendCallback = Callable[[ErrorCode, int], None]
"""Called with the append's error and the base offset of the appended batch."""

_READ_BYTES = 1 << 20


class GroupLog(Protocol):
    """The coordinator's view of the ``__consumer_offsets`` partitions it leads."""

    def append(self, partition: int, records: bytes, callback: AppendCallback) -> None:
        """Append a batch with acks=all semantics; ``callback`` runs once it is committed."""
        ...

    def offsets(self, partition: int) -> tuple[int, int]:
        """(log start offset, high watermark) of the partition."""
        ...

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset`` (empty at the end)."""
        ...


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    raw = s.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount``."""
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % partitions


def map_store_error(error: ErrorCode, for_offsets: bool) -> ErrorCode:
    """The error a client sees when writing a coordinator record failed (Kafka's mapping)."""
    if error in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    ):
        return ErrorCode.coordinator_not_available
    if error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if error in (
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_fetch_size,
    ):
        return (
            ErrorCode.invalid_commit_offset_size if for_offsets else ErrorCode.unknown_server_error
        )
    return error


class GroupMetadataManager:
    """The groups this coordinator owns, their persistence and offset expiration."""

    def __init__(
        self,
        config: GroupConfig,
        group_log: GroupLog,
        num_partitions: int,
        clock: Clock,
    ) -> None:
        self.config = config
        self.group_log = group_log
        self.num_partitions = num_partitions
        self.clock = clock  # wall time: commit timestamps, offset expiration
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()

    # -- ownership -------------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def is_group_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_group_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    @property
    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    # -- cache -----------------------------------------------------------------------------
    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def get_or_maybe_create_group(self, group_id: str, create: bool) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, self.clock)
        return group

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    def group_not_exists(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return self.is_group_local(group_id) and (group is None or group.is_(GroupState.DEAD))

    # -- writes ----------------------------------------------------------------------------
    def _append(
        self,
        group_id: str,
        records: list[tuple[bytes, bytes | None]],
        callback: AppendCallback,
        producer: tuple[int, int] = (-1, -1),
    ) -> None:
        batch = build_batch(records, self.clock.milliseconds(), *producer)
        self.group_log.append(self.partition_for(group_id), batch, callback)

    def store_txn_offsets(
        self,
        group: GroupMetadata,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        callback: Callable[[dict[TopicPartition, ErrorCode]], None],
    ) -> None:
        """TxnOffsetCommit: append the commits in a transactional batch of the producer;
        they stay pending until the transaction's marker reaches this partition."""
        valid, errors, records = self._commit_records(group, offsets)
        if not valid:
            callback(errors)
            return

        def done(error: ErrorCode, base_offset: int) -> None:
            if error == ErrorCode.none:
                with group.lock:
                    for tp, om in valid.items():
                        entry = CommitRecordMetadataAndOffset(base_offset, om)
                        group.on_txn_offset_commit_append(producer_id, tp, entry)
            code = map_store_error(error, for_offsets=True)
            callback({**errors, **dict.fromkeys(valid, code)})

        self._append(group.group_id, records, done, (producer_id, producer_epoch))

    def handle_txn_completion(self, partition: int, producer_id: int, commit: bool) -> int:
        """A transaction marker was written to ``partition``: settle the producer's
        pending offsets in the groups of that partition."""
        moved = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) != partition:
                continue
            with group.lock:
                moved += group.complete_pending_txn_offset_commit(producer_id, commit)
        return moved

    def store_group(
        self,
        group: GroupMetadata,
        assignment: dict[str, bytes],
        callback: Callable[[ErrorCode], None],
    ) -> None:
        """Persist the group's generation, members and ``assignment`` (GroupMetadataValue)."""
        protocol = group.protocol_name
        members = tuple(
            MemberRecord(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(protocol) if protocol is not None else b"",
                assignment.get(m.member_id, b""),
            )
            for m in group.members.values()
        )
        ts = group.current_state_timestamp
        value = GroupMetadataValue(
            group.protocol_type or "", group.generation_id, protocol, group.leader_id,
            -1 if ts is None else ts, members,
        )  # fmt: skip
        record = (group_metadata_key(group.group_id), group_metadata_value(value))

        def done(error: ErrorCode, _base_offset: int) -> None:
            if error != ErrorCode.none:
                log.warning("failed to store group %s: %s", group.group_id, error.name)
            callback(map_store_error(error, for_offsets=False))

        self._append(group.group_id, [record], done)

    def _commit_records(
        self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> tuple[
        dict[TopicPartition, OffsetAndMetadata],
        dict[TopicPartition, ErrorCode],
        list[tuple[bytes, bytes | None]],
    ]:
        """The commits within offset.metadata.max.bytes, OFFSET_METADATA_TOO_LARGE for
        the others, and the offset-commit records of the valid ones."""
        limit = self.config.offset_metadata_max_bytes
        valid = {tp: om for tp, om in offsets.items() if len(om.metadata) <= limit}
        errors = {tp: ErrorCode.offset_metadata_too_large for tp in offsets if tp not in valid}
        records: list[tuple[bytes, bytes | None]] = [
            (offset_commit_key(group.group_id, tp.topic, tp.partition), offset_commit_value(om))
            for tp, om in valid.items()
        ]
        return valid, errors, records

    def store_offsets(
        self,
        group: GroupMetadata,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        callback: Callable[[dict[TopicPartition, ErrorCode]], None],
    ) -> None:
        """Append the commits and make them visible once appended; metadata longer than
        offset.metadata.max.bytes gets OFFSET_METADATA_TOO_LARGE."""
        valid, errors, records = self._commit_records(group, offsets)
        if not valid:
            callback(errors)
            return
        with group.lock:
            group.prepare_offset_commit(valid)

        def done(error: ErrorCode, base_offset: int) -> None:
            with group.lock:
                if not group.is_(GroupState.DEAD):
                    for tp, om in valid.items():
                        if error == ErrorCode.none:
                            entry = CommitRecordMetadataAndOffset(base_offset, om)
                            group.on_offset_commit_append(tp, entry)
                        else:
                            group.fail_pending_offset_write(tp, om)
            code = map_store_error(error, for_offsets=True)
            callback({**errors, **dict.fromkeys(valid, code)})

        self._append(group.group_id, records, done)

    def get_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of ``partitions`` (all the group has when None); None marks
        a partition without a committed offset."""
        group = self.groups.get(group_id)
        if group is None:
            return dict.fromkeys(partitions or [])
        with group.lock:
            if group.is_(GroupState.DEAD):
                return dict.fromkeys(partitions or [])
            if partitions is None:
                return dict(group.all_offsets())
            return {tp: group.offset(tp) for tp in partitions}

    def cleanup_group_metadata(
        self,
        groups: Iterable[GroupMetadata],
        selector: Callable[[GroupMetadata], Iterable[TopicPartition]],
    ) -> int:
        """Remove the offsets ``selector`` picks, turn Empty groups left without offsets
        Dead, drop Dead groups from the cache, and write the tombstones."""
        removed_total = 0
        for group in list(groups):
            with group.lock:
                removed = list(selector(group))
                if group.is_(GroupState.EMPTY) and not group.has_offsets:
                    log.info(
                        "Group %s transitioned to Dead in generation %d",
                        group.group_id, group.generation_id,
                    )  # fmt: skip
                    group.transition_to(GroupState.DEAD)
                is_dead, generation = group.is_(GroupState.DEAD), group.generation_id
            tombstones: list[tuple[bytes, bytes | None]] = [
                (offset_commit_key(group.group_id, tp.topic, tp.partition), None) for tp in removed
            ]
            if is_dead and self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
                if generation > 0:
                    tombstones.append((group_metadata_key(group.group_id), None))
            if tombstones:
                self._append(group.group_id, tombstones, self._log_tombstone_failure)
                removed_total += len(removed)
        return removed_total

    @staticmethod
    def _log_tombstone_failure(error: ErrorCode, _base_offset: int) -> None:
        if error != ErrorCode.none:
            log.warning("failed to append group tombstones: %s", error.name)

    def cleanup_expired_offsets(self) -> int:
        """Expire offsets older than offsets.retention.minutes (Kafka 2.1+ rules)."""
        now, retention = self.clock.milliseconds(), self.config.offsets_retention_ms
        removed = self.cleanup_group_metadata(
            list(self.groups.values()), lambda g: g.remove_expired_offsets(now, retention)
        )
        if removed:
            log.info("Removed %d expired offsets", removed)
        return removed

    # -- loading ---------------------------------------------------------------------------
    def load_partition(
        self, partition: int, on_group_loaded: Callable[[GroupMetadata], None]
    ) -> int:
        """Read the partition from its start: last value per key wins, tombstones delete.
        Returns the number of groups loaded."""
        offsets: dict[str, dict[TopicPartition, CommitRecordMetadataAndOffset]] = {}
        # Transactional commits by producer id, applied when their COMMIT marker is read.
        pending_txn: dict[int, dict[str, dict[TopicPartition, CommitRecordMetadataAndOffset]]]
        pending_txn = {}
        values: dict[str, GroupMetadataValue] = {}
        position, end = self.group_log.offsets(partition)
        while position < end:
            advanced = position
            try:
                chunk = self.group_log.read(partition, position, _READ_BYTES)
                for entry in read_batch_entries(chunk):
                    advanced = max(advanced, entry.next_offset)
                    if entry.is_control:
                        txn_offsets = pending_txn.pop(entry.producer_id, {})
                        if entry.commits:
                            for group_id, committed in txn_offsets.items():
                                offsets.setdefault(group_id, {}).update(committed)
                        continue
                    if entry.is_transactional:
                        target = pending_txn.setdefault(entry.producer_id, {})
                    else:
                        target = offsets
                    for key, value in entry.records:
                        self._replay(key, value, entry.base_offset, target, values)
            except (RecordError, CorruptRecordException):  # a corrupt batch in the log too
                log.exception("stopped loading %s at offset %d", partition, advanced)
                break
            if advanced == position:
                break  # nothing readable (a batch larger than the read, or a torn tail)
            position = advanced
        loaded = 0
        open_txn_groups = {g for by_group in pending_txn.values() for g in by_group}
        for group_id in set(values) | {g for g, o in offsets.items() if o} | open_txn_groups:
            group = self._group_from(group_id, values.get(group_id))
            group.init_offsets(offsets.get(group_id, {}))
            for producer_id, by_group in pending_txn.items():
                for tp, pending in by_group.get(group_id, {}).items():
                    group.on_txn_offset_commit_append(producer_id, tp, pending)
            self.groups[group_id] = group
            on_group_loaded(group)
            loaded += 1
        return loaded

    @staticmethod
    def _replay(
        key_bytes: bytes | None,
        value: bytes | None,
        base_offset: int,
        offsets: dict[str, dict[TopicPartition, CommitRecordMetadataAndOffset]],
        values: dict[str, GroupMetadataValue],
    ) -> None:
        if key_bytes is None:
            return
        try:
            key = read_key(key_bytes)
            if isinstance(key, OffsetCommitKey):
                tp = TopicPartition(key.topic, key.partition)
                group_offsets = offsets.setdefault(key.group, {})
                if value is None:
                    group_offsets.pop(tp, None)
                else:
                    om = read_offset_commit_value(value)
                    group_offsets[tp] = CommitRecordMetadataAndOffset(base_offset, om)
            elif isinstance(key, GroupMetadataKey):
                if value is None:
                    values.pop(key.group, None)
                else:
                    values[key.group] = read_group_metadata_value(value)
        except (RecordError, UnicodeDecodeError) as exc:
            log.warning("skipping an unreadable record at offset %d: %s", base_offset, exc)

    def _group_from(self, group_id: str, value: GroupMetadataValue | None) -> GroupMetadata:
        if value is None:
            return GroupMetadata(group_id, GroupState.EMPTY, self.clock)
        state = GroupState.STABLE if value.members else GroupState.EMPTY
        group = GroupMetadata(group_id, state, self.clock)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        ts = value.current_state_timestamp
        group.current_state_timestamp = None if ts < 0 else ts
        for m in value.members:
            protocols = [(value.protocol, m.subscription)] if value.protocol is not None else []
            member = MemberMetadata(
                m.member_id, group_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout, m.session_timeout, value.protocol_type, protocols,
                m.assignment,
            )  # fmt: skip
            group.add(member)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def remove_partition_groups(self, partition: int) -> list[GroupMetadata]:
        """Forget the groups of ``partition`` (the coordinator unloads them)."""
        gone = [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]
        for group in gone:
            del self.groups[group.group_id]
        return gone
