"""``CoordinatorBase``: the rebalance machinery the group APIs share.

Preparing and completing rebalances, pending syncs, member liveness through
DelayedHeartbeat, and loading/unloading groups, following Kafka's
``GroupCoordinator``. Every method that touches a group holds its lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

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
from sluice.coordinator.group.manager import GroupMetadataManager
from sluice.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    JoinGroupResult,
    MemberMetadata,
    SyncGroupResult,
)
from sluice.coordinator.group.metadata import GroupMetadata, GroupState
from sluice.protocol import ErrorCode
from sluice.purgatory import DelayedOperation, DelayedOperationPurgatory

__all__ = ["CoordinatorBase"]

log = logging.getLogger("sluice.coordinator.group")

_S = GroupState
Purgatory = DelayedOperationPurgatory[DelayedOperation]


class CoordinatorBase:
    """Shared state and rebalance steps of the group coordinator."""

    def __init__(
        self,
        config: GroupConfig,
        manager: GroupMetadataManager,
        rebalance_purgatory: Purgatory,
        heartbeat_purgatory: Purgatory,
    ) -> None:
        self.config = config
        self.group_manager = manager
        self.rebalance_purgatory = rebalance_purgatory
        self.heartbeat_purgatory = heartbeat_purgatory
        self.is_active = False

    # -- validation ------------------------------------------------------------------------
    def validate_group_status(self, group_id: str | None, allow_empty: bool) -> ErrorCode | None:
        """INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or
        NOT_COORDINATOR when this coordinator cannot serve the group now, else None."""
        if group_id is None or (not group_id and not allow_empty):
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
                "Preparing to rebalance group %s in state %s with old generation %d (%s) "
                "(reason: %s)",
                group.group_id, old_state, group.generation_id,
                self._partition_name(group.group_id), reason,
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
