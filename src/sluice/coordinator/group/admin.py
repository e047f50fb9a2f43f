"""Offsets and group administration: OffsetCommit, OffsetFetch, OffsetDelete,
DescribeGroups, ListGroups and DeleteGroups, and offset expiration."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from sluice.base import TopicPartition
from sluice.coordinator.group.coordinator_base import CoordinatorBase, log
from sluice.coordinator.group.member import UNKNOWN_MEMBER_ID
from sluice.coordinator.group.metadata import GroupMetadata, GroupState
from sluice.coordinator.group.offsets import CONSUMER_PROTOCOL_TYPE, OffsetAndMetadata
from sluice.protocol import ErrorCode

__all__ = ["GroupAdminSupport", "GroupOverview", "GroupSummary", "MemberSummary"]

_S = GroupState
CommitCallback = Callable[[dict[TopicPartition, ErrorCode]], None]


@dataclasses.dataclass(frozen=True, slots=True)
class MemberSummary:
    """A member as DescribeGroups shows it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class GroupSummary:
    """A group as DescribeGroups shows it; the protocol and member data only when Stable."""

    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class GroupOverview:
    """A group as ListGroups shows it."""

    group_id: str
    protocol_type: str
    state: str


EMPTY_GROUP = GroupSummary("", "", "", ())
DEAD_GROUP = GroupSummary(str(_S.DEAD), "", "", ())


