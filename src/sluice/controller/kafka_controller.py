"""The controller (Kafka's ``KafkaController``): election, failover and broker changes.

Every broker runs one. It watches /controller; whoever creates it (bumping
/controller_epoch in the same transaction) is the active controller, reads the
cluster from ZooKeeper into its :class:`ControllerContext`, starts the state
machines and reacts to events on its single event thread. Watches, broker requests
and the session listener only put events on the queue.

Brokers joining and leaving are handled by :class:`~.broker_events.BrokerEventHandler`;
topic, partition, ISR, election and controlled-shutdown handling by
:class:`~.partition_events.PartitionEventHandler`; partition reassignment by
:class:`~.reassignment.PartitionReassignmentHandler`; this module keeps the controller's
life cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sluice.base import TopicPartition
from sluice.base.clock import Clock
from sluice.metastore import EventType, WatchedEvent

from ..protocol.errors import ErrorCode
from .broker_events import BrokerEventHandler
from .context import ControllerContext
from .controller_config import ControllerConfig
from .errors import ControllerMovedError
from .event_manager import ControllerEventManager
from .events import (
    AlterReassignmentsCallback,
    ApiError,
    ApiPartitionReassignment,
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    ControlledShutdown,
    ControlledShutdownResult,
    ControllerChange,
    ControllerEvent,
    ElectionTrigger,
    ElectionType,
    Expire,
    IsrChangeNotification,
    ListPartitionReassignments,
    ListReassignmentsCallback,
    PartitionModifications,
    Reelect,
    RegisterBrokerAndReelect,
    ReplicaLeaderElection,
    ReplicaLeaderElectionResults,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
)
from .kafka_zk_client import KafkaZkClient
from .model import Broker
from .partition_events import PartitionEventHandler
from .partition_state_machine import PartitionStateMachine
from .reassignment import PartitionReassignmentHandler
from .replica_state_machine import ReplicaStateMachine
from .request_batch import ControllerBrokerRequestBatch
from .requests import ControllerChannel
from .topic_deletion_manager import DeletionClient, TopicDeletionManager
from .zk_data import DeleteTopicsTopicZNode, TopicConfigZNode, TopicZNode

__all__ = ["AUTO_LEADER_REBALANCE_TASK", "KafkaController"]

log = logging.getLogger(__name__)

AUTO_LEADER_REBALANCE_TASK = "auto-leader-rebalance-task"
NO_CONTROLLER = -1


class KafkaController:
    """One broker's controller module: candidate, and when elected, the active controller."""

    def __init__(
        self,
        config: ControllerConfig,
        zk_client: KafkaZkClient,
        channel: ControllerChannel,
        clock: Clock,
        *,
        broker: Broker | None = None,
        broker_epoch: int = -1,
    ) -> None:
        self.config = config
        self.zk_client = zk_client
        self.channel = channel
        self.clock = clock
        self.broker = broker
        self.broker_epoch = broker_epoch
        self.active_controller_id = NO_CONTROLLER
        self.context = ControllerContext()
        self.event_manager = ControllerEventManager(
            config.broker_id, self, clock, thread_name=f"controller-event-thread-{config.broker_id}"
        )
        self.batch = ControllerBrokerRequestBatch(
            config.broker_id, self.context, channel, self._on_stop_replica_response
        )
        self.replica_state_machine = ReplicaStateMachine(self.context, zk_client, self.batch)
        self.partition_state_machine = PartitionStateMachine(
            self.context, zk_client, self.batch, self._unclean_leader_election_enabled
        )
        self.topic_deletion_manager = TopicDeletionManager(
            config.delete_topic_enable,
            self.context,
            self.replica_state_machine,
            self.partition_state_machine,
            DeletionClient(self._delete_topic, self.send_update_metadata, lambda topic: None),
        )
        self.partitions = PartitionEventHandler(self)
        self.brokers = BrokerEventHandler(self)
        self.reassignments = PartitionReassignmentHandler(self)

    # -- public API -----------------------------------------------------------------
    @property
    def controller_id(self) -> int:
        return self.config.broker_id

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.config.broker_id

    @property
    def epoch(self) -> int:
        return self.context.epoch

    def startup(self, *, start_thread: bool = True) -> None:
        """Watch the session and queue Startup; ``start_thread=False`` for manual runs."""
        self.zk_client.store.add_session_listener(self.on_new_session)
        self.event_manager.put(Startup())
        if start_thread:
            self.event_manager.start()

    def shutdown(self) -> None:
        """Stop the event thread and resign (the session's end removes /controller)."""
        self.zk_client.store.remove_session_listener(self.on_new_session)
        self.event_manager.close()
        self.on_controller_resignation()
        self.active_controller_id = NO_CONTROLLER

    def controlled_shutdown(
        self,
        broker_id: int,
        broker_epoch: int,
        callback: Callable[[ControlledShutdownResult], None],
    ) -> None:
        """Handle a ControlledShutdown request (answered through ``callback``)."""
        self.event_manager.put(ControlledShutdown(broker_id, broker_epoch, callback))

    def elect_leaders(
        self,
        partitions: set[TopicPartition],
        election_type: ElectionType,
        callback: Callable[[ReplicaLeaderElectionResults], None],
    ) -> None:
        """Handle an ElectLeaders request (answered through ``callback``)."""
        event = ReplicaLeaderElection(
            frozenset(partitions), election_type, ElectionTrigger.ADMIN_CLIENT_TRIGGERED, callback
        )
        self.event_manager.put(event)

    def alter_partition_reassignments(
        self,
        reassignments: dict[TopicPartition, tuple[int, ...] | None],
        callback: AlterReassignmentsCallback,
        *,
        allow_replication_factor_change: bool = True,
    ) -> None:
        """Handle an AlterPartitionReassignments request: a target per partition, None
        to cancel (answered through ``callback``)."""
        event = ApiPartitionReassignment(
            dict(reassignments), callback, allow_replication_factor_change
        )
        self.event_manager.put(event)

    def list_partition_reassignments(
        self, partitions: set[TopicPartition] | None, callback: ListReassignmentsCallback
    ) -> None:
        """Handle a ListPartitionReassignments request (None: every partition)."""
        wanted = None if partitions is None else frozenset(partitions)
        self.event_manager.put(ListPartitionReassignments(wanted, callback))

    # -- watches and listeners: they only enqueue -------------------------------------
    def on_new_session(self) -> None:
        self.event_manager.clear_and_put(Expire())
        self.event_manager.put(RegisterBrokerAndReelect())

    def controller_change_watch(self, event: WatchedEvent) -> None:
        deleted = event.type is EventType.NODE_DELETED
        self.event_manager.put(Reelect() if deleted else ControllerChange())

    def broker_change_watch(self, event: WatchedEvent) -> None:
        self.event_manager.put(BrokerChange())

    def topic_change_watch(self, event: WatchedEvent) -> None:
        self.event_manager.put(TopicChange())

    def topic_deletion_watch(self, event: WatchedEvent) -> None:
        self.event_manager.put(TopicDeletion())

    def isr_change_watch(self, event: WatchedEvent) -> None:
        self.event_manager.put(IsrChangeNotification())

    def preferred_replica_election_watch(self, event: WatchedEvent) -> None:
        if event.type is not EventType.NODE_DELETED:
            self.event_manager.put(ReplicaLeaderElection())
        else:  # keep watching for the next request
            self.event_manager.put(_WatchPreferredReplicaElection())

    def partition_modifications_watch(self, event: WatchedEvent) -> None:
        topic = event.path.rsplit("/", 1)[-1]
        self.event_manager.put(PartitionModifications(topic))

    def _on_stop_replica_response(
        self, broker_id: int, errors: dict[TopicPartition, ErrorCode]
    ) -> None:
        self.event_manager.put(TopicDeletionStopReplicaResponseReceived(broker_id, errors))

    # -- event processing -----------------------------------------------------------
    def process(self, event: ControllerEvent) -> None:
        try:
            self._dispatch(event)
        except ControllerMovedError:
            log.info("controller %d moved while processing %r", self.controller_id, event)
            self._maybe_resign()
        except Exception:
            log.exception("controller %d failed to process %r", self.controller_id, event)

    def preempt(self, event: ControllerEvent) -> None:
        if isinstance(event, ControlledShutdown):
            event.callback(ControlledShutdownResult(ErrorCode.not_controller))
        elif isinstance(event, ReplicaLeaderElection) and event.callback is not None:
            error = ControllerMovedError("the controller moved")
            event.callback({tp: error for tp in event.partitions or ()})
        elif isinstance(event, ApiPartitionReassignment | ListPartitionReassignments):
            event.callback(ApiError(ErrorCode.not_controller))

    def _dispatch(self, event: ControllerEvent) -> None:
        if isinstance(event, Startup):
            self._process_startup()
        elif isinstance(event, ControllerChange):
            self._maybe_resign()
        elif isinstance(event, Reelect):
            self._process_reelect()
        elif isinstance(event, RegisterBrokerAndReelect):
            if self.broker is not None:
                self.broker_epoch = self.zk_client.register_broker(self.broker)
            self._process_reelect()
        elif isinstance(event, Expire):
            self.active_controller_id = NO_CONTROLLER
            self.on_controller_resignation()
        elif isinstance(event, ControlledShutdown | ReplicaLeaderElection):
            self.partitions.process(event)
        elif isinstance(event, ApiPartitionReassignment | ListPartitionReassignments):
            self.reassignments.process(event)
        elif not self.is_active:
            return
        elif isinstance(event, BrokerChange):
            self.brokers.process_broker_change()
        elif isinstance(event, _WatchPreferredReplicaElection):
            self.zk_client.get_preferred_replica_election(self.preferred_replica_election_watch)
        elif isinstance(event, AutoPreferredReplicaLeaderElection):
            try:
                self.partitions.check_and_trigger_auto_leader_rebalance()
            finally:
                self._schedule_auto_leader_rebalance(
                    self.config.leader_imbalance_check_interval_seconds * 1000
                )
        else:
            self.partitions.process(event)

    # -- election and resignation ---------------------------------------------------
    def _process_startup(self) -> None:
        self._elect()

    def _process_reelect(self) -> None:
        self._maybe_resign()
        self._elect()

    def _maybe_resign(self) -> None:
        was_active = self.is_active
        current = self.zk_client.get_controller_id(watch=self.controller_change_watch)
        self.active_controller_id = NO_CONTROLLER if current is None else current
        if was_active and not self.is_active:
            self.on_controller_resignation()

    def _elect(self) -> None:
        current = self.zk_client.get_controller_id(watch=self.controller_change_watch)
        self.active_controller_id = NO_CONTROLLER if current is None else current
        if current is not None:
            log.debug(
                "broker %d is the controller; %d stops its election", current, self.controller_id
            )
            return
        try:
            epoch, zk_version = self.zk_client.register_controller_and_increment_controller_epoch(
                self.controller_id
            )
        except ControllerMovedError:
            self._maybe_resign()
            if self.active_controller_id != NO_CONTROLLER:
                log.debug(
                    "broker %d was elected controller instead of %d",
                    self.active_controller_id,
                    self.controller_id,
                )
            return
        self.context.epoch, self.context.epoch_zk_version = epoch, zk_version
        self.active_controller_id = self.controller_id
        log.info(
            "broker %d elected as the controller with epoch %d (epoch zk version %d)",
            self.controller_id,
            epoch,
            zk_version,
        )
        try:
            self.on_controller_failover()
        except ControllerMovedError:
            raise
        except Exception:
            log.exception(
                "controller %d failed over badly; moving the controller", self.controller_id
            )
            self._trigger_controller_move()

    def _trigger_controller_move(self) -> None:
        expected = self.context.epoch_zk_version
        self.active_controller_id = NO_CONTROLLER
        self.on_controller_resignation()
        try:
            self.zk_client.delete_controller(expected)
        except ControllerMovedError:
            log.warning("the controller already moved when %d tried to move it", self.controller_id)

    def on_controller_failover(self) -> None:
        """Take office: watch the cluster, load it, start the state machines."""
        zk = self.zk_client
        zk.get_preferred_replica_election(self.preferred_replica_election_watch)
        zk.delete_isr_change_notifications(
            zk.get_all_isr_change_notifications(self.isr_change_watch),
            self.context.epoch_zk_version,
        )
        self._initialize_controller_context()
        topics_to_be_deleted = set(zk.get_topic_deletions(self.topic_deletion_watch))
        ineligible = {
            t
            for t in self.context.all_topics
            if any(
                not self.context.is_replica_online(r.replica, r.topic_partition)
                for r in self.context.replicas_for_topic(t)
            )
        }
        ineligible |= {tp.topic for tp in self.context.partitions_being_reassigned}
        self.topic_deletion_manager.init(topics_to_be_deleted & self.context.all_topics, ineligible)
        self.send_update_metadata(None, self.context.live_or_shutting_down_broker_ids)
        self.replica_state_machine.startup()
        self.partition_state_machine.startup()
        self.reassignments.initialize_partition_reassignments()
        log.info(
            "controller %d ready to serve with epoch %d", self.controller_id, self.context.epoch
        )
        self.topic_deletion_manager.try_topic_deletion()
        self.partitions.process(ReplicaLeaderElection())
        if self.config.auto_leader_rebalance_enable:
            self._schedule_auto_leader_rebalance(5_000)

    def _initialize_controller_context(self) -> None:
        ctx, zk = self.context, self.zk_client
        brokers = zk.get_all_broker_and_epochs_in_cluster(self.broker_change_watch)
        ctx.add_live_brokers(brokers)
        for broker in brokers:
            self.channel.add_broker(broker)
        ctx.all_topics = zk.get_all_topics_in_cluster(self.topic_change_watch)
        self.partitions.load_topic_assignments(ctx.all_topics)
        ctx.partition_leadership_info.clear()
        ctx.shutting_down_broker_ids.clear()
        self.partitions.update_leader_and_isr_cache()

    def on_controller_resignation(self) -> None:
        """Leave office: stop timers and state machines, forget the context."""
        self.event_manager.cancel(AUTO_LEADER_REBALANCE_TASK)
        self.topic_deletion_manager.reset()
        self.replica_state_machine.shutdown()
        self.partition_state_machine.shutdown()
        for broker_id in list(self.context.live_brokers):
            self.channel.remove_broker(broker_id)
        self.context.reset_context()
        log.info("broker %d resigned as the controller", self.controller_id)

    def _schedule_auto_leader_rebalance(self, delay_ms: int) -> None:
        if self.config.auto_leader_rebalance_enable:
            self.event_manager.schedule(
                AUTO_LEADER_REBALANCE_TASK, AutoPreferredReplicaLeaderElection(), delay_ms
            )

    # -- helpers shared with the handlers -------------------------------------------
    def send_update_metadata(
        self, partitions: set[TopicPartition] | None, brokers: set[int] | None = None
    ) -> None:
        """UpdateMetadata to ``brokers`` (default: all live) for ``partitions`` (None: all)."""
        self.batch.new_batch()
        targets = self.context.live_or_shutting_down_broker_ids if brokers is None else brokers
        self.batch.add_update_metadata_request_for_brokers(targets, partitions)
        self.batch.send_requests_to_brokers(self.context.epoch)

    def _unclean_leader_election_enabled(self, topic: str) -> bool:
        override = self.zk_client.get_topic_config(topic).get("unclean.leader.election.enable")
        if override is not None:
            return override.strip().lower() == "true"
        return self.config.unclean_leader_election_enable

    def _delete_topic(self, topic: str) -> None:
        zk, version = self.zk_client, self.context.epoch_zk_version
        zk.delete_recursive_checked(TopicZNode.path(topic), version)
        zk.delete_recursive_checked(TopicConfigZNode.path(topic), version)
        zk.delete_recursive_checked(DeleteTopicsTopicZNode.path(topic), version)


class _WatchPreferredReplicaElection(ControllerEvent):
    """Re-arm the /admin/preferred_replica_election watch after the znode went away."""

    __slots__ = ()
