"""``GroupConfig``: the broker settings the group coordinator uses, under Kafka's names."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["GROUP_METADATA_TOPIC_NAME", "GroupConfig"]

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"


@dataclasses.dataclass(frozen=True, slots=True)
class GroupConfig:
    """group.* and offsets.* settings (Kafka's GroupConfig and OffsetConfig)."""

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    group_initial_rebalance_delay_ms: int = 3000
    offsets_topic_num_partitions: int = 50
    offsets_retention_ms: int = 10_080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    offset_commit_timeout_ms: int = 5000
    new_member_join_timeout_ms: int = 300_000

    @classmethod
    def from_broker_config(cls, config: Any) -> GroupConfig:
        """From a ``BrokerConfig`` (anything indexable by Kafka property name)."""
        return cls(
            group_min_session_timeout_ms=int(config["group.min.session.timeout.ms"]),
            group_max_session_timeout_ms=int(config["group.max.session.timeout.ms"]),
            group_max_size=int(config["group.max.size"]),
            group_initial_rebalance_delay_ms=int(config["group.initial.rebalance.delay.ms"]),
            offsets_topic_num_partitions=int(config["offsets.topic.num.partitions"]),
            offsets_retention_ms=int(config["offsets.retention.minutes"]) * 60_000,
            offsets_retention_check_interval_ms=int(config["offsets.retention.check.interval.ms"]),
            offset_metadata_max_bytes=int(config["offset.metadata.max.bytes"]),
        )