class GroupAdminSupport(CoordinatorBase):
    """The offset and administrative APIs of the group coordinator."""

    # -- OffsetCommit ----------------------------------------------------------------------
    def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        callback: CommitCallback,
    ) -> None:
        """Commit for a member of the current generation, or, with generation -1 and no
        member id, for a group without members ("simple" consumers)."""
        error = self.validate_group_status(group_id, allow_empty=True)
        if error is not None:
            callback(dict.fromkeys(offsets, error))
            return
        group = self.group_manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # Not a group we know: a commit from an older generation, or a lost group.
                callback(dict.fromkeys(offsets, ErrorCode.illegal_generation))
                return
            group = self.group_manager.add_group(
                GroupMetadata(group_id, _S.EMPTY, self.group_manager.now_ms)
            )
        with group.lock:
            error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
            if error is not None:
                callback(dict.fromkeys(offsets, error))
            elif group.is_(_S.COMPLETING_REBALANCE):
                callback(dict.fromkeys(offsets, ErrorCode.rebalance_in_progress))
            else:
                if group.state in (_S.STABLE, _S.PREPARING_REBALANCE):
                    member = group.get(member_id)
                    self.complete_and_schedule_next_heartbeat_expiration(group, member)
                self.group_manager.store_offsets(group, offsets, callback)

    def _validate_offset_commit(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> ErrorCode | None:
        if group.is_(_S.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and group.is_(_S.EMPTY):
            return None  # the admin client or a consumer without group management
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self.validate_current_member(
                group, member_id, group_instance_id, "offset-commit"
            )
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.illegal_generation
            return None
        if not group.is_(_S.EMPTY):
            return ErrorCode.unknown_member_id  # only members commit to a non-empty group
        return None

    # -- OffsetFetch -----------------------------------------------------------------------
    def handle_fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets whatever the group's state (simple consumers have none);
        with ``require_stable`` see :meth:`unstable_partitions`."""
        error = self.validate_group_status(group_id, allow_empty=True)
        if error is not None:
            return error, {}
        return ErrorCode.none, self.group_manager.get_offsets(group_id, partitions)

    def unstable_partitions(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> frozenset[TopicPartition]:
        """The partitions with a transactional offset commit still open (OffsetFetch with
        require_stable answers them UNSTABLE_OFFSET_COMMIT, and the client retries)."""
        group = self.group_manager.get_group(group_id)
        if group is None:
            return frozenset()
        with group.lock:
            return frozenset(tp for tp in partitions if group.has_pending_txn_offsets(tp))

    # -- TxnOffsetCommit -------------------------------------------------------------------
    def handle_txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        callback: CommitCallback,
    ) -> None:
        """Offsets committed inside a transaction: visible once it commits. Members of a
        group are checked as for OffsetCommit (KIP-447); generation -1 skips the check."""
        error = self.validate_group_status(group_id, allow_empty=True)
        if error is not None:
            callback(dict.fromkeys(offsets, error))
            return
        group = self.group_manager.get_group(group_id)
        if group is None:
            group = self.group_manager.add_group(
                GroupMetadata(group_id, _S.EMPTY, self.group_manager.now_ms)
            )
        with group.lock:
            if group.is_(_S.DEAD):
                callback(dict.fromkeys(offsets, ErrorCode.coordinator_not_available))
                return
            if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID:
                error = self._validate_offset_commit(
                    group, generation_id, member_id, group_instance_id
                )
                if error is not None:
                    callback(dict.fromkeys(offsets, error))
                    return
        self.group_manager.store_txn_offsets(group, producer_id, producer_epoch, offsets, callback)

    def handle_txn_completion(self, partition: int, producer_id: int, commit: bool) -> int:
        """A marker of ``producer_id``'s transaction reached that offsets partition."""
        return self.group_manager.handle_txn_completion(partition, producer_id, commit)

    # -- OffsetDelete ----------------------------------------------------------------------
    def handle_delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error = self.validate_group_status(group_id, allow_empty=False)
        if error is not None:
            return error, {}
        group = self.group_manager.get_group(group_id)
        if group is None or group.is_(_S.DEAD):
            return self._missing_group_error(group_id), {}
        errors: dict[TopicPartition, ErrorCode] = {}
        with group.lock:
            if group.is_(_S.EMPTY):
                eligible = list(partitions)
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
                eligible = []
                for tp in partitions:
                    if group.is_subscribed_to_topic(tp.topic):
                        errors[tp] = ErrorCode.group_subscribed_to_topic
                    else:
                        eligible.append(tp)
            else:
                return ErrorCode.non_empty_group, {}
        if eligible:
            removed = self.group_manager.cleanup_group_metadata(
                [group], lambda g: g.remove_offsets(eligible)
            )
            errors.update(dict.fromkeys(eligible, ErrorCode.none))
            log.info("Deleted %d offsets of group %s", removed, group_id)
        return ErrorCode.none, errors

    def _missing_group_error(self, group_id: str) -> ErrorCode:
        if self.group_manager.group_not_exists(group_id):
            return ErrorCode.group_id_not_found
        return ErrorCode.not_coordinator

    # -- DescribeGroups / ListGroups -------------------------------------------------------
    def handle_describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        error = self.validate_group_status(group_id, allow_empty=True)
        if error is not None:
            return error, EMPTY_GROUP
        group = self.group_manager.get_group(group_id)
        if group is None:
            return ErrorCode.none, DEAD_GROUP
        with group.lock:
            return ErrorCode.none, self._summary(group)

    @staticmethod
    def _summary(group: GroupMetadata) -> GroupSummary:
        stable = group.is_(_S.STABLE) and group.protocol_name is not None
        protocol = group.protocol_name if stable and group.protocol_name else ""
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return GroupSummary(str(group.state), group.protocol_type or "", protocol, members)

    def handle_list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> tuple[ErrorCode, list[GroupOverview]]:
        """All groups, or those in ``states`` (case-insensitive); ``types`` filters group
        types, and every group here is "classic"."""
        if not self.is_active:
            return ErrorCode.coordinator_not_available, []
        error = (
            ErrorCode.coordinator_load_in_progress
            if self.group_manager.is_loading
            else ErrorCode.none
        )
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and "classic" not in wanted_types:
            return error, []
        overviews = []
        for group in list(self.group_manager.groups.values()):
            with group.lock:
                if wanted_states and str(group.state).lower() not in wanted_states:
                    continue
                overviews.append(
                    GroupOverview(group.group_id, group.protocol_type or "", str(group.state))
                )
        return error, overviews

    # -- DeleteGroups ----------------------------------------------------------------------
    def handle_delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """Delete Empty groups and their offsets; others get NON_EMPTY_GROUP."""
        errors: dict[str, ErrorCode] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self.validate_group_status(group_id, allow_empty=True)
            if error is not None:
                errors[group_id] = error
                continue
            group = self.group_manager.get_group(group_id)
            if group is None:
                errors[group_id] = self._missing_group_error(group_id)
                continue
            with group.lock:
                if group.is_(_S.DEAD):
                    errors[group_id] = self._missing_group_error(group_id)
                elif group.is_(_S.EMPTY):
                    group.transition_to(_S.DEAD)
                    eligible.append(group)
                else:
                    errors[group_id] = ErrorCode.non_empty_group
        if eligible:
            removed = self.group_manager.cleanup_group_metadata(
                eligible, lambda g: g.remove_all_offsets()
            )
            for group in eligible:
                errors[group.group_id] = ErrorCode.none
            log.info(
                "The following groups were deleted: %s. A total of %d offsets were removed.",
                ", ".join(g.group_id for g in eligible), removed,
            )  # fmt: skip
        return errors

    def handle_deleted_partitions(self, partitions: Iterable[TopicPartition]) -> int:
        """Forget every group's offsets for partitions of deleted topics."""
        gone = list(partitions)
        removed = self.group_manager.cleanup_group_metadata(
            list(self.group_manager.groups.values()), lambda g: g.remove_offsets(gone)
        )
        log.info("Removed %d offsets associated with deleted partitions", removed)
        return removed

    # -- retention -------------------------------------------------------------------------
    def cleanup_expired_offsets(self) -> int:
        """Run one offsets.retention.minutes check (every offsets.retention.check.interval.ms)."""
        if not self.is_active:
            return 0
        return self.group_manager.cleanup_expired_offsets()
