"""``GroupCoordinator``: Kafka's classic group coordinator, sans I/O.

Requests come in as plain values with a callback (or return a result); time
passes only through the purgatories' timers; records go to a ``GroupLog``.
The broker wires it to the network, the replica manager and its event loop
(``sluice.server.group_runtime``); tests drive it with a manual clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sluice.coordinator.group.admin import GroupAdminSupport
from sluice.coordinator.group.config import GroupConfig
from sluice.coordinator.group.coordinator_base import Purgatory, log
from sluice.coordinator.group.join import JoinGroupSupport
from sluice.coordinator.group.manager import GroupLog, GroupMetadataManager
from sluice.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    SyncCallback,
    SyncGroupResult,
)
from sluice.coordinator.group.metadata import GroupMetadata, GroupState
from sluice.protocol import ErrorCode

__all__ = ["GroupCoordinator", "MemberIdentity"]

_S = GroupState

MemberIdentity = tuple[str, str | None]
"""(member id, group instance id) of a member leaving a group."""


class GroupCoordinator(JoinGroupSupport, GroupAdminSupport):
    """Runs classic consumer groups: membership and rebalances (JoinGroup, SyncGroup,
    Heartbeat, LeaveGroup), committed offsets, and group administration."""

    def __init__(
        self,
        config: GroupConfig,
        group_log: GroupLog,
        num_partitions: int,
        rebalance_purgatory: Purgatory,
        heartbeat_purgatory: Purgatory,
        now_ms: Callable[[], int],
    ) -> None:
        manager = GroupMetadataManager(config, group_log, num_partitions, now_ms)
        super().__init__(config, manager, rebalance_purgatory, heartbeat_purgatory)
        self.now_ms = now_ms

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
