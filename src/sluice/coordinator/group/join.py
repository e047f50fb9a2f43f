"""JoinGroup: new and known members, dynamic and static, following Kafka's GroupCoordinator."""

from __future__ import annotations

import dataclasses

from sluice.coordinator.group.coordinator_base import CoordinatorBase, log
from sluice.coordinator.group.delayed import join_key
from sluice.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    JoinCallback,
    JoinGroupResult,
    MemberMetadata,
)
from sluice.coordinator.group.metadata import GroupMetadata, GroupState
from sluice.protocol import ErrorCode

__all__ = ["JoinGroupRequestData", "JoinGroupSupport"]

_S = GroupState


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


class JoinGroupSupport(CoordinatorBase):
    """The JoinGroup part of the group coordinator."""

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
