"""Kafka's classic group coordinator (sans I/O): group state machine, rebalances,
member liveness, committed offsets and their records in ``__consumer_offsets``."""

from sluice.coordinator.group.config import GROUP_METADATA_TOPIC_NAME, GroupConfig
from sluice.coordinator.group.coordinator import (
    GroupCoordinator,
    GroupOverview,
    GroupSummary,
    JoinGroupRequestData,
    MemberIdentity,
    MemberSummary,
)
from sluice.coordinator.group.manager import (
    GroupLog,
    GroupMetadataManager,
    java_string_hash,
    partition_for,
)
from sluice.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    JoinGroupResult,
    JoinGroupResultMember,
    MemberMetadata,
    SyncGroupResult,
)
from sluice.coordinator.group.metadata import GroupMetadata, GroupState
from sluice.coordinator.group.offsets import OffsetAndMetadata

__all__ = [
    "GROUP_METADATA_TOPIC_NAME",
    "UNKNOWN_MEMBER_ID",
    "GroupConfig",
    "GroupCoordinator",
    "GroupLog",
    "GroupMetadata",
    "GroupMetadataManager",
    "GroupOverview",
    "GroupState",
    "GroupSummary",
    "JoinGroupRequestData",
    "JoinGroupResult",
    "JoinGroupResultMember",
    "MemberIdentity",
    "MemberMetadata",
    "MemberSummary",
    "OffsetAndMetadata",
    "SyncGroupResult",
    "java_string_hash",
    "partition_for",
]
