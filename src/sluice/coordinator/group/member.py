"""``MemberMetadata``: one member of a classic group, and the join/sync results it awaits."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from sluice.protocol import ErrorCode

__all__ = [
    "JoinCallback",
    "JoinGroupResult",
    "JoinGroupResultMember",
    "MemberMetadata",
    "SyncCallback",
    "SyncGroupResult",
]

UNKNOWN_MEMBER_ID = ""


@dataclasses.dataclass(frozen=True, slots=True)
class JoinGroupResultMember:
    """A member as the leader sees it in the JoinGroup response: id, instance id, metadata."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """What a JoinGroup answers (Kafka's ``JoinGroupResult``)."""

    member_id: str
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupResultMember, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class SyncGroupResult:
    """What a SyncGroup answers: the member's assignment or an error."""

    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]


class MemberMetadata:
    """A group member: its ids, timeouts, supported protocols (name, metadata) in order of
    preference, its assignment, and the JoinGroup/SyncGroup response it is waiting for."""

    __slots__ = (
        "assignment",
        "awaiting_join_callback",
        "awaiting_sync_callback",
        "client_host",
        "client_id",
        "group_id",
        "group_instance_id",
        "heartbeat_satisfied",
        "is_new",
        "member_id",
        "protocol_type",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "supported_protocols",
    )

    def __init__(
        self,
        member_id: str,
        group_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        supported_protocols: list[tuple[str, bytes]],
        assignment: bytes = b"",
    ) -> None:
        self.member_id = member_id
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = supported_protocols
        self.assignment = assignment
        self.awaiting_join_callback: JoinCallback | None = None
        self.awaiting_sync_callback: SyncCallback | None = None
        self.is_new = False
        self.heartbeat_satisfied = False

    @property
    def is_static_member(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync_callback is not None

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """New members must heartbeat (join) in time; members in a rebalance need not."""
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def protocols(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata in the same order."""
        return self.supported_protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def __repr__(self) -> str:
        return (
            f"MemberMetadata(member_id={self.member_id}, group_instance_id="
            f"{self.group_instance_id}, client_id={self.client_id}, session_timeout_ms="
            f"{self.session_timeout_ms}, rebalance_timeout_ms={self.rebalance_timeout_ms})"
        )
