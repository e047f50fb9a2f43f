"""``GroupMetadata``: a classic group's state machine, members and committed offsets."""

from __future__ import annotations

import enum
import logging
import threading
import uuid
from collections import Counter
from collections.abc import Callable

from sluice.base.clock import Clock
from sluice.coordinator.group.member import (
    JoinCallback,
    JoinGroupResult,
    JoinGroupResultMember,
    MemberMetadata,
    SyncGroupResult,
)
from sluice.coordinator.group.offsets import (
    CONSUMER_PROTOCOL_TYPE,
    CommitRecordMetadataAndOffset,
    GroupOffsets,
)
from sluice.coordinator.group.records import RecordError, read_subscription_topics
from sluice.protocol import ErrorCode

__all__ = ["GroupMetadata", "GroupState"]

log = logging.getLogger(__name__)

MAX_MEMBER_ID_PREFIX = 1024
"""Characters of the client or instance id a generated member id starts with."""


class GroupState(enum.Enum):
    """The classic group states, with Kafka's names on the wire."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_S = GroupState
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    _S.DEAD: frozenset(_S),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
}


class GroupMetadata(GroupOffsets):
    """One group: state, generation, protocol type and selected protocol, leader, members
    (static ones indexed by group.instance.id), members the coordinator waits for, and
    committed offsets. Guarded by ``lock``, which its delayed operations share."""

    def __init__(self, group_id: str, state: GroupState, clock: Clock) -> None:
        self.group_id = group_id
        self.state = state
        self._clock = clock
        self.current_state_timestamp: int | None = clock.milliseconds()
        self.lock = threading.RLock()
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_members_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self._init_offsets()

    # -- state -------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, state: GroupState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise RuntimeError(
                f"Group {self.group_id} should be in one of "
                f"{sorted(s.value for s in VALID_PREVIOUS_STATES[state])} before moving to "
                f"{state}, but it is {self.state}"
            )
        self.state = state
        self.current_state_timestamp = self._clock.milliseconds()

    # -- members -----------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def leader_or_empty(self) -> str:
        return self.leader_id or ""

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        """As Kafka's: the instance or client id, a dash and a UUID; of the id, at most
        :data:`MAX_MEMBER_ID_PREFIX` characters, so that the member id fits in a string of
        the group's record and of every response version however long the id was."""
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix[:MAX_MEMBER_ID_PREFIX]}-{uuid.uuid4()}"

    def add(self, member: MemberMetadata, callback: JoinCallback | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(
                    f"Static member {member.group_instance_id} is already in {self.group_id}"
                )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocols())
        member.awaiting_join_callback = callback
        if member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocols())
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Make a member that rejoined the leader if the current one did not; False when
        no member rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Give a static member a new member id; whoever waits as the old id is fenced."""
        member = self.members.pop(old_member_id)
        self.maybe_invoke_join_callback(
            member, JoinGroupResult(old_member_id, ErrorCode.fenced_instance_id)
        )
        self.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def add_pending_member(self, member_id: str) -> None:
        self.pending_members.add(member_id)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def update_member(
        self,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback | None,
    ) -> None:
        """New protocols and timeouts for a rejoining member, and its JoinGroup callback."""
        self.supported_protocols.subtract(member.protocols())
        member.supported_protocols = protocols
        self.supported_protocols.update(member.protocols())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.awaiting_join_callback = callback

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        callback = member.awaiting_join_callback
        if callback is not None:
            member.awaiting_join_callback = None
            self.num_members_awaiting_join -= 1
            try:
                callback(result)
            except Exception:
                log.exception("JoinGroup callback for %s failed", member.member_id)

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        callback = member.awaiting_sync_callback
        if callback is None:
            return False
        member.awaiting_sync_callback = None
        try:
            callback(result)
        except Exception:
            log.exception("SyncGroup callback for %s failed", member.member_id)
        return True

    # -- protocols -----------------------------------------------------------------------
    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[p] == len(self.members) for p in protocols
        )

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, count in self.supported_protocols.items() if count == n and n}

    def select_protocol(self) -> str:
        """Kafka's ``selectProtocol``: among the protocols every member supports, the one
        most members prefer (each votes for its first supported candidate)."""
        if not self.members:
            raise RuntimeError(f"Cannot select protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes.items(), key=lambda kv: kv[1])[0]

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(read_subscription_topics(member.metadata(self.protocol_name)))
        except (RecordError, KeyError, UnicodeDecodeError):
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def current_member_metadata(self) -> tuple[JoinGroupResultMember, ...]:
        if self.protocol_name is None or self.is_(GroupState.DEAD):
            raise RuntimeError(f"Cannot obtain member metadata for group {self.group_id}")
        protocol = self.protocol_name
        return tuple(
            JoinGroupResultMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        )

    # -- offsets expiration rule ---------------------------------------------------------
    def _offsets_expire_base(
        self,
    ) -> tuple[Callable[[CommitRecordMetadataAndOffset], int], set[str]] | None:
        def commit_time(entry: CommitRecordMetadataAndOffset) -> int:
            return entry.offset_and_metadata.commit_timestamp

        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            became_empty = self.current_state_timestamp
            if became_empty is None:
                return commit_time, set()
            return (lambda _: became_empty), set()
        if (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.is_(GroupState.STABLE)
        ):
            return commit_time, self.subscribed_topics
        if self.protocol_type is None:
            return commit_time, set()
        return None

    def __repr__(self) -> str:
        return (
            f"GroupMetadata(group_id={self.group_id}, generation={self.generation_id}, "
            f"protocol_type={self.protocol_type}, state={self.state}, "
            f"members={list(self.members)})"
        )
