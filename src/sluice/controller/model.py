"""The controller's value types, named as in Kafka: LeaderAndIsr, ReplicaAssignment, Broker.

All are immutable; a new leader or ISR is a new :class:`LeaderAndIsr` with the leader
epoch bumped (Kafka's ``newLeaderAndIsr``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

__all__ = [
    "INITIAL_CONTROLLER_EPOCH",
    "INITIAL_CONTROLLER_EPOCH_ZK_VERSION",
    "INITIAL_LEADER_EPOCH",
    "INITIAL_PARTITION_EPOCH",
    "LEADER_DURING_DELETE",
    "NO_LEADER",
    "Broker",
    "EndPoint",
    "LeaderAndIsr",
    "LeaderIsrAndControllerEpoch",
    "ReplicaAssignment",
]

NO_LEADER = -1
LEADER_DURING_DELETE = -2
INITIAL_LEADER_EPOCH = 0
INITIAL_PARTITION_EPOCH = 0
INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch and ISR; ``zk_version`` is its state znode's version."""

    leader: int
    isr: tuple[int, ...]
    leader_epoch: int = INITIAL_LEADER_EPOCH
    zk_version: int = INITIAL_PARTITION_EPOCH
    leader_recovery_state: int = 0

    @property
    def leader_opt(self) -> int | None:
        return None if self.leader == NO_LEADER else self.leader

    def new_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        """The next generation: a (possibly new) leader and ISR with the leader epoch + 1."""
        return replace(self, leader=leader, isr=tuple(isr), leader_epoch=self.leader_epoch + 1)

    def new_epoch(self) -> LeaderAndIsr:
        """Same leader and ISR, next leader epoch."""
        return self.new_leader_and_isr(self.leader, self.isr)

    def with_zk_version(self, zk_version: int) -> LeaderAndIsr:
        return replace(self, zk_version=zk_version)

    def equals_ignore_zk_version(self, other: LeaderAndIsr) -> bool:
        return replace(self, zk_version=0) == replace(other, zk_version=0)


@dataclass(frozen=True, slots=True)
class LeaderIsrAndControllerEpoch:
    """A LeaderAndIsr with the epoch of the controller that wrote it, and when read
    from ZooKeeper the zxid of that write (the znode's ``mzxid``; -1 otherwise)."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int
    written_zxid: int = field(default=-1, compare=False)

    def names_restarted(self, broker_epochs: Mapping[int, int]) -> set[int]:
        """The leader and ISR members whose registration (broker epoch: its czxid) is
        newer than this state: they restarted, or lost their session, after it was
        written, so it may name them on a log tail they no longer have."""
        if self.written_zxid < 0:
            return set()
        lai = self.leader_and_isr
        named = {*lai.isr, lai.leader} if lai.leader >= 0 else set(lai.isr)
        return {b for b in named if broker_epochs.get(b, -1) > self.written_zxid}


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's assigned replicas (AR) in preference order, with any reassignment."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """The replicas before the reassignment (ORS): all but the adding ones."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    @property
    def preferred_replica(self) -> int:
        return self.replicas[0]

    def reassign_to(self, target: Iterable[int]) -> ReplicaAssignment:
        """The assignment while moving to ``target`` (KIP-455): RS = TRS + ORS (target
        first, no duplicates), adding = RS - ORS, removing = RS - TRS."""
        target = tuple(target)
        origin = self.origin_replicas
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target),
        )


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One listener of a broker: ``PLAINTEXT://host:9092``."""

    host: str
    port: int
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 address
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Broker:
    """A broker as registered in /brokers/ids/N: id, listeners, rack."""

    id: int
    endpoints: tuple[EndPoint, ...] = field(default_factory=tuple)
    rack: str | None = None

    @classmethod
    def plaintext(cls, broker_id: int, host: str, port: int, rack: str | None = None) -> Broker:
        return cls(broker_id, (EndPoint(host, port),), rack)

    def endpoint(self, listener_name: str) -> EndPoint | None:
        """This broker's endpoint on the listener ``listener_name``, if it has one."""
        for ep in self.endpoints:
            if ep.listener_name == listener_name:
                return ep
        return None
