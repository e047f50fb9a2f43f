"""The controller (Kafka's ``KafkaController``): election, failover and broker changes.

Every broker runs one. It watches /controller; whoever creates it (bumping
/controller_epoch in the same transaction) is the active controller, reads the
cluster from ZooKeeper into its :class:`ControllerContext`, starts the state
machines and reacts to events on its single event thread. Watches, broker requests
and the session listener only put events on the queue.

One class, as in Kafka: the controller's life cycle, broker changes (joining,
failing, bouncing), topic, partition, ISR, election and controlled-shutdown handling,
and partition reassignment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from sluice.base import TopicPartition
from sluice.base.clock import Clock
from sluice.base.log_summary import summarize
from sluice.metastore import EventType, WatchedEvent

from ..protocol.errors import ErrorCode, KafkaError
from .context import ControllerContext
from .controller_config import ControllerConfig
from .errors import (
    BrokerNotAvailableError,
    ControllerMovedError,
    IllegalStateError,
    StaleBrokerEpochError,
    StateChangeFailedError,
)
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
    LeaderAndIsrResponseReceived,
    ListPartitionReassignments,
    ListReassignmentsCallback,
    LogDirEventNotification,
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
from .leader_election import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
    ReassignPartitionLeaderElectionStrategy,
    preferred_replica_partition_leader_election,
)
from .model import Broker, LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment
from .partition_state_machine import PartitionStateMachine, StateChangeResults
from .replica_state_machine import ReplicaStateMachine
from .request_batch import ControllerBrokerRequestBatch
from .requests import ControllerChannel, LeaderAndIsrResponse
from .states import PartitionAndReplica, PartitionState, ReplicaState
from .topic_deletion_manager import DeletionClient, TopicDeletionManager
from .zk_data import DeleteTopicsTopicZNode, TopicConfigZNode, TopicZNode, new_topic_id

__all__ = ["AUTO_LEADER_REBALANCE_TASK", "KafkaController"]

log = logging.getLogger(__name__)

AUTO_LEADER_REBALANCE_TASK = "auto-leader-rebalance-task"
NO_CONTROLLER = -1

_P, _R = PartitionState, ReplicaState


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
            config.broker_id, self.context, channel, self._on_stop_replica_response,
            self._on_leader_and_isr_response,
        )  # fmt: skip
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

    def log_dir_event_watch(self, event: WatchedEvent) -> None:
        self.event_manager.put(LogDirEventNotification())

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

    def _on_leader_and_isr_response(self, broker_id: int, response: LeaderAndIsrResponse) -> None:
        event = LeaderAndIsrResponseReceived(
            broker_id, response.error_code, response.partition_errors
        )
        self.event_manager.put(event)

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
            self.process_partition_event(event)
        elif isinstance(event, ApiPartitionReassignment | ListPartitionReassignments):
            self.process_reassignment_event(event)
        elif not self.is_active:
            return
        elif isinstance(event, BrokerChange):
            self.process_broker_change()
        elif isinstance(event, _WatchPreferredReplicaElection):
            self.zk_client.get_preferred_replica_election(self.preferred_replica_election_watch)
        elif isinstance(event, AutoPreferredReplicaLeaderElection):
            try:
                self.check_and_trigger_auto_leader_rebalance()
            finally:
                self._schedule_auto_leader_rebalance(
                    self.config.leader_imbalance_check_interval_seconds * 1000
                )
        else:
            self.process_partition_event(event)

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
            "[Controller id=%d] Elected as the controller with epoch %d (epoch zk version %d)",
            self.controller_id,
            epoch,
            zk_version,
            extra={"event": "controller_elected", "controller_id": self.controller_id,
                   "broker_id": self.controller_id, "controller_epoch": epoch},
        )  # fmt: skip
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
        zk.delete_log_dir_event_notifications(
            zk.get_all_log_dir_event_notifications(self.log_dir_event_watch),
            self.context.epoch_zk_version,
        )
        zk.delete_isr_change_notifications(
            zk.get_all_isr_change_notifications(self.isr_change_watch),
            self.context.epoch_zk_version,
        )
        restarted = self._initialize_controller_context()
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
        self.initialize_partition_reassignments()
        if restarted:  # as process_broker_change does for a bounce it sees
            ids = {b.id for b in restarted}
            log.info("brokers registered since their partition states: %s", sorted(ids))
            self.on_broker_failure(ids)
            self.context.add_live_brokers(restarted)
            self.on_broker_startup(ids)
        log.info(
            "controller %d ready to serve with epoch %d", self.controller_id, self.context.epoch
        )
        self.topic_deletion_manager.try_topic_deletion()
        self.process_partition_event(ReplicaLeaderElection())
        if self.config.auto_leader_rebalance_enable:
            self._schedule_auto_leader_rebalance(5_000)

    def _initialize_controller_context(self) -> dict[Broker, int]:
        """Load the cluster. Returns the brokers left out of the live set for now: those
        registered after a partition state that names them as leader or in the ISR was
        written. A previous controller did not see them restart, and their logs may
        have lost the tail that state stands for; the caller handles them as a bounce."""
        ctx, zk = self.context, self.zk_client
        brokers = zk.get_all_broker_and_epochs_in_cluster(self.broker_change_watch)
        for broker in brokers:
            self.channel.add_broker(broker)
        ctx.all_topics = zk.get_all_topics_in_cluster(self.topic_change_watch)
        self.load_topic_assignments(ctx.all_topics)
        ctx.partition_leadership_info.clear()
        ctx.shutting_down_broker_ids.clear()
        self.update_leader_and_isr_cache()
        epochs = {b.id: e for b, e in brokers.items()}
        restarted_ids: set[int] = set()
        for info in ctx.partition_leadership_info.values():
            restarted_ids |= info.names_restarted(epochs)
        restarted = {b: e for b, e in brokers.items() if b.id in restarted_ids}
        ctx.add_live_brokers({b: e for b, e in brokers.items() if b.id not in restarted_ids})
        return restarted

    def on_controller_resignation(self) -> None:
        """Leave office: stop timers and state machines, forget the context."""
        self.event_manager.cancel(AUTO_LEADER_REBALANCE_TASK)
        self.topic_deletion_manager.reset()
        self.replica_state_machine.shutdown()
        self.partition_state_machine.shutdown()
        for broker_id in list(self.context.live_brokers):
            self.channel.remove_broker(broker_id)
        self.context.reset_context()
        log.info(
            "[Controller id=%d] Resigned as the controller", self.controller_id,
            extra={"event": "controller_resigned", "controller_id": self.controller_id,
                   "broker_id": self.controller_id},
        )  # fmt: skip

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

    # == broker changes ==================================================
    def process_broker_change(self) -> None:
        ctx = self.context
        current = self.zk_client.get_all_broker_and_epochs_in_cluster(self.broker_change_watch)
        current_epochs = {b.id: e for b, e in current.items()}
        known = ctx.live_or_shutting_down_broker_ids
        new_ids = set(current_epochs) - known
        dead_ids = known - set(current_epochs)
        bounced_ids = {
            b for b in set(current_epochs) & known if current_epochs[b] > ctx.live_broker_epochs[b]
        }
        log.info(
            "newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, live brokers: %s",
            sorted(new_ids),
            sorted(dead_ids),
            sorted(bounced_ids),
            sorted(current_epochs),
        )
        new = {b: e for b, e in current.items() if b.id in new_ids}
        bounced = {b: e for b, e in current.items() if b.id in bounced_ids}
        for broker in new:
            self.channel.add_broker(broker)
        for broker in bounced:
            self.channel.remove_broker(broker.id)
            self.channel.add_broker(broker)
        for broker_id in dead_ids:
            self.channel.remove_broker(broker_id)
        if new_ids:
            ctx.add_live_brokers(new)
            self.on_broker_startup(new_ids)
        if bounced_ids:
            ctx.remove_live_brokers(bounced_ids)
            self.on_broker_failure(bounced_ids)
            ctx.add_live_brokers(bounced)
            self.on_broker_startup(bounced_ids)
        if dead_ids:
            ctx.remove_live_brokers(dead_ids)
            self.on_broker_failure(dead_ids)

    def on_broker_startup(self, new_brokers: set[int]) -> None:
        log.info("new broker startup callback for %s", sorted(new_brokers))
        ctx = self.context
        for broker_id in new_brokers:  # a restarted broker's log dirs are online again
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        self.send_update_metadata(set(), ctx.live_or_shutting_down_broker_ids - new_brokers)
        self.send_update_metadata(None, new_brokers)
        replicas = ctx.replicas_on_brokers(new_brokers)
        self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)
        self.partition_state_machine.trigger_online_partition_state_change()
        # Reassignments moving to a returning broker send it LeaderAndIsr again.
        self.maybe_resume_reassignments(
            lambda tp, assignment: any(r in new_brokers for r in assignment.target_replicas)
        )
        deleting = {r.topic_partition.topic for r in replicas} & ctx.topics_to_be_deleted
        if deleting:
            self.topic_deletion_manager.resume_deletion_for_topics(deleting)

    def on_broker_failure(self, dead_brokers: set[int]) -> None:
        log.info("broker failure callback for %s", sorted(dead_brokers))
        self.context.shutting_down_broker_ids -= dead_brokers
        for broker_id in dead_brokers:
            self.context.replicas_on_offline_dirs.pop(broker_id, None)
        self.on_replicas_become_offline(self.context.replicas_on_brokers(dead_brokers))

    def on_broker_log_dir_failure(self, broker_ids: Iterable[int]) -> None:
        """Kafka's ``onBrokerLogDirFailure``: send the brokers LeaderAndIsr for every
        replica they host; those in an offline log dir are answered KAFKA_STORAGE_ERROR,
        which :meth:`_process_leader_and_isr_response` takes offline."""
        brokers = set(broker_ids) & self.context.live_or_shutting_down_broker_ids
        log.info("handling log dir failure for brokers %s", sorted(brokers))
        replicas = self.context.replicas_on_brokers(brokers)
        self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)

    def on_replicas_become_offline(self, replicas: set[PartitionAndReplica]) -> None:
        ctx = self.context
        deleting = {
            r for r in replicas if ctx.is_topic_queued_up_for_deletion(r.topic_partition.topic)
        }
        not_deleting = replicas - deleting
        offline_leader = {
            tp
            for tp, info in ctx.partition_leadership_info.items()
            if not ctx.is_replica_online(info.leader_and_isr.leader, tp)
            and not ctx.is_topic_queued_up_for_deletion(tp.topic)
        }
        psm = self.partition_state_machine
        psm.handle_state_changes(offline_leader, PartitionState.OFFLINE_PARTITION)
        results = psm.trigger_online_partition_state_change()
        self.replica_state_machine.handle_state_changes(not_deleting, ReplicaState.OFFLINE_REPLICA)
        if deleting:
            self.topic_deletion_manager.fail_replica_deletion(deleting)
        if not not_deleting and all(isinstance(r, Exception) for r in results.values()):
            self.send_update_metadata(set(), ctx.live_or_shutting_down_broker_ids)

    # == topics, partitions, ISR, elections, controlled shutdown ====================
    def process_partition_event(self, event: ControllerEvent) -> None:
        if isinstance(event, ControlledShutdown):
            self._process_controlled_shutdown(event)
        elif isinstance(event, ReplicaLeaderElection):
            self._process_replica_leader_election(event)
        elif not self.is_active:
            return
        elif isinstance(event, TopicChange):
            self._process_topic_change()
        elif isinstance(event, PartitionModifications):
            self._process_partition_modifications(event.topic)
        elif isinstance(event, TopicDeletion):
            self._process_topic_deletion()
        elif isinstance(event, IsrChangeNotification):
            self._process_isr_change_notification()
        elif isinstance(event, TopicDeletionStopReplicaResponseReceived):
            self._process_stop_replica_response(event)
        elif isinstance(event, LogDirEventNotification):
            self._process_log_dir_event_notification()
        elif isinstance(event, LeaderAndIsrResponseReceived):
            self._process_leader_and_isr_response(event)
        else:
            log.warning("unexpected controller event %r", event)

    # -- topics and partitions ------------------------------------------------------
    def load_topic_assignments(self, topics: set[str]) -> set[TopicPartition]:
        """Read (and watch) the assignments of ``topics`` into the context; return their
        partitions. A topic without an id gets one, written back as Kafka does."""
        added = set()
        for topic in sorted(topics):
            found = self.zk_client.get_topic_assignment(
                topic, watch=self.partition_modifications_watch
            )
            if found is None:
                continue
            topic_id, assignment = found
            if topic_id is None:
                topic_id = new_topic_id()
                self.zk_client.set_topic_assignment(
                    topic, topic_id, assignment, self.context.epoch_zk_version
                )
            self.context.topic_ids[topic] = topic_id
            for partition, replicas in assignment.items():
                tp = TopicPartition(topic, partition)
                self.context.update_partition_full_replica_assignment(tp, replicas)
                if replicas.is_being_reassigned:
                    self.context.partitions_being_reassigned.add(tp)
                added.add(tp)
        return added

    def update_leader_and_isr_cache(self, partitions: set[TopicPartition] | None = None) -> None:
        wanted = self.context.all_partitions() if partitions is None else partitions
        states = self.zk_client.get_topic_partition_states(wanted)
        self.context.partition_leadership_info.update(states)

    def _process_topic_change(self) -> None:
        ctx = self.context
        topics = self.zk_client.get_all_topics_in_cluster(self.topic_change_watch)
        new_topics, deleted = topics - ctx.all_topics, ctx.all_topics - topics
        ctx.all_topics = set(topics)
        for topic in deleted:
            ctx.remove_topic(topic)
        added = self.load_topic_assignments(new_topics)
        log.info("new topics: %s, deleted topics: %s", sorted(new_topics), sorted(deleted))
        if added:
            self.on_new_partition_creation(added)

    def _process_partition_modifications(self, topic: str) -> None:
        found = self.zk_client.get_topic_assignment(topic, watch=self.partition_modifications_watch)
        if found is None or topic not in self.context.all_topics:
            return
        _, assignment = found
        to_add: dict[TopicPartition, ReplicaAssignment] = {
            TopicPartition(topic, p): a
            for p, a in assignment.items()
            if not self.context.partition_replica_assignment(TopicPartition(topic, p))
        }
        if self.topic_deletion_manager.is_topic_queued_up_for_deletion(topic):
            if to_add:
                log.warning(
                    "not adding partitions %s: topic %s is being deleted",
                    summarize(sorted(to_add)), topic,
                )  # fmt: skip
            return
        if to_add:
            log.info("new partitions to be added: %s", summarize(sorted(to_add)))
            for tp, replicas in to_add.items():
                self.context.update_partition_full_replica_assignment(tp, replicas)
            self.on_new_partition_creation(set(to_add))

    def on_new_partition_creation(self, partitions: set[TopicPartition]) -> None:
        log.info(
            "new partition creation callback for %d partitions: %s", len(partitions),
            summarize(sorted(partitions)),
        )  # fmt: skip
        psm, rsm = self.partition_state_machine, self.replica_state_machine
        psm.handle_state_changes(partitions, _P.NEW_PARTITION)
        rsm.handle_state_changes(self.context.replicas_for_partition(partitions), _R.NEW_REPLICA)
        psm.handle_state_changes(
            partitions, _P.ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy(False)
        )
        rsm.handle_state_changes(self.context.replicas_for_partition(partitions), _R.ONLINE_REPLICA)

    def _process_topic_deletion(self) -> None:
        zk, ctx = self.zk_client, self.context
        topics = set(zk.get_topic_deletions(self.topic_deletion_watch))
        missing = topics - ctx.all_topics
        if missing:
            log.warning("ignoring request to delete non-existing topics %s", sorted(missing))
            zk.delete_topic_deletions(missing, ctx.epoch_zk_version)
        topics -= missing
        if not self.config.delete_topic_enable:
            log.info("removing %s since delete.topic.enable is false", sorted(topics))
            zk.delete_topic_deletions(topics, ctx.epoch_zk_version)
        elif topics:
            log.info("starting topic deletion for topics %s", sorted(topics))
            reassigning = {tp.topic for tp in ctx.partitions_being_reassigned} & topics
            if reassigning:
                log.info("deletion of %s waits for their reassignments", sorted(reassigning))
                ctx.topics_ineligible_for_deletion |= reassigning
            self.topic_deletion_manager.enqueue_topics_for_deletion(topics)

    def _process_stop_replica_response(
        self, event: TopicDeletionStopReplicaResponseReceived
    ) -> None:
        manager = self.topic_deletion_manager
        failed = {
            PartitionAndReplica(tp, event.broker_id)
            for tp, error in event.partition_errors.items()
            if error is not ErrorCode.none
        }
        manager.fail_replica_deletion(failed)
        done = {PartitionAndReplica(tp, event.broker_id) for tp in event.partition_errors} - failed
        if done:
            manager.complete_replica_deletion(done)

    def _process_log_dir_event_notification(self) -> None:
        zk = self.zk_client
        sequence_numbers = zk.get_all_log_dir_event_notifications(self.log_dir_event_watch)
        try:
            brokers = zk.get_broker_ids_from_log_dir_events(sequence_numbers)
            if brokers:
                self.on_broker_log_dir_failure(brokers)
        finally:
            zk.delete_log_dir_event_notifications(sequence_numbers, self.context.epoch_zk_version)

    def _process_leader_and_isr_response(self, event: LeaderAndIsrResponseReceived) -> None:
        """Kafka's ``processLeaderAndIsrResponseReceived``: the replicas a broker answered
        KAFKA_STORAGE_ERROR for are in an offline log dir of it; those newly so go
        offline (their leadership moves to an online replica in the ISR), those it
        answered without an error are online again."""
        if event.error_code is not ErrorCode.none:
            log.error(
                "broker %d answered LeaderAndIsr with %s", event.broker_id, event.error_code.name
            )
            return
        errors = event.partition_errors
        offline = {tp for tp, code in errors.items() if code is ErrorCode.kafka_storage_error}
        online = {tp for tp, code in errors.items() if code is ErrorCode.none}
        ctx = self.context
        previous = ctx.replicas_on_offline_dirs.get(event.broker_id, set())
        current = (previous - online) | offline
        if current:
            ctx.replicas_on_offline_dirs[event.broker_id] = current
        else:
            ctx.replicas_on_offline_dirs.pop(event.broker_id, None)
        newly = current - previous
        if newly:
            log.info(
                "marking the replicas of %s on broker %d offline (an offline log dir)",
                sorted(newly), event.broker_id,
            )  # fmt: skip
            self.on_replicas_become_offline(
                {PartitionAndReplica(tp, event.broker_id) for tp in newly}
            )

    def _process_isr_change_notification(self) -> None:
        zk = self.zk_client
        sequence_numbers = zk.get_all_isr_change_notifications(self.isr_change_watch)
        try:
            partitions = zk.get_partitions_from_isr_change_notifications(sequence_numbers)
            partitions &= self.context.all_partitions()
            if partitions:
                self.update_leader_and_isr_cache(partitions)
                self.send_update_metadata(partitions)
                self.on_isr_change(partitions)
        finally:
            zk.delete_isr_change_notifications(sequence_numbers, self.context.epoch_zk_version)

    # -- leader elections -----------------------------------------------------------
    def _process_replica_leader_election(self, event: ReplicaLeaderElection) -> None:
        ctx = self.context
        if not self.is_active:
            if event.callback is not None:
                error = ControllerMovedError("this broker is not the controller")
                event.callback({tp: error for tp in event.partitions or ()})
            return
        if event.partitions is not None:
            partitions = set(event.partitions)
        else:
            watch = self.preferred_replica_election_watch
            partitions = self.zk_client.get_preferred_replica_election(watch) or set()
            if not partitions:
                return
        known = partitions & ctx.all_partitions()
        deleting = {tp for tp in known if ctx.is_topic_queued_up_for_deletion(tp.topic)}
        electable: set[TopicPartition] = set()
        not_needed: set[TopicPartition] = set()
        for tp in known - deleting:
            info = ctx.partition_leadership_info.get(tp)
            leader = info.leader_and_isr.leader if info is not None else -1
            if event.election_type is ElectionType.PREFERRED:
                needed = leader != ctx.partition_replica_assignment(tp)[0]
            else:
                needed = not ctx.is_replica_online(leader, tp)
            (electable if needed else not_needed).add(tp)
        results: dict[TopicPartition, int | Exception] = {}
        for tp, outcome in self.on_replica_election(
            electable, event.election_type, event.trigger
        ).items():
            if isinstance(outcome, LeaderAndIsr):
                results[tp] = outcome.leader
            elif isinstance(outcome, StateChangeFailedError):
                code = (
                    ErrorCode.preferred_leader_not_available
                    if event.election_type is ElectionType.PREFERRED
                    else ErrorCode.eligible_leaders_not_available
                )
                results[tp] = KafkaError(str(outcome), code=code)
            else:
                results[tp] = outcome
        for tp in not_needed:
            results[tp] = KafkaError(code=ErrorCode.election_not_needed)
        for tp in deleting:
            results[tp] = KafkaError(
                "the topic is being deleted", code=ErrorCode.invalid_topic_exception
            )
        for tp in partitions - known:
            results[tp] = KafkaError(
                "the partition does not exist", code=ErrorCode.unknown_topic_or_partition
            )
        if event.callback is not None:
            event.callback(results)

    def on_replica_election(
        self, partitions: set[TopicPartition], election_type: ElectionType, trigger: ElectionTrigger
    ) -> StateChangeResults:
        log.info(
            "starting replica leader election (%s) for partitions %s triggered by %s",
            election_type.name,
            sorted(partitions),
            trigger.value,
        )
        strategy: PartitionLeaderElectionStrategy
        if election_type is ElectionType.PREFERRED:
            strategy = PreferredReplicaPartitionLeaderElectionStrategy()
        else:
            strategy = OfflinePartitionLeaderElectionStrategy(allow_unclean=True)
        try:
            return self.partition_state_machine.handle_state_changes(
                partitions, _P.ONLINE_PARTITION, strategy
            )
        finally:
            if trigger is not ElectionTrigger.ADMIN_CLIENT_TRIGGERED:
                for tp in sorted(partitions):
                    info = self.context.partition_leadership_info.get(tp)
                    preferred = self.context.partition_replica_assignment(tp)[:1]
                    if (
                        info is not None
                        and preferred
                        and info.leader_and_isr.leader != preferred[0]
                    ):
                        log.warning(
                            "partition %s failed to complete preferred replica election to %d; "
                            "leader is still %d",
                            tp,
                            preferred[0],
                            info.leader_and_isr.leader,
                        )
                if trigger is ElectionTrigger.ZK_TRIGGERED:
                    self.zk_client.delete_preferred_replica_election(self.context.epoch_zk_version)

    def check_and_trigger_auto_leader_rebalance(self) -> set[TopicPartition]:
        """Elect preferred leaders on every broker whose share of partitions led by
        someone else exceeds leader.imbalance.per.broker.percentage; returns the
        partitions it tried."""
        ctx = self.context
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.all_partitions():
            replicas = ctx.partition_replica_assignment(tp)
            if replicas and not ctx.is_topic_queued_up_for_deletion(tp.topic):
                by_preferred.setdefault(replicas[0], []).append(tp)
        threshold = self.config.leader_imbalance_per_broker_percentage / 100
        tried: set[TopicPartition] = set()
        for broker_id, partitions in sorted(by_preferred.items()):
            not_preferred = [
                tp
                for tp in partitions
                if (info := ctx.partition_leadership_info.get(tp)) is not None
                and info.leader_and_isr.leader != broker_id
            ]
            ratio = len(not_preferred) / len(partitions)
            log.debug("leader imbalance ratio for broker %d is %.3f", broker_id, ratio)
            if ratio <= threshold:
                continue
            candidates = {tp for tp in not_preferred if self._can_preferred_replica_be_leader(tp)}
            if candidates:
                self.on_replica_election(
                    candidates, ElectionType.PREFERRED, ElectionTrigger.AUTO_TRIGGERED
                )
                tried |= candidates
        return tried

    def _can_preferred_replica_be_leader(self, tp: TopicPartition) -> bool:
        ctx = self.context
        assignment = ctx.partition_replica_assignment(tp)
        live = [r for r in assignment if ctx.is_replica_online(r, tp)]
        info = ctx.partition_leadership_info[tp]
        return (
            preferred_replica_partition_leader_election(assignment, info.leader_and_isr.isr, live)
            is not None
        )

    # -- controlled shutdown --------------------------------------------------------
    def _process_controlled_shutdown(self, event: ControlledShutdown) -> None:
        try:
            remaining = self.do_controlled_shutdown(event.broker_id, event.broker_epoch)
        except KafkaError as exc:
            event.callback(ControlledShutdownResult(exc.code, frozenset(), str(exc)))
            if isinstance(exc, ControllerMovedError):
                raise  # the controller resigns
            return
        event.callback(ControlledShutdownResult(ErrorCode.none, frozenset(remaining)))

    def do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        """Move leadership off ``broker_id``; return the partitions it still leads."""
        ctx = self.context
        if not self.is_active:
            raise ControllerMovedError(
                "controller moved to another broker; aborting controlled shutdown"
            )
        if broker_epoch != -1 and broker_epoch < ctx.live_broker_epochs.get(broker_id, -1):
            raise StaleBrokerEpochError(
                f"received a controlled shutdown request from broker {broker_id} with stale epoch "
                f"{broker_epoch}; current epoch is {ctx.live_broker_epochs[broker_id]}"
            )
        log.info("shutting down broker %d", broker_id)
        if broker_id not in ctx.live_or_shutting_down_broker_ids:
            raise BrokerNotAvailableError(f"broker id {broker_id} does not exist")
        ctx.shutting_down_broker_ids.add(broker_id)
        to_act_on = {
            tp
            for tp in ctx.partitions_on_broker(broker_id)
            if len(ctx.partition_replica_assignment(tp)) > 1
            and tp in ctx.partition_leadership_info
            and not ctx.is_topic_queued_up_for_deletion(tp.topic)
        }
        led = {
            tp
            for tp in to_act_on
            if ctx.partition_leadership_info[tp].leader_and_isr.leader == broker_id
        }
        followed = to_act_on - led
        self.partition_state_machine.handle_state_changes(
            led, _P.ONLINE_PARTITION, ControlledShutdownPartitionLeaderElectionStrategy()
        )
        self.replica_state_machine.handle_state_changes(
            {PartitionAndReplica(tp, broker_id) for tp in followed}, _R.OFFLINE_REPLICA
        )
        return {
            tp
            for tp in ctx.partitions_led_by_broker(broker_id)
            if len(ctx.partition_replica_assignment(tp)) > 1
        }

    # == partition reassignment ==========================================
    def process_reassignment_event(
        self, event: ApiPartitionReassignment | ListPartitionReassignments
    ) -> None:
        if isinstance(event, ListPartitionReassignments):
            self._process_list(event)
        else:
            self._process_alter(event)

    def _process_list(self, event: ListPartitionReassignments) -> None:
        if not self.is_active:
            event.callback(ApiError(ErrorCode.not_controller))
            return
        ctx = self.context
        wanted = ctx.partitions_being_reassigned if event.partitions is None else event.partitions
        results = {}
        for tp in sorted(wanted):
            assignment = ctx.partition_full_replica_assignment(tp)
            if assignment.is_being_reassigned:
                results[tp] = assignment
        event.callback(results)

    def _process_alter(self, event: ApiPartitionReassignment) -> None:
        if not self.is_active:
            event.callback(ApiError(ErrorCode.not_controller))
            return
        results: dict[TopicPartition, ApiError] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in sorted(event.reassignments.items()):
            error = None
            if target is not None:
                error = self._validate_replicas(tp, target, event.allow_replication_factor_change)
            if error is not None:
                results[tp] = error
                continue
            reassignment = self._maybe_build_reassignment(tp, target)
            if reassignment is None:
                results[tp] = ApiError(
                    ErrorCode.no_reassignment_in_progress,
                    f"no reassignment of {tp} is in progress",
                )
            else:
                to_reassign[tp] = reassignment
        try:
            results.update(self._maybe_trigger_partition_reassignment(to_reassign))
        except ControllerMovedError:
            event.callback(ApiError(ErrorCode.not_controller))
            raise
        event.callback(results)

    def _validate_replicas(
        self, tp: TopicPartition, replicas: tuple[int, ...], allow_rf_change: bool
    ) -> ApiError | None:
        invalid = ErrorCode.invalid_replica_assignment
        if not replicas:
            return ApiError(invalid, "Empty replica list specified in partition reassignment.")
        if len(set(replicas)) != len(replicas):
            return ApiError(
                invalid,
                f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}",
            )
        if any(r < 0 for r in replicas):
            return ApiError(invalid, f"Invalid broker id in replica list: {list(replicas)}")
        current = self.context.partition_full_replica_assignment(tp)
        if not current.replicas:
            return None  # answered UNKNOWN_TOPIC_OR_PARTITION when triggered
        if not allow_rf_change and len(replicas) != len(current.origin_replicas):
            return ApiError(
                invalid,
                f"The replication factor is changed from {len(current.origin_replicas)} "
                f"to {len(replicas)}",
            )
        adding = current.reassign_to(replicas).adding_replicas
        live = self.context.live_broker_ids
        if not set(adding) <= live:
            return ApiError(
                invalid,
                f"Replica assignment has brokers that are not alive. Replica list: "
                f"{list(adding)}, live broker list: {sorted(live)}",
            )
        return None

    def _maybe_build_reassignment(
        self, tp: TopicPartition, target: tuple[int, ...] | None
    ) -> ReplicaAssignment | None:
        current = self.context.partition_full_replica_assignment(tp)
        if current.is_being_reassigned:
            return current.reassign_to(current.origin_replicas if target is None else target)
        if target is None:
            return None
        return current.reassign_to(target)

    def _maybe_trigger_partition_reassignment(
        self, reassignments: Mapping[TopicPartition, ReplicaAssignment]
    ) -> dict[TopicPartition, ApiError]:
        results: dict[TopicPartition, ApiError] = {}
        unknown = ApiError(ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
        for tp, reassignment in reassignments.items():
            if self.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic):
                log.info("skipping reassignment of %s: the topic is being deleted", tp)
                results[tp] = unknown
            elif not self.context.partition_replica_assignment(tp):
                results[tp] = unknown
            else:
                try:
                    self.on_partition_reassignment(tp, reassignment)
                    results[tp] = ApiError()
                except ControllerMovedError:
                    log.info("controller moved while reassigning %s", tp)
                    raise
                except Exception as exc:
                    log.exception("error reassigning partition %s", tp)
                    results[tp] = ApiError(ErrorCode.unknown_server_error, str(exc) or None)
        return results

    # -- the reassignment itself ----------------------------------------------------
    def initialize_partition_reassignments(self) -> None:
        """On failover: resume every reassignment found in the topic znodes."""
        self.maybe_resume_reassignments(lambda tp, assignment: True)

    def maybe_resume_reassignments(
        self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]
    ) -> None:
        for tp in sorted(self.context.partitions_being_reassigned):
            assignment = self.context.partition_full_replica_assignment(tp)
            if should_resume(tp, assignment):
                self.on_partition_reassignment(tp, assignment)

    def on_isr_change(self, partitions: Iterable[TopicPartition]) -> None:
        """ISRs changed: complete the reassignments whose target replicas all caught up."""
        for tp in sorted(set(partitions) & self.context.partitions_being_reassigned):
            reassignment = self.context.partition_full_replica_assignment(tp)
            if self._is_reassignment_complete(tp, reassignment):
                log.info(
                    "target replicas %s of reassigning partition %s have caught up with the leader",
                    list(reassignment.target_replicas),
                    tp,
                )
                self.on_partition_reassignment(tp, reassignment)

    def on_partition_reassignment(
        self, tp: TopicPartition, reassignment: ReplicaAssignment
    ) -> None:
        """Kafka's ``onPartitionReassignment``: start, or complete, moving ``tp``."""
        self.topic_deletion_manager.mark_topic_ineligible_for_deletion(
            {tp.topic}, "topic reassignment in progress"
        )
        self._update_current_reassignment(tp, reassignment)
        adding = [PartitionAndReplica(tp, r) for r in reassignment.adding_replicas]
        if not self._is_reassignment_complete(tp, reassignment):
            log.info(
                "reassigning partition %s: replicas %s, adding %s, removing %s",
                tp,
                list(reassignment.replicas),
                list(reassignment.adding_replicas),
                list(reassignment.removing_replicas),
            )
            self._update_leader_epoch_and_send_request(tp, reassignment)
            # A resumed reassignment's adding replicas may already be online.
            new = [r for r in adding if self.context.replica_state(r) is _R.NON_EXISTENT_REPLICA]
            self.replica_state_machine.handle_state_changes(new, _R.NEW_REPLICA)
            return
        self.replica_state_machine.handle_state_changes(adding, _R.ONLINE_REPLICA)
        completed = ReplicaAssignment(reassignment.target_replicas)
        self.context.update_partition_full_replica_assignment(tp, completed)
        self._move_reassigned_partition_leader_if_required(tp, completed)
        self._stop_removed_replicas(tp, reassignment.removing_replicas)
        self._update_replica_assignment_for_partition(tp, completed)
        self.context.partitions_being_reassigned.discard(tp)
        self.send_update_metadata({tp})
        log.info("reassignment of partition %s to %s completed", tp, list(completed.replicas))
        self.topic_deletion_manager.resume_deletion_for_topics({tp.topic})

    def _update_current_reassignment(
        self, tp: TopicPartition, reassignment: ReplicaAssignment
    ) -> None:
        current = self.context.partition_full_replica_assignment(tp)
        if current != reassignment:
            log.debug("updating assignment of %s from %s to %s", tp, current, reassignment)
            self._update_replica_assignment_for_partition(tp, reassignment)
            self.context.update_partition_full_replica_assignment(tp, reassignment)
            # Replicas added by an earlier reassignment that the new one does not want.
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            if unneeded:
                self._stop_removed_replicas(tp, unneeded)
        self.context.partitions_being_reassigned.add(tp)

    def _is_reassignment_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        if not assignment.is_being_reassigned:
            return True
        state = self.zk_client.get_topic_partition_states([tp]).get(tp)
        return state is not None and set(assignment.target_replicas) <= set(
            state.leader_and_isr.isr
        )

    def _update_replica_assignment_for_partition(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        ctx = self.context
        topic_assignment = ctx.partition_full_replica_assignment_for_topic(tp.topic)
        topic_assignment[tp.partition] = assignment
        self.zk_client.set_topic_assignment(
            tp.topic, ctx.topic_ids.get(tp.topic), topic_assignment, ctx.epoch_zk_version
        )
        log.info("updated the assignment of partition %s to %s", tp, assignment)

    def _update_leader_epoch(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        """Bump the leader epoch in ZooKeeper (so the leader learns the new replica set)."""
        ctx = self.context
        while True:
            found = self.zk_client.get_topic_partition_states([tp]).get(tp)
            if found is None:
                raise IllegalStateError(
                    f"cannot update the leader epoch of {tp}: its state znode does not exist"
                )
            if found.controller_epoch > ctx.epoch:
                raise StateChangeFailedError(
                    f"the state of {tp} was written by controller epoch "
                    f"{found.controller_epoch}, newer than ours ({ctx.epoch})"
                )
            new = found.leader_and_isr.new_epoch()
            update = self.zk_client.update_leader_and_isr(
                {tp: new}, ctx.epoch, ctx.epoch_zk_version
            )
            outcome = update.finished.get(tp)
            if isinstance(outcome, Exception):
                raise outcome
            if outcome is not None:
                info = LeaderIsrAndControllerEpoch(outcome, ctx.epoch)
                ctx.partition_leadership_info[tp] = info
                return info

    def _update_leader_epoch_and_send_request(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        info = self._update_leader_epoch(tp)
        if info is None:
            return
        batch = self.batch
        batch.new_batch()
        try:
            batch.add_leader_and_isr_request_for_brokers(
                assignment.origin_replicas, tp, info, assignment, False
            )
            batch.add_leader_and_isr_request_for_brokers(
                assignment.adding_replicas, tp, info, assignment, True
            )
            batch.send_requests_to_brokers(self.context.epoch)
        except Exception:
            batch.clear()
            raise
        log.info(
            "sent LeaderAndIsr (leader %d, leader epoch %d) with assignment %s for partition %s",
            info.leader_and_isr.leader,
            info.leader_and_isr.leader_epoch,
            list(assignment.replicas),
            tp,
        )

    def _move_reassigned_partition_leader_if_required(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        ctx = self.context
        info = ctx.partition_leadership_info.get(tp)
        leader = info.leader_and_isr.leader if info is not None else -1
        if leader in assignment.replicas and ctx.is_replica_online(leader, tp):
            log.info("leader %d of reassigned partition %s stays; bumping its epoch", leader, tp)
            self._update_leader_epoch_and_send_request(tp, assignment)
            return
        log.info(
            "leader %d of reassigned partition %s is not a live replica of %s; electing",
            leader,
            tp,
            list(assignment.replicas),
        )
        self.partition_state_machine.handle_state_changes(
            [tp], PartitionState.ONLINE_PARTITION, ReassignPartitionLeaderElectionStrategy()
        )

    def _stop_removed_replicas(self, tp: TopicPartition, removed: Iterable[int]) -> None:
        """Offline (out of the ISR), StopReplica with delete, then gone."""
        replicas = [PartitionAndReplica(tp, r) for r in removed]
        rsm = self.replica_state_machine
        rsm.handle_state_changes(replicas, _R.OFFLINE_REPLICA)
        rsm.handle_state_changes(replicas, _R.REPLICA_DELETION_STARTED)
        rsm.handle_state_changes(replicas, _R.REPLICA_DELETION_SUCCESSFUL)
        rsm.handle_state_changes(replicas, _R.NON_EXISTENT_REPLICA)


class _WatchPreferredReplicaElection(ControllerEvent):
    """Re-arm the /admin/preferred_replica_election watch after the znode went away."""

    __slots__ = ()
