"""An in-process cluster of controllers for deterministic tests.

Every broker has its own session on one shared :class:`DataTree` (ManualClock), a
:class:`KafkaZkClient`, a :class:`RecordingControllerChannel` and a
:class:`KafkaController` whose events are processed by :meth:`InProcessCluster.run`
on the test's thread; nothing sleeps and nothing races.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sluice.base import TopicPartition
from sluice.base.clock import ManualClock
from sluice.controller import (
    AdminZkClient,
    Broker,
    ControllerConfig,
    KafkaController,
    KafkaZkClient,
    LeaderAndIsr,
    LeaderAndIsrRequest,
    RecordingControllerChannel,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from sluice.controller.requests import SentRequest
from sluice.metastore import DataTree, InProcessStore


@dataclass
class Node:
    """One broker of the in-process cluster."""

    broker: Broker
    store: InProcessStore
    zk: KafkaZkClient
    channel: RecordingControllerChannel
    controller: KafkaController
    alive: bool = True
    history: list[SentRequest] = field(default_factory=list)

    def take(self) -> list[SentRequest]:
        sent = self.channel.take()
        self.history.extend(sent)
        return sent


class InProcessCluster:
    """Brokers with controllers on one in-memory coordination tree."""

    def __init__(self, broker_ids: Iterable[int] = (1, 2, 3), **config: object) -> None:
        self.clock = ManualClock(1_000_000)
        self.tree = DataTree(self.clock)
        self.admin_zk = KafkaZkClient(InProcessStore(self.tree), clock=self.clock)
        self.admin_zk.create_top_level_paths()
        self.admin = AdminZkClient(self.admin_zk)
        self.config = config
        self.nodes: dict[int, Node] = {}
        for broker_id in broker_ids:
            self.start_broker(broker_id)

    def start_broker(self, broker_id: int) -> Node:
        store = InProcessStore(self.tree, session_timeout_ms=6_000)
        zk = KafkaZkClient(store, clock=self.clock)
        broker = Broker.plaintext(broker_id, "127.0.0.1", 9090 + broker_id)
        epoch = zk.register_broker(broker)
        channel = RecordingControllerChannel()
        config = ControllerConfig(broker_id=broker_id, **self.config)  # type: ignore[arg-type]
        controller = KafkaController(
            config, zk, channel, self.clock, broker=broker, broker_epoch=epoch
        )
        node = Node(broker, store, zk, channel, controller)
        self.nodes[broker_id] = node
        controller.startup(start_thread=False)
        return node

    def run(self, first: Sequence[int] = (), max_rounds: int = 1_000) -> None:
        """Process every live controller's events until all queues are empty."""
        for _ in range(max_rounds):
            order = [*first, *sorted(set(self.nodes) - set(first))]
            processed = 0
            for broker_id in order:
                node = self.nodes[broker_id]
                if node.alive:
                    processed += node.controller.event_manager.process_pending()
            if processed == 0:
                return
        raise AssertionError("controller events did not settle")

    def kill(self, broker_id: int) -> None:
        """The broker dies: its session closes and its controller stops."""
        node = self.nodes[broker_id]
        node.alive = False
        node.store.close()

    def restart(self, broker_id: int) -> Node:
        self.nodes.pop(broker_id)
        return self.start_broker(broker_id)

    def active(self) -> Node:
        actives = [n for n in self.nodes.values() if n.alive and n.controller.is_active]
        assert len(actives) == 1, f"expected one active controller, got {len(actives)}"
        return actives[0]

    # -- ZooKeeper views ------------------------------------------------------------
    def controller_znode(self) -> tuple[int | None, int]:
        """(/controller's broker id, /controller_epoch)."""
        epoch = self.admin_zk.get_controller_epoch()
        return self.admin_zk.get_controller_id(), epoch[0] if epoch else 0

    def state(self, topic: str, partition: int) -> LeaderAndIsr:
        tp = TopicPartition(topic, partition)
        return self.admin_zk.get_topic_partition_states([tp])[tp].leader_and_isr

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        config: Mapping[str, str] | None = None,
    ) -> None:
        self.admin.create_topic_with_assignment(topic, assignment, config)
        self.run()

    def leader_changes_isr(self, topic: str, partition: int, isr: Sequence[int]) -> None:
        """What a partition leader does on ISR shrink/expand: a conditional write of the
        state znode plus an ISR change notification."""
        self._rewrite_state(topic, partition, None, isr)

    def move_leader_behind_the_controllers_back(
        self, topic: str, partition: int, leader: int
    ) -> None:
        """Make ``leader`` lead (as an earlier controller could have left it) and let the
        controller refresh its cache through an ISR change notification."""
        self._rewrite_state(topic, partition, leader, None)

    def _rewrite_state(
        self, topic: str, partition: int, leader: int | None, isr: Sequence[int] | None
    ) -> None:
        tp = TopicPartition(topic, partition)
        current = self.admin_zk.get_topic_partition_states([tp])[tp]
        lai = current.leader_and_isr
        if leader is not None:
            lai = lai.new_leader_and_isr(leader, lai.isr)
        if isr is not None:
            lai = LeaderAndIsr(lai.leader, tuple(isr), lai.leader_epoch, lai.zk_version)
        written = self.admin_zk.update_leader_and_isr({tp: lai}, current.controller_epoch, None)
        assert isinstance(written.finished[tp], LeaderAndIsr)
        self.admin_zk.propagate_isr_changes([tp])
        self.run()

    # -- requests the active controller sent ----------------------------------------
    def sent(self) -> list[SentRequest]:
        """Take everything every controller sent since the last call."""
        out: list[SentRequest] = []
        for node in self.nodes.values():
            out.extend(node.take())
        return out


def leader_and_isr_to(sent: list[SentRequest], broker_id: int) -> list[LeaderAndIsrRequest]:
    return [
        s.request
        for s in sent
        if s.broker_id == broker_id and isinstance(s.request, LeaderAndIsrRequest)
    ]


def stop_replica_to(sent: list[SentRequest], broker_id: int) -> list[StopReplicaRequest]:
    return [
        s.request
        for s in sent
        if s.broker_id == broker_id and isinstance(s.request, StopReplicaRequest)
    ]


def update_metadata_to(sent: list[SentRequest], broker_id: int) -> list[UpdateMetadataRequest]:
    return [
        s.request
        for s in sent
        if s.broker_id == broker_id and isinstance(s.request, UpdateMetadataRequest)
    ]
