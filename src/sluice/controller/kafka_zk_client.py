"""Kafka's ZooKeeper operations over a coordination store (``kafka.zk.KafkaZkClient``).

Every write the controller makes is *fenced*: it runs in a ``multi`` together with a
check of ``/controller_epoch``'s version, so a controller that lost its office cannot
overwrite its successor's decisions (it gets :class:`ControllerMovedError` instead).
Admin writes (topic creation, deletion requests) pass ``None`` for no check.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sluice.base import TopicPartition
from sluice.base.clock import SYSTEM_CLOCK, Clock
from sluice.metastore import (
    BadVersionError,
    CheckOp,
    CoordinationError,
    CoordinationStore,
    CreateMode,
    CreateOp,
    DeleteOp,
    NodeExistsError,
    NoNodeError,
    Op,
    OpResult,
    SetDataOp,
    Stat,
    Watcher,
    ensure_path,
)

from .errors import ControllerMovedError
from .model import (
    INITIAL_CONTROLLER_EPOCH,
    INITIAL_CONTROLLER_EPOCH_ZK_VERSION,
    Broker,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from .zk_data import (
    PERSISTENT_ZK_PATHS,
    BrokerIdsZNode,
    BrokerIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    DeleteTopicsZNode,
    IsrChangeNotificationSequenceZNode,
    IsrChangeNotificationZNode,
    LogDirEventNotificationSequenceZNode,
    LogDirEventNotificationZNode,
    PreferredReplicaElectionZNode,
    TopicConfigZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicsZNode,
    TopicZNode,
)

__all__ = ["KafkaZkClient", "UpdateLeaderAndIsrResult"]


@dataclass(slots=True)
class UpdateLeaderAndIsrResult:
    """Per partition: the written LeaderAndIsr (new zk version) or the error; and retries."""

    finished: dict[TopicPartition, LeaderAndIsr | CoordinationError] = field(default_factory=dict)
    partitions_to_retry: list[TopicPartition] = field(default_factory=list)


class KafkaZkClient:
    """Reads and writes Kafka's znodes; the controller's and the broker's only ZooKeeper API."""

    def __init__(self, store: CoordinationStore, clock: Clock = SYSTEM_CLOCK) -> None:
        """``clock``: wall time for the timestamps of the broker and controller znodes."""
        self.store = store
        self.clock = clock

    # -- plumbing -------------------------------------------------------------------
    def checked_multi(
        self, ops: list[Op], expected_controller_epoch_zk_version: int | None
    ) -> list[OpResult]:
        """Run ``ops`` atomically, fenced by the controller epoch's zk version (None: unfenced)."""
        if expected_controller_epoch_zk_version is None:
            return self.store.multi(ops)
        check = CheckOp(ControllerEpochZNode.path, expected_controller_epoch_zk_version)
        try:
            return self.store.multi([check, *ops])[1:]
        except (BadVersionError, NoNodeError) as exc:
            if exc.op_index == 0:
                expected = expected_controller_epoch_zk_version
                raise ControllerMovedError(
                    f"controller epoch zk version is no longer {expected}"
                ) from exc
            raise self._shift(exc) from None
        except CoordinationError as exc:
            raise self._shift(exc) from None

    @staticmethod
    def _shift(exc: CoordinationError) -> CoordinationError:
        if exc.op_index is not None:
            exc.op_index -= 1
        return exc

    def create_top_level_paths(self) -> None:
        for path in PERSISTENT_ZK_PATHS:
            ensure_path(self.store, path)

    # -- brokers --------------------------------------------------------------------
    def register_broker(self, broker: Broker) -> int:
        """Create the ephemeral /brokers/ids/N and return the broker epoch (its czxid)."""
        path = BrokerIdZNode.path(broker.id)
        ensure_path(self.store, BrokerIdsZNode.path)
        try:
            self.store.create(
                path, BrokerIdZNode.encode(broker, self.clock.milliseconds()), CreateMode.EPHEMERAL
            )
        except NodeExistsError:
            stat = self.store.exists(path)
            if stat is None or stat.ephemeral_owner != self.store.session_id:
                raise
            return stat.czxid
        stat = self.store.exists(path)
        if stat is None:
            raise NoNodeError("broker registration vanished", path=path)
        return stat.czxid

    def get_all_broker_and_epochs_in_cluster(
        self, watch: Watcher | None = None
    ) -> dict[Broker, int]:
        result: dict[Broker, int] = {}
        for child in self.store.get_children(BrokerIdsZNode.path, watch=watch):
            broker_id = int(child)
            try:
                data, stat = self.store.get(BrokerIdZNode.path(broker_id))
            except NoNodeError:
                continue
            result[BrokerIdZNode.decode(broker_id, data)] = stat.czxid
        return result

    # -- controller -----------------------------------------------------------------
    def get_controller_id(self, watch: Watcher | None = None) -> int | None:
        """The active controller's id, or None; ``watch`` fires on create/change/delete."""
        if watch is not None and self.store.exists(ControllerZNode.path, watch=watch) is None:
            return None
        try:
            data, _ = self.store.get(ControllerZNode.path)
        except NoNodeError:
            return None
        return ControllerZNode.decode(data)

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zk version) of /controller_epoch, or None if it does not exist."""
        try:
            data, stat = self.store.get(ControllerEpochZNode.path)
        except NoNodeError:
            return None
        return ControllerEpochZNode.decode(data), stat.version

    def _maybe_create_controller_epoch_znode(self) -> tuple[int, int]:
        try:
            self.store.create(
                ControllerEpochZNode.path, ControllerEpochZNode.encode(INITIAL_CONTROLLER_EPOCH)
            )
            return INITIAL_CONTROLLER_EPOCH, INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        except NodeExistsError:
            current = self.get_controller_epoch()
            if current is None:
                raise ControllerMovedError("/controller_epoch vanished") from None
            return current

    def register_controller_and_increment_controller_epoch(
        self, controller_id: int
    ) -> tuple[int, int]:
        """Become controller: create /controller and bump /controller_epoch in ONE multi.

        Returns (new epoch, its zk version); raises ControllerMovedError if another
        broker won the race.
        """
        current = self.get_controller_epoch()
        epoch, epoch_zk_version = current or self._maybe_create_controller_epoch_znode()
        new_epoch = epoch + 1
        ops: list[Op] = [
            CreateOp(
                ControllerZNode.path,
                ControllerZNode.encode(controller_id, self.clock.milliseconds()),
                CreateMode.EPHEMERAL,
            ),
            SetDataOp(
                ControllerEpochZNode.path, ControllerEpochZNode.encode(new_epoch), epoch_zk_version
            ),
        ]
        try:
            results = self.store.multi(ops)
        except (NodeExistsError, BadVersionError):
            # Our own earlier attempt may have succeeded before a connection loss.
            if self.get_controller_id() == controller_id:
                latest = self.get_controller_epoch()
                if latest is not None and latest[0] == new_epoch:
                    return latest
            raise ControllerMovedError("another broker won the controller election") from None
        stat = results[1]
        assert isinstance(stat, Stat)
        return new_epoch, stat.version

    def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        with contextlib.suppress(NoNodeError):
            self.checked_multi(
                [DeleteOp(ControllerZNode.path)], expected_controller_epoch_zk_version
            )

    # -- topics ---------------------------------------------------------------------
    def get_all_topics_in_cluster(self, watch: Watcher | None = None) -> set[str]:
        try:
            return set(self.store.get_children(TopicsZNode.path, watch=watch))
        except NoNodeError:
            return set()

    def get_topic_assignment(
        self, topic: str, watch: Watcher | None = None
    ) -> tuple[str | None, dict[int, ReplicaAssignment]] | None:
        """(topic id, partition -> assignment) or None; ``watch`` is a data watch."""
        try:
            data, _ = self.store.get(TopicZNode.path(topic), watch=watch)
        except NoNodeError:
            if watch is not None:
                self.store.exists(TopicZNode.path(topic), watch=watch)
            return None
        return TopicZNode.decode(data)

    def set_topic_assignment(
        self,
        topic: str,
        topic_id: str | None,
        assignment: Mapping[int, ReplicaAssignment],
        expected_controller_epoch_zk_version: int | None = None,
    ) -> None:
        data = TopicZNode.encode(topic_id, assignment)
        self.checked_multi(
            [SetDataOp(TopicZNode.path(topic), data)], expected_controller_epoch_zk_version
        )

    def get_topic_config(self, topic: str) -> dict[str, str]:
        try:
            return TopicConfigZNode.decode(self.store.get(TopicConfigZNode.path(topic))[0])
        except NoNodeError:
            return {}

    def delete_recursive_checked(
        self, path: str, expected_controller_epoch_zk_version: int | None
    ) -> None:
        try:
            children = self.store.get_children(path)
        except NoNodeError:
            return
        for child in children:
            self.delete_recursive_checked(f"{path}/{child}", expected_controller_epoch_zk_version)
        with contextlib.suppress(NoNodeError):
            self.checked_multi([DeleteOp(path)], expected_controller_epoch_zk_version)

    # -- partition states -----------------------------------------------------------
    def get_topic_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        states = {}
        for tp in partitions:
            try:
                data, stat = self.store.get(TopicPartitionStateZNode.path(tp))
            except NoNodeError:
                continue
            states[tp] = TopicPartitionStateZNode.decode(data, stat)
        return states

    def create_topic_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_zk_version: int,
    ) -> dict[TopicPartition, LeaderAndIsr | CoordinationError]:
        """Create each partition's state znode (and its parents); per partition the result."""
        results: dict[TopicPartition, LeaderAndIsr | CoordinationError] = {}
        for tp, state in states.items():
            for parent in (TopicPartitionsZNode.path(tp.topic), TopicPartitionZNode.path(tp)):
                with contextlib.suppress(NodeExistsError):
                    self.checked_multi([CreateOp(parent)], expected_controller_epoch_zk_version)
            create = CreateOp(
                TopicPartitionStateZNode.path(tp), TopicPartitionStateZNode.encode(state)
            )
            try:
                self.checked_multi([create], expected_controller_epoch_zk_version)
                results[tp] = state.leader_and_isr.with_zk_version(0)
            except ControllerMovedError:
                raise
            except CoordinationError as exc:
                results[tp] = exc
        return results

    def update_leader_and_isr(
        self,
        leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_zk_version: int | None,
    ) -> UpdateLeaderAndIsrResult:
        """Conditionally write new leader/ISR states (on each znode's zk version).

        The controller fences with its epoch's zk version; a partition leader changing
        its ISR passes None and the controller epoch found in the state znode."""
        result = UpdateLeaderAndIsrResult()
        for tp, lai in leader_and_isrs.items():
            data = TopicPartitionStateZNode.encode(
                LeaderIsrAndControllerEpoch(lai, controller_epoch)
            )
            op = SetDataOp(TopicPartitionStateZNode.path(tp), data, lai.zk_version)
            try:
                stat = self.checked_multi([op], expected_controller_epoch_zk_version)[0]
            except BadVersionError:
                result.partitions_to_retry.append(tp)
                continue
            except ControllerMovedError:
                raise
            except CoordinationError as exc:
                result.finished[tp] = exc
                continue
            assert isinstance(stat, Stat)
            result.finished[tp] = lai.with_zk_version(stat.version)
        return result

    # -- admin requests and notifications -------------------------------------------
    def get_topic_deletions(self, watch: Watcher | None = None) -> list[str]:
        try:
            return self.store.get_children(DeleteTopicsZNode.path, watch=watch)
        except NoNodeError:
            return []

    def delete_topic_deletions(
        self, topics: Iterable[str], expected_controller_epoch_zk_version: int | None
    ) -> None:
        for topic in topics:
            with contextlib.suppress(NoNodeError):
                self.checked_multi(
                    [DeleteOp(DeleteTopicsTopicZNode.path(topic))],
                    expected_controller_epoch_zk_version,
                )

    def get_preferred_replica_election(
        self, watch: Watcher | None = None
    ) -> set[TopicPartition] | None:
        path = PreferredReplicaElectionZNode.path
        if watch is not None and self.store.exists(path, watch=watch) is None:
            return None
        try:
            return PreferredReplicaElectionZNode.decode(self.store.get(path)[0])
        except NoNodeError:
            return None

    def delete_preferred_replica_election(
        self, expected_controller_epoch_zk_version: int | None
    ) -> None:
        with contextlib.suppress(NoNodeError):
            self.checked_multi(
                [DeleteOp(PreferredReplicaElectionZNode.path)], expected_controller_epoch_zk_version
            )

    def get_all_isr_change_notifications(self, watch: Watcher | None = None) -> list[str]:
        """The sequence numbers of the pending ISR change notifications."""
        try:
            children = self.store.get_children(IsrChangeNotificationZNode.path, watch=watch)
        except NoNodeError:
            return []
        return [IsrChangeNotificationSequenceZNode.sequence_number(c) for c in children]

    def get_partitions_from_isr_change_notifications(
        self, sequence_numbers: Iterable[str]
    ) -> set[TopicPartition]:
        partitions: set[TopicPartition] = set()
        for seq in sequence_numbers:
            try:
                data, _ = self.store.get(IsrChangeNotificationSequenceZNode.path(seq))
            except NoNodeError:
                continue
            partitions |= IsrChangeNotificationSequenceZNode.decode(data)
        return partitions

    def delete_isr_change_notifications(
        self, sequence_numbers: Iterable[str], expected_controller_epoch_zk_version: int | None
    ) -> None:
        for seq in sequence_numbers:
            op = DeleteOp(IsrChangeNotificationSequenceZNode.path(seq))
            with contextlib.suppress(NoNodeError):
                self.checked_multi([op], expected_controller_epoch_zk_version)

    def get_all_log_dir_event_notifications(self, watch: Watcher | None = None) -> list[str]:
        """The sequence numbers of the pending log dir event notifications."""
        try:
            children = self.store.get_children(LogDirEventNotificationZNode.path, watch=watch)
        except NoNodeError:
            return []
        return [LogDirEventNotificationSequenceZNode.sequence_number(c) for c in children]

    def get_broker_ids_from_log_dir_events(self, sequence_numbers: Iterable[str]) -> list[int]:
        """The brokers named by those notifications (in their order, once each)."""
        brokers: list[int] = []
        for seq in sorted(sequence_numbers):
            try:
                data, _ = self.store.get(LogDirEventNotificationSequenceZNode.path(seq))
            except NoNodeError:
                continue
            broker = LogDirEventNotificationSequenceZNode.decode(data)
            if broker is not None and broker not in brokers:
                brokers.append(broker)
        return brokers

    def delete_log_dir_event_notifications(
        self, sequence_numbers: Iterable[str], expected_controller_epoch_zk_version: int | None
    ) -> None:
        for seq in sequence_numbers:
            op = DeleteOp(LogDirEventNotificationSequenceZNode.path(seq))
            with contextlib.suppress(NoNodeError):
                self.checked_multi([op], expected_controller_epoch_zk_version)

    def propagate_log_dir_event(self, broker_id: int) -> str:
        """A broker's notice that one of its log dirs failed (Kafka's
        ``propagateLogDirEvent``): the controller asks it which replicas are offline."""
        ensure_path(self.store, LogDirEventNotificationZNode.path)
        return self.store.create(
            LogDirEventNotificationSequenceZNode.path(),
            LogDirEventNotificationSequenceZNode.encode(broker_id),
            CreateMode.PERSISTENT_SEQUENTIAL,
        )

    def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str:
        """A leader's notice that ISRs changed (a sequential znode the controller watches)."""
        ensure_path(self.store, IsrChangeNotificationZNode.path)
        return self.store.create(
            IsrChangeNotificationSequenceZNode.path(),
            IsrChangeNotificationSequenceZNode.encode(partitions),
            CreateMode.PERSISTENT_SEQUENTIAL,
        )
