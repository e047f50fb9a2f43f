"""``GroupCoordinator``: Kafka's classic group coordinator, sans I/O, in one class as in
Kafka: membership and rebalances (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, static and
dynamic members), committed offsets (OffsetCommit, OffsetFetch, OffsetDelete, expiration)
and group administration (DescribeGroups, ListGroups, DeleteGroups).

Requests come in as plain values with a callback (or return a result); time
passes only through the purgatories' timers; records go to a ``GroupLog``.
The broker wires it to the network, the replica manager and its event loop
(``sluice.server.group_runtime``); tests drive it with a manual clock.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable

from sluice.base import TopicPartition
from sluice.base.clock import Clock
from sluice.coordinator.group.config import GROUP_METADATA_TOPIC_NAME, GroupConfig
from sluice.coordinator.group.delayed import (
    DelayedHeartbeat,
    DelayedJoin,
    DelayedSync,
    InitialDelayedJoin,
    join_key,
    member_key,
    sync_key,
)
from sluice.coordinator.group.manager import GroupLog, GroupMetadataManager
from sluice.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    JoinCallback,
    JoinGroupResult,
    MemberMetadata,
    SyncCallback,
    SyncGroupResult,
)
from sluice.coordinator.group.metadata import GroupMetadata, GroupState
from sluice.coordinator.group.offsets import CONSUMER_PROTOCOL_TYPE, OffsetAndMetadata
from sluice.coordinator.group.records import MAX_STRING_BYTES
from sluice.protocol import ErrorCode
from sluice.purgatory import DelayedOperation, DelayedOperationPurgatory

__all__ = [
    "GroupCoordinator",
    "GroupOverview",
    "GroupSummary",
    "JoinGroupRequestData",
    "MemberIdentity",
    "MemberSummary",
]

log = logging.getLogger("sluice.coordinator.group")

_S = GroupState
Purgatory = DelayedOperationPurgatory[DelayedOperation]
CommitCallback = Callable[[dict[TopicPartition, ErrorCode]], None]

MemberIdentity = tuple[str, str | None]
"""(member id, group instance id) of a member leaving a group."""


@dataclasses.dataclass(frozen=True, slots=True)
class JoinGroupRequestData:
    """A JoinGroup request, version-independent. ``require_known_member_id`` is set for
    v4+ dynamic members (MEMBER_ID_REQUIRED handshake); ``support_skipping_assignment``
    for v9+."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = False
    support_skipping_assignment: bool = False
    reason: str | None = None


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


