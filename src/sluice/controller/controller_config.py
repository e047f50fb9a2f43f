"""The broker settings the controller reads, under Kafka's own names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["ControllerConfig"]


class _ConfigLike(Protocol):
    def __getitem__(self, key: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Controller settings: ``broker.id``, ``unclean.leader.election.enable``,
    ``auto.leader.rebalance.enable``, ``leader.imbalance.*``, ``delete.topic.enable``."""

    broker_id: int
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    delete_topic_enable: bool = True

    @classmethod
    def from_broker_config(cls, config: _ConfigLike) -> ControllerConfig:
        """Read the keys from a broker config (anything indexable by Kafka key)."""
        return cls(
            broker_id=int(config["broker.id"]),
            unclean_leader_election_enable=bool(config["unclean.leader.election.enable"]),
            auto_leader_rebalance_enable=bool(config["auto.leader.rebalance.enable"]),
            leader_imbalance_check_interval_seconds=int(
                config["leader.imbalance.check.interval.seconds"]
            ),
            leader_imbalance_per_broker_percentage=int(
                config["leader.imbalance.per.broker.percentage"]
            ),
            delete_topic_enable=bool(config["delete.topic.enable"]),
        )