class GroupCoordinator:
    """Runs classic consumer groups: membership and rebalances (JoinGroup, SyncGroup,
    Heartbeat, LeaveGroup), committed offsets, and group administration."""

    def __init__(
        self,
        config: GroupConfig,
        group_log: GroupLog,
        num_partitions: int,
        rebalance_purgatory: Purgatory,
        heartbeat_purgatory: Purgatory,
        clock: Clock,
    ) -> None:
        """``clock``: wall time for commit timestamps and group state times."""
        manager = GroupMetadataManager(config, group_log, num_partitions, clock)
        self.config = config
        self.group_manager = manager
        self.rebalance_purgatory = rebalance_purgatory
        self.heartbeat_purgatory = heartbeat_purgatory
        self.is_active = False
        self.clock = clock

    # -- lifecycle -------------------------------------------------------------------------
    def startup(self, owned_partitions: Iterable[int], load: bool = True) -> None:
        """Become active for ``owned_partitions``; they answer COORDINATOR_LOAD_IN_PROGRESS
        until loaded (here when ``load``, else by ``load_partition`` calls)."""
        owned = set(owned_partitions)
        self.group_manager.owned_partitions = owned
        self.group_manager.loading_partitions = set(owned)
        self.is_active = True
        if load:
            for partition in sorted(owned):
                self.load_partition(partition)

    def load_partition(self, partition: int) -> int:
        """Load one offsets partition into the cache; returns the number of groups."""
        if partition not in self.group_manager.loading_partitions:
            return 0  # resigned (or already loaded) before the load ran
        try:
            loaded = self.group_manager.load_partition(partition, self.on_group_loaded)
        finally:
            self.group_manager.loading_partitions.discard(partition)
        return loaded

    def on_election(self, partition: int) -> None:
        """This broker now leads offsets ``partition``: it answers
        COORDINATOR_LOAD_IN_PROGRESS for its groups until ``load_partition`` runs."""
        manager = self.group_manager
        if partition in manager.owned_partitions:
            return
        manager.owned_partitions.add(partition)
        manager.loading_partitions.add(partition)
        log.info("Elected as the group coordinator for partition %d", partition)

    def on_resignation(self, partition: int) -> None:
        """Another broker leads offsets ``partition`` now: unload its groups (waiting
        members are answered NOT_COORDINATOR and go find the new coordinator)."""
        manager = self.group_manager
        if partition not in manager.owned_partitions:
            return
        manager.owned_partitions.discard(partition)
        manager.loading_partitions.discard(partition)
        gone = manager.remove_partition_groups(partition)
        for group in gone:
            self.on_group_unloaded(group)
        log.info("Resigned as the group coordinator for partition %d (%d groups unloaded)",
                 partition, len(gone))  # fmt: skip

    def shutdown(self) -> None:
        """Stop serving: waiting JoinGroup/SyncGroup requests get NOT_COORDINATOR."""
        self.is_active = False
        for group in list(self.group_manager.groups.values()):
            self.on_group_unloaded(group)
        self.group_manager.groups.clear()
        self.rebalance_purgatory.shutdown()
        self.heartbeat_purgatory.shutdown()
        log.info("Group coordinator shut down")

    def partition_for(self, group_id: str) -> int:
        return self.group_manager.partition_for(group_id)

    # -- SyncGroup ---------------------------------------------------------------------------
    def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
        callback: SyncCallback,
    ) -> None:
        """Leader hands in the assignment; every member gets its share once stored."""
        error = self.validate_group_status(group_id, allow_empty=False)
        if error == ErrorCode.coordinator_load_in_progress:
            # The rebalance state was lost with the load: start over at JoinGroup.
            callback(SyncGroupResult(ErrorCode.rebalance_in_progress))
            return
        if error is not None:
            callback(SyncGroupResult(error))
            return
        group = self.group_manager.get_group(group_id)
        if group is None:
            callback(SyncGroupResult(ErrorCode.unknown_member_id))
            return
        with group.lock:
            error = self._validate_sync_group(
                group, generation_id, member_id, protocol_type, protocol_name, group_instance_id
            )
            if error is not None:
                callback(SyncGroupResult(error))
            elif group.is_(_S.EMPTY):
                callback(SyncGroupResult(ErrorCode.unknown_member_id))
            elif group.is_(_S.PREPARING_REBALANCE):
                callback(SyncGroupResult(ErrorCode.rebalance_in_progress))
            elif group.is_(_S.COMPLETING_REBALANCE):
                group.get(member_id).awaiting_sync_callback = callback
                self.remove_pending_sync_member(group, member_id)
                if group.is_leader(member_id):
                    self._store_leader_assignment(group, generation_id, member_id, assignments)
            elif group.is_(_S.STABLE):
                self.remove_pending_sync_member(group, member_id)
                member = group.get(member_id)
                callback(
                    SyncGroupResult(
                        ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment
                    )
                )
                self.complete_and_schedule_next_heartbeat_expiration(group, member)

    def _validate_sync_group(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None,
    ) -> ErrorCode | None:
        if group.is_(_S.DEAD):
            return ErrorCode.coordinator_not_available
        error = self.validate_current_member(group, member_id, group_instance_id, "sync-group")
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if protocol_type is not None and group.protocol_type != protocol_type:
            return ErrorCode.inconsistent_group_protocol
        if protocol_name is not None and group.protocol_name != protocol_name:
            return ErrorCode.inconsistent_group_protocol
        return None

    def _store_leader_assignment(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        assignments: dict[str, bytes],
    ) -> None:
        log.info(
            "Assignment received from leader %s for group %s for generation %d. The group has "
            "%d members, %d of which are static.",
            member_id, group.group_id, group.generation_id, group.size, len(group.static_members),
        )  # fmt: skip
        assignment = {m: assignments.get(m, b"") for m in group.members}
        missing = [m for m in group.members if m not in assignments]
        if missing:
            log.warning(
                "Setting empty assignments for members %s of %s for generation %d",
                missing, group.group_id, group.generation_id,
            )  # fmt: skip

        def stored(error: ErrorCode) -> None:
            with group.lock:
                # Another member may have joined meanwhile: act only on this generation.
                if group.is_(_S.COMPLETING_REBALANCE) and generation_id == group.generation_id:
                    if error != ErrorCode.none:
                        self.reset_and_propagate_assignment_error(group, error)
                        self.maybe_prepare_rebalance(
                            group,
                            f"Error when storing group assignment during SyncGroup "
                            f"(member: {member_id})",
                        )
                    else:
                        self.set_and_propagate_assignment(group, assignment)
                        group.transition_to(_S.STABLE)

        self.group_manager.store_group(group, assignment, stored)

    # -- Heartbeat ---------------------------------------------------------------------------
    def handle_heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        error = self.validate_group_status(group_id, allow_empty=False)
        if error == ErrorCode.coordinator_load_in_progress:
            return ErrorCode.none  # the group is loading: answer blindly
        if error is not None:
            return error
        group = self.group_manager.get_group(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        with group.lock:
            if group.is_(_S.DEAD):
                return ErrorCode.coordinator_not_available
            error = self.validate_current_member(group, member_id, group_instance_id, "heartbeat")
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.illegal_generation
            if group.is_(_S.EMPTY):
                return ErrorCode.unknown_member_id
            member = group.get(member_id)
            if group.is_(_S.COMPLETING_REBALANCE):
                # Members may heartbeat between their JoinGroup and SyncGroup responses.
                self.complete_and_schedule_next_heartbeat_expiration(group, member)
                return ErrorCode.none
            if group.is_(_S.PREPARING_REBALANCE):
                self.complete_and_schedule_next_heartbeat_expiration(group, member)
                return ErrorCode.rebalance_in_progress
            self.complete_and_schedule_next_heartbeat_expiration(group, member)
            return ErrorCode.none

    # -- LeaveGroup --------------------------------------------------------------------------
    def handle_leave_group(
        self, group_id: str, leaving: list[MemberIdentity], reason: str | None = None
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(group error, one error per leaving member); v3+ leaves several at once and
        may name members by group.instance.id alone."""
        error = self.validate_group_status(group_id, allow_empty=False)
        if error is not None:
            return error, []
        group = self.group_manager.get_group(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id] * len(leaving)
        with group.lock:
            if group.is_(_S.DEAD):
                return ErrorCode.coordinator_not_available, []
            return ErrorCode.none, [
                self._leave_one(group, member_id, instance_id, reason)
                for member_id, instance_id in leaving
            ]

    def _leave_one(
        self, group: GroupMetadata, member_id: str, instance_id: str | None, reason: str | None
    ) -> ErrorCode:
        if member_id == UNKNOWN_MEMBER_ID:
            current = None if instance_id is None else group.current_static_member_id(instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            self._remove_current_member(group, current, reason)
            return ErrorCode.none
        if group.is_pending_member(member_id):
            self.remove_pending_member_and_update_group(group, member_id)
            self.remove_heartbeat_for_leaving_member(group, member_id)
            log.info(
                "Pending member with memberId=%s has left group %s through explicit "
                "`LeaveGroup` request", member_id, group.group_id,
            )  # fmt: skip
            return ErrorCode.none
        error = self.validate_current_member(group, member_id, instance_id, "leave-group")
        if error is not None:
            return error
        self._remove_current_member(group, member_id, reason)
        return ErrorCode.none

    def _remove_current_member(
        self, group: GroupMetadata, member_id: str, reason: str | None
    ) -> None:
        member = group.get(member_id)
        why = reason or "not provided"
        self.remove_member_and_update_group(
            group, member, f"Removing member {member_id} on LeaveGroup; client reason: {why}"
        )
        self.remove_heartbeat_for_leaving_member(group, member_id)
        log.info(
            "Member %s has left group %s through explicit `LeaveGroup` request; client reason: %s",
            member, group.group_id, why,
        )  # fmt: skip

    # == rebalance machinery ==================================================================
    # -- validation ------------------------------------------------------------------------
    def validate_group_status(self, group_id: str | None, allow_empty: bool) -> ErrorCode | None:
        """INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or
        NOT_COORDINATOR when this coordinator cannot serve the group now, else None. A group
        id too long for the keys of ``__consumer_offsets`` (an int16 string) is invalid."""
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.invalid_group_id
        if len(group_id) > MAX_STRING_BYTES // 4 and len(group_id.encode()) > MAX_STRING_BYTES:
            return ErrorCode.invalid_group_id
        if not self.is_active:
            return ErrorCode.coordinator_not_available
        if self.group_manager.is_group_loading(group_id):
            return ErrorCode.coordinator_load_in_progress
        if not self.group_manager.is_group_local(group_id):
            return ErrorCode.not_coordinator
        return None

    @staticmethod
    def validate_current_member(
        group: GroupMetadata, member_id: str, group_instance_id: str | None, operation: str
    ) -> ErrorCode | None:
        """A static member must be the instance's current member id (else it is fenced);
        any member must be in the group."""
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                log.info(
                    "Request memberId=%s for static member with groupInstanceId=%s is fenced "
                    "by current memberId=%s during operation %s",
                    member_id, group_instance_id, current, operation,
                )  # fmt: skip
                return ErrorCode.fenced_instance_id
            return None
        if not group.has(member_id):
            return ErrorCode.unknown_member_id
        return None

    def _watch(self, purgatory: Purgatory, op: DelayedOperation, keys: list[object]) -> None:
        """Park a delayed operation; a coordinator that has shut down parks nothing."""
        if self.is_active:
            purgatory.try_complete_else_watch(op, keys)

    def _partition_name(self, group_id: str) -> str:
        return f"{GROUP_METADATA_TOPIC_NAME}-{self.group_manager.partition_for(group_id)}"

    def _group_fields(self, group: GroupMetadata, event: str) -> dict[str, object]:
        """The ids of a group's log line, as structured fields (``--log-format json``)."""
        return {
            "event": event, "group_id": group.group_id, "generation_id": group.generation_id,
            "member_count": group.size, "group_state": str(group.state),
            "topic": GROUP_METADATA_TOPIC_NAME,
            "partition": self.group_manager.partition_for(group.group_id),
        }  # fmt: skip

    # -- rebalancing -----------------------------------------------------------------------
    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        with group.lock:
            if group.can_rebalance():
                self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        with group.lock:
            if group.is_(_S.COMPLETING_REBALANCE):
                self.reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
            self.remove_sync_expiration(group)
            delayed: DelayedJoin
            if group.is_(_S.EMPTY):
                initial = self.config.group_initial_rebalance_delay_ms
                delayed = InitialDelayedJoin(
                    self, self.rebalance_purgatory, group, initial, initial,
                    max(group.rebalance_timeout_ms - initial, 0),
                )  # fmt: skip
            else:
                delayed = DelayedJoin(self, group, group.rebalance_timeout_ms)
            old_state = group.state
            group.transition_to(_S.PREPARING_REBALANCE)
            log.info(
                "Preparing to rebalance group %s in state %s with old generation %d and %d "
                "members (%s) (reason: %s)",
                group.group_id, old_state, group.generation_id, group.size,
                self._partition_name(group.group_id), reason,
                extra=self._group_fields(group, "rebalance_begin"),
            )  # fmt: skip
            self._watch(self.rebalance_purgatory, delayed, [join_key(group.group_id)])

    def try_complete_join(self, group: GroupMetadata, force_complete: Callable[[], bool]) -> bool:
        with group.lock:
            return force_complete() if group.has_all_members_joined() else False

    def on_complete_join(self, group: GroupMetadata) -> None:
        with group.lock:
            gone = [m for m in group.not_yet_rejoined_members() if not m.is_static_member]
            if gone:
                log.info(
                    "Group %s removed dynamic members who haven't joined: %s",
                    group.group_id, [m.member_id for m in gone],
                )  # fmt: skip
                for member in gone:
                    group.remove(member.member_id)
                    self.remove_heartbeat_for_leaving_member(group, member.member_id)
            if group.is_(_S.DEAD):
                log.info("Group %s is dead, skipping rebalance stage", group.group_id)
            elif not group.maybe_elect_new_joined_leader() and group.members:
                log.error(
                    "Group %s could not complete rebalance because no members rejoined",
                    group.group_id,
                )
                self._watch(
                    self.rebalance_purgatory,
                    DelayedJoin(self, group, group.rebalance_timeout_ms),
                    [join_key(group.group_id)],
                )
            else:
                group.init_next_generation()
                if group.is_(_S.EMPTY):
                    log.info(
                        "Group %s with generation %d is now empty (%s)",
                        group.group_id, group.generation_id, self._partition_name(group.group_id),
                    )  # fmt: skip
                    self.group_manager.store_group(group, {}, lambda _error: None)
                else:
                    self._complete_join_for_members(group)

    def _complete_join_for_members(self, group: GroupMetadata) -> None:
        log.info(
            "Stabilized group %s generation %d (%s) with %d members",
            group.group_id, group.generation_id, self._partition_name(group.group_id), group.size,
            extra=self._group_fields(group, "rebalance_complete"),
        )  # fmt: skip
        for member in list(group.members.values()):
            is_leader = group.is_leader(member.member_id)
            result = JoinGroupResult(
                member_id=member.member_id,
                error=ErrorCode.none,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader_id=group.leader_or_empty(),
                members=group.current_member_metadata() if is_leader else (),
            )
            group.maybe_invoke_join_callback(member, result)
            self.complete_and_schedule_next_heartbeat_expiration(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self.schedule_pending_sync(group)

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        if not group.is_(_S.COMPLETING_REBALANCE):
            raise RuntimeError(f"Group {group.group_id} must be awaiting sync, is {group.state}")
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def set_and_propagate_assignment(
        self, group: GroupMetadata, assignment: dict[str, bytes]
    ) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self.propagate_assignment(group, ErrorCode.none)

    def propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error == ErrorCode.none
        protocol_type = group.protocol_type if ok else None
        protocol_name = group.protocol_name if ok else None
        for member in list(group.members.values()):
            result = SyncGroupResult(error, protocol_type, protocol_name, member.assignment)
            if group.maybe_invoke_sync_callback(member, result):
                # The member now heartbeats within its session timeout or is removed.
                self.complete_and_schedule_next_heartbeat_expiration(group, member)

    def remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        # A new member may time out while its JoinGroup waits: answer it so it can retry.
        group.maybe_invoke_join_callback(
            member, JoinGroupResult(UNKNOWN_MEMBER_ID, ErrorCode.unknown_member_id)
        )
        group.remove(member.member_id)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_(_S.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    def remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        if group.is_(_S.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    # -- pending syncs ---------------------------------------------------------------------
    def schedule_pending_sync(self, group: GroupMetadata) -> None:
        op = DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms)
        self._watch(self.rebalance_purgatory, op, [sync_key(group.group_id)])

    def remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))

    def remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))

    def try_complete_pending_sync(
        self, group: GroupMetadata, generation_id: int, force_complete: Callable[[], bool]
    ) -> bool:
        with group.lock:
            if generation_id != group.generation_id or group.state in (
                _S.DEAD, _S.EMPTY, _S.PREPARING_REBALANCE
            ):  # fmt: skip
                return force_complete()
            return force_complete() if group.has_received_sync_from_all_members() else False

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        with group.lock:
            if generation_id != group.generation_id:
                return
            if (
                group.state in (_S.COMPLETING_REBALANCE, _S.STABLE)
                and not group.has_received_sync_from_all_members()
            ):
                pending = sorted(group.pending_sync_members)
                for member_id in pending:
                    group.remove(member_id)
                    self.remove_heartbeat_for_leaving_member(group, member_id)
                self.prepare_rebalance(
                    group, f"Removing {pending} on pending sync request expiration"
                )

    # -- liveness --------------------------------------------------------------------------
    def complete_and_schedule_next_heartbeat_expiration(
        self, group: GroupMetadata, member: MemberMetadata
    ) -> None:
        self.complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def complete_and_schedule_next_expiration(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int
    ) -> None:
        key = member_key(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        op = DelayedHeartbeat(self, group, member.member_id, False, timeout_ms)
        self._watch(self.heartbeat_purgatory, op, [key])

    def add_pending_member_expiration(
        self, group: GroupMetadata, member_id: str, timeout_ms: int
    ) -> None:
        op = DelayedHeartbeat(self, group, member_id, True, timeout_ms)
        self._watch(self.heartbeat_purgatory, op, [member_key(group.group_id, member_id)])

    def remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member_id: str) -> None:
        self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member_id))

    def try_complete_heartbeat(
        self,
        group: GroupMetadata,
        member_id: str,
        is_pending: bool,
        force_complete: Callable[[], bool],
    ) -> bool:
        with group.lock:
            if group.is_(_S.DEAD):
                return force_complete()
            if is_pending:
                return force_complete() if group.has(member_id) else False
            member = group.members.get(member_id)
            if member is None or member.has_satisfied_heartbeat:
                return force_complete()
            return False

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        with group.lock:
            if group.is_(_S.DEAD):
                return
            if is_pending:
                log.info(
                    "Pending member %s in group %s has been removed after session timeout "
                    "expiration.", member_id, group.group_id,
                )  # fmt: skip
                self.remove_pending_member_and_update_group(group, member_id)
                return
            member = group.members.get(member_id)
            if member is not None and not member.has_satisfied_heartbeat:
                log.info(
                    "Member %s in group %s has failed, removing it from the group",
                    member_id, group.group_id,
                )  # fmt: skip
                self.remove_member_and_update_group(
                    group, member, f"removing member {member_id} on heartbeat expiration"
                )

    # -- loading and unloading -------------------------------------------------------------
    def on_group_loaded(self, group: GroupMetadata) -> None:
        with group.lock:
            log.info(
                "Loaded group %s generation %d in state %s with %d members and %d offsets",
                group.group_id, group.generation_id, group.state, group.size, len(group.offsets),
            )  # fmt: skip
            if group.size > self.config.group_max_size:
                self.prepare_rebalance(
                    group,
                    f"Freshly-loaded group is over capacity ({self.config.group_max_size}). "
                    "Rebalancing in order to give a chance for consumers to commit offsets",
                )
            for member in list(group.members.values()):
                self.complete_and_schedule_next_heartbeat_expiration(group, member)

    def on_group_unloaded(self, group: GroupMetadata) -> None:
        with group.lock:
            previous = group.state
            group.transition_to(_S.DEAD)
            if previous is _S.PREPARING_REBALANCE:
                for member in list(group.members.values()):
                    group.maybe_invoke_join_callback(
                        member, JoinGroupResult(member.member_id, ErrorCode.not_coordinator)
                    )
                self.rebalance_purgatory.check_and_complete(join_key(group.group_id))
            elif previous in (_S.STABLE, _S.COMPLETING_REBALANCE):
                for member in list(group.members.values()):
                    group.maybe_invoke_sync_callback(
                        member, SyncGroupResult(ErrorCode.not_coordinator)
                    )
                    self.remove_heartbeat_for_leaving_member(group, member.member_id)
            self.remove_sync_expiration(group)

    # == JoinGroup =============================================================================
    def handle_join_group(self, request: JoinGroupRequestData, callback: JoinCallback) -> None:
        """Join (or rejoin) a group; ``callback`` gets the result, perhaps only once the
        rebalance completes."""
        error = self.validate_group_status(request.group_id, allow_empty=False)
        if error is not None:
            callback(JoinGroupResult(request.member_id, error))
            return
        if not (
            self.config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            callback(JoinGroupResult(request.member_id, ErrorCode.invalid_session_timeout))
            return
        is_unknown_member = request.member_id == UNKNOWN_MEMBER_ID
        group = self.group_manager.get_or_maybe_create_group(request.group_id, is_unknown_member)
        if group is None:
            callback(JoinGroupResult(request.member_id, ErrorCode.unknown_member_id))
            return
        with group.lock:
            if not self._accept_joining_member(group, request.member_id):
                group.remove(request.member_id)
                callback(JoinGroupResult(UNKNOWN_MEMBER_ID, ErrorCode.group_max_size_reached))
            elif is_unknown_member:
                self._do_new_member_join_group(group, request, callback)
            else:
                self._do_current_member_join_group(group, request, callback)
            if group.is_(_S.PREPARING_REBALANCE):
                self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        if group.state in (_S.EMPTY, _S.DEAD):
            return True
        if group.is_(_S.PREPARING_REBALANCE):
            known = group.members.get(member_id)
            return (known is not None and known.is_awaiting_join) or (
                group.num_members_awaiting_join < self.config.group_max_size
            )
        return group.has(member_id) or group.size < self.config.group_max_size

    def _do_new_member_join_group(
        self, group: GroupMetadata, request: JoinGroupRequestData, callback: JoinCallback
    ) -> None:
        protocol_names = {name for name, _ in request.protocols}
        if group.is_(_S.DEAD):
            callback(JoinGroupResult(UNKNOWN_MEMBER_ID, ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(request.protocol_type, protocol_names):
            callback(JoinGroupResult(UNKNOWN_MEMBER_ID, ErrorCode.inconsistent_group_protocol))
            return
        new_member_id = group.generate_member_id(request.client_id, request.group_instance_id)
        instance_id = request.group_instance_id
        if instance_id is not None:
            old_member_id = group.current_static_member_id(instance_id)
            if old_member_id is not None:
                log.info(
                    "Static member with groupInstanceId=%s and unknown member id joins group %s "
                    "in %s state. Replacing previously mapped member %s with this "
                    "groupInstanceId.", instance_id, group.group_id, group.state, old_member_id,
                )  # fmt: skip
                self._update_static_member_and_rebalance(
                    group, old_member_id, new_member_id, request, callback
                )
            else:
                self._add_member_and_rebalance(group, new_member_id, request, callback)
        elif request.require_known_member_id:
            # v4+: hand out a member id and ask the member to join again with it.
            group.add_pending_member(new_member_id)
            self.add_pending_member_expiration(group, new_member_id, request.session_timeout_ms)
            callback(JoinGroupResult(new_member_id, ErrorCode.member_id_required))
        else:
            self._add_member_and_rebalance(group, new_member_id, request, callback)

    def _do_current_member_join_group(
        self, group: GroupMetadata, request: JoinGroupRequestData, callback: JoinCallback
    ) -> None:
        member_id = request.member_id
        protocol_names = {name for name, _ in request.protocols}
        if group.is_(_S.DEAD):
            callback(JoinGroupResult(member_id, ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(request.protocol_type, protocol_names):
            callback(JoinGroupResult(member_id, ErrorCode.inconsistent_group_protocol))
            return
        if group.is_pending_member(member_id):
            if request.group_instance_id is not None:
                callback(JoinGroupResult(member_id, ErrorCode.unknown_member_id))
                return
            self._add_member_and_rebalance(group, member_id, request, callback)
            return
        error = self.validate_current_member(
            group, member_id, request.group_instance_id, "join-group"
        )
        if error is not None:
            callback(JoinGroupResult(member_id, error))
            return
        member = group.get(member_id)
        reason = request.reason or "not provided"
        if group.is_(_S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(
                group, member, request, callback,
                f"Member {member_id} joining group during {group.state}; client reason: {reason}",
            )  # fmt: skip
        elif group.is_(_S.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # The member lost the JoinGroup response: answer it again.
                callback(self._current_generation_result(group, member_id, with_members=True))
            else:
                self._update_member_and_rebalance(
                    group, member, request, callback,
                    f"Updating metadata for member {member_id} during {group.state}; "
                    f"client reason: {reason}",
                )  # fmt: skip
        elif group.is_(_S.STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                # A leader rejoining asks for a rebalance (e.g. topic metadata changed).
                self._update_member_and_rebalance(
                    group, member, request, callback,
                    f"Member {member_id} rejoining group during {group.state}; "
                    f"client reason: {reason}",
                )  # fmt: skip
            else:
                callback(self._current_generation_result(group, member_id, with_members=False))
        else:
            log.warning(
                "Attempt to add rejoining member %s of group %s in unexpected group state %s",
                member_id, group.group_id, group.state,
            )  # fmt: skip
            callback(JoinGroupResult(member_id, ErrorCode.unknown_member_id))

    @staticmethod
    def _current_generation_result(
        group: GroupMetadata, member_id: str, with_members: bool
    ) -> JoinGroupResult:
        members = (
            group.current_member_metadata() if with_members and group.is_leader(member_id) else ()
        )
        return JoinGroupResult(
            member_id=member_id,
            error=ErrorCode.none,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_or_empty(),
            members=members,
        )

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        member_id: str,
        request: JoinGroupRequestData,
        callback: JoinCallback,
    ) -> None:
        member = MemberMetadata(
            member_id, group.group_id, request.group_instance_id, request.client_id,
            request.client_host, request.rebalance_timeout_ms, request.session_timeout_ms,
            request.protocol_type, list(request.protocols),
        )  # fmt: skip
        member.is_new = True
        if group.is_(_S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        # A new member that never completes its join is dropped after this long.
        self.complete_and_schedule_next_expiration(
            group, member, self.config.new_member_join_timeout_ms
        )
        self.maybe_prepare_rebalance(
            group,
            f"Adding new member {member_id} with group instance id {request.group_instance_id}; "
            f"client reason: {request.reason or 'not provided'}",
        )

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        request: JoinGroupRequestData,
        callback: JoinCallback,
        reason: str,
    ) -> None:
        group.update_member(
            member, list(request.protocols), request.rebalance_timeout_ms,
            request.session_timeout_ms, callback,
        )  # fmt: skip
        self.maybe_prepare_rebalance(group, reason)

    def _update_static_member_and_rebalance(
        self,
        group: GroupMetadata,
        old_member_id: str,
        new_member_id: str,
        request: JoinGroupRequestData,
        callback: JoinCallback,
    ) -> None:
        instance_id = request.group_instance_id
        assert instance_id is not None
        current_leader = group.leader_or_empty()
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        # The old member id's heartbeat expires harmlessly; the new id gets its own.
        self.complete_and_schedule_next_heartbeat_expiration(group, member)
        previous = (member.supported_protocols, member.rebalance_timeout_ms,
                    member.session_timeout_ms)  # fmt: skip
        group.update_member(
            member, list(request.protocols), request.rebalance_timeout_ms,
            request.session_timeout_ms, callback,
        )  # fmt: skip
        reason = request.reason or "not provided"
        if group.is_(_S.STABLE):
            selected = group.select_protocol()
            if group.protocol_name == selected:
                self._rejoin_stable_static_member(
                    group, member, old_member_id, previous, current_leader, request, callback
                )
            else:
                self.maybe_prepare_rebalance(
                    group,
                    f"Group's selectedProtocol will change because static member "
                    f"{new_member_id} with instance id {instance_id} joined with change of "
                    f"protocol; client reason: {reason}",
                )
        elif group.is_(_S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(
                group,
                f"Updating metadata for static member {new_member_id} with instance id "
                f"{instance_id}; client reason: {reason}",
            )
        # PreparingRebalance: the member waits for the join to complete like the others.

    def _rejoin_stable_static_member(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        old_member_id: str,
        previous: tuple[list[tuple[str, bytes]], int, int],
        current_leader: str,
        request: JoinGroupRequestData,
        callback: JoinCallback,
    ) -> None:
        """A static member back within its session timeout: persist its new member id and
        let it keep its assignment, without a rebalance."""
        instance_id = request.group_instance_id
        assert instance_id is not None
        new_member_id = member.member_id
        log.info(
            "Static member %s of group %s rejoined as %s; the group stays Stable",
            instance_id, group.group_id, new_member_id,
        )  # fmt: skip
        assignment = {m.member_id: m.assignment for m in group.members.values()}

        def stored(error: ErrorCode) -> None:
            with group.lock:
                if error != ErrorCode.none:
                    log.warning(
                        "Failed to persist metadata for group %s: %s", group.group_id, error.name
                    )
                    # Undo: the instance goes back to its previous member id.
                    group.update_member(member, *previous, None)
                    old = group.replace_static_member(instance_id, new_member_id, old_member_id)
                    self.complete_and_schedule_next_heartbeat_expiration(group, old)
                    callback(
                        JoinGroupResult(
                            UNKNOWN_MEMBER_ID,
                            error,
                            group.generation_id,
                            group.protocol_type,
                            group.protocol_name,
                            current_leader,
                        )
                    )
                    return
                if request.support_skipping_assignment:
                    # v9+: the leader learns it leads but skips running the assignor.
                    is_leader = group.is_leader(new_member_id)
                    result = JoinGroupResult(
                        new_member_id, ErrorCode.none, group.generation_id,
                        group.protocol_type, group.protocol_name, group.leader_or_empty(),
                        skip_assignment=is_leader,
                        members=group.current_member_metadata() if is_leader else (),
                    )  # fmt: skip
                else:
                    # Before v9 the old leader id is returned, so a rejoining leader does
                    # not compute an assignment that a Stable group would ignore.
                    result = JoinGroupResult(
                        new_member_id, ErrorCode.none, group.generation_id,
                        group.protocol_type, group.protocol_name, current_leader,
                    )  # fmt: skip
                group.maybe_invoke_join_callback(member, result)

        self.group_manager.store_group(group, assignment, stored)

    # == offsets and administration ==============================================================
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
                GroupMetadata(group_id, _S.EMPTY, self.group_manager.clock)
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
                GroupMetadata(group_id, _S.EMPTY, self.group_manager.clock)
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
