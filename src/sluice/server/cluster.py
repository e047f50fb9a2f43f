"""Cluster mode (``zookeeper.connect`` set): registration, the controller, the metadata
cache the controller pushes, LeaderAndIsr/StopReplica handling, replica fetchers, ISR
maintenance, topic config changes, and the ZooKeeper topic admin
(:class:`~sluice.server.zk_topic_admin.ZkTopicAdmin`). Everything here runs on the
broker's event loop, except the controller's own event thread (which reaches the loop
through the channel).

The :class:`ClusterManager` takes the broker's collaborators by name (config, metadata
cache, replica manager, log manager, topic registry, producer ids, coordinators), not
the broker."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sluice.base import TopicPartition
from sluice.base.log_summary import summarize
from sluice.controller import (
    AdminZkClient,
    ControllerConfig,
    ControllerEpochChecker,
    KafkaController,
    KafkaZkClient,
    LeaderAndIsr,
)
from sluice.controller.events import ControlledShutdownResult
from sluice.controller.model import Broker as BrokerInfo
from sluice.controller.model import EndPoint
from sluice.controller.requests import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from sluice.controller.states import PartitionState
from sluice.coordinator.group import GROUP_METADATA_TOPIC_NAME
from sluice.coordinator.transaction import TRANSACTION_STATE_TOPIC_NAME
from sluice.log import KafkaStorageException
from sluice.metastore import NodeExistsError
from sluice.protocol import ErrorCode
from sluice.replication.partition import Partition
from sluice.server.group_runtime import load_offsets_partition
from sluice.server.inter_broker import NetworkControllerChannel
from sluice.server.listener_security import inter_broker_listener
from sluice.server.replica_fetcher import ReplicaFetcher
from sluice.server.topics import TopicInfo, TopicRegistry
from sluice.server.txn_runtime import load_transaction_partition
from sluice.server.zk_scram_credentials import ZkScramCredentialStore, desanitize
from sluice.server.zk_topic_admin import ZkTopicAdmin, topic_uuid

if TYPE_CHECKING:
    from sluice.base.clock import Clock
    from sluice.config import BrokerConfig
    from sluice.log import LogManager
    from sluice.metastore.store import CoordinationStore, Watcher
    from sluice.replication.metadata_cache import MetadataCache
    from sluice.replication.producer_ids import ProducerIdManager
    from sluice.replication.replica_manager import ReplicaManager
    from sluice.server.request_context import Coordinators

__all__ = ["ClusterManager"]

log = logging.getLogger(__name__)


class ClusterManager:
    """One broker's part of a ZooKeeper cluster."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        log_dir: Path,
        advertised: Callable[[], tuple[EndPoint, ...]],
        metadata_cache: MetadataCache,
        replica_manager: ReplicaManager,
        log_manager: LogManager,
        registry: TopicRegistry,
        producer_ids: ProducerIdManager,
        coordinators: Coordinators,
        clock: Clock,
        store_factory: Callable[[], CoordinationStore] | None = None,
    ) -> None:
        """``advertised()`` is this broker's advertised endpoints (known once its
        listeners are bound); ``store_factory`` opens the coordination store instead of
        ZooKeeper (an in-process DataTree in tests)."""
        self.config = config
        self.broker_id = config.broker_id
        self.log_dir = log_dir
        # ISR changes written since the event loop last turned, logged together then
        self._isr_changes: list[_IsrChange] = []
        self._advertised = advertised
        self.inter_broker = inter_broker_listener(config)  # how it reaches other brokers
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.registry = registry  # the topics with a replica here
        self.producer_ids = producer_ids
        self.coordinators = coordinators
        self.clock = clock
        self._store_factory = store_factory
        self.store: CoordinationStore | None = None
        self.zk: KafkaZkClient
        self.admin: AdminZkClient
        # Called on the loop with a user, client or broker entity path ("users/alice",
        # "users/alice/clients/app", "clients/<default>", "brokers/<default>") whose
        # config changed.
        self.entity_config_listeners: list[Callable[[str], None]] = []
        self.topic_admin: ZkTopicAdmin
        self.scram_credentials: ZkScramCredentialStore  # users' SCRAM credentials
        self.controller: KafkaController | None = None
        self.channel: NetworkControllerChannel | None = None
        self.checker = ControllerEpochChecker()
        self.broker_epoch = -1
        # ISR changes this broker wrote as a leader (IsrShrinksPerSec, IsrExpandsPerSec).
        self.isr_shrinks = 0
        self.isr_expands = 0
        # Fed with the controller's UpdateMetadata requests; the controller id is this
        # broker's view of /controller.
        self.metadata_cache = metadata_cache
        self.metadata_cache.set_controller_id_source(lambda: self.active_controller_id)
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._loads: set[asyncio.Future[None]] = set()
        self._config_watch: Watcher | None = None
        self._config_seen: set[str] = set()

    # -- life cycle ------------------------------------------------------------------
    def connect(self) -> None:
        """Open the ZooKeeper session (blocking, before the broker serves) and make the
        topic admin over it."""
        store: CoordinationStore
        if self._store_factory is not None:
            store = self._store_factory()
        else:
            from sluice.metastore.zookeeper import ZooKeeperStore

            store = ZooKeeperStore(
                self.config["zookeeper.connect"],
                session_timeout_ms=self.config["zookeeper.session.timeout.ms"],
                connection_timeout_ms=self.config["zookeeper.connection.timeout.ms"],
            )
        self.store = store
        self.zk = KafkaZkClient(store, self.clock)
        self.zk.create_top_level_paths()
        # Producer ids must be unique across the cluster: blocks come from ZooKeeper.
        from sluice.replication.producer_ids import ZkProducerIdBlockSource

        self.producer_ids.block_source = ZkProducerIdBlockSource(store, self.broker_id)
        self.admin = AdminZkClient(self.zk)
        self.topic_admin = ZkTopicAdmin(
            self.config, self.registry, self.log_manager, self.metadata_cache,
            self.coordinators, self.zk, self.admin,
        )  # fmt: skip
        cache = self.metadata_cache
        cache.cluster_id = self._cluster_id(store, cache.cluster_id)
        self.scram_credentials = ZkScramCredentialStore(store)
        self.scram_credentials.load()

    def _cluster_id(self, store: CoordinationStore, local: str) -> str:
        """The cluster's id in /cluster/id (created from ours by the first broker)."""
        from sluice.controller.zk_data import ClusterIdZNode
        from sluice.metastore.store import ensure_path

        ensure_path(store, "/cluster")
        with contextlib.suppress(NodeExistsError):
            store.create(ClusterIdZNode.path, ClusterIdZNode.encode(local))
        cluster_id = ClusterIdZNode.decode(store.get(ClusterIdZNode.path)[0])
        if cluster_id != local:
            path = self.log_dir / "meta.properties"
            path.write_text(
                f"version=0\nbroker.id={self.broker_id}\ncluster.id={cluster_id}\n",
                encoding="utf-8",
            )
        return cluster_id

    def me(self) -> BrokerInfo:
        endpoints = tuple(
            ep if ep.host else dataclasses.replace(ep, host="127.0.0.1")
            for ep in self._advertised()
        )
        return BrokerInfo(self.broker_id, endpoints, None)

    async def start(self) -> None:
        """Register /brokers/ids/N (waiting out an old session) and start the controller."""
        loop = asyncio.get_running_loop()
        me = self.me()
        deadline = time.monotonic() + self.config["zookeeper.session.timeout.ms"] / 1000 + 30
        while True:
            try:
                self.broker_epoch = await loop.run_in_executor(None, self.zk.register_broker, me)
                break
            except NodeExistsError:
                if time.monotonic() > deadline:
                    raise
                log.info("/brokers/ids/%d still held by an old session; retrying", me.id)
                await asyncio.sleep(0.5)
        self.checker.broker_epoch = self.broker_epoch
        self.channel = NetworkControllerChannel(loop, self.broker_id, self.inter_broker)
        self.controller = KafkaController(
            ControllerConfig.from_broker_config(self.config), self.zk, self.channel,
            self.clock, broker=me, broker_epoch=self.broker_epoch,
        )  # fmt: skip
        self.controller.startup()
        self.replica_manager.on_isr_expand = self._expand_isr
        self.replica_manager.on_log_dir_failure = self._log_dir_failed
        self._tasks.append(asyncio.create_task(self._isr_expiration()))
        self._watch_config_changes()
        log.info("broker %d registered (epoch %d)", self.broker_id, self.broker_epoch)

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move this broker's leaders away (and take it out of the
        ISRs) before it stops, up to ``controlled.shutdown.max.retries`` tries
        ``controlled.shutdown.retry.backoff.ms`` apart. True when it leads nothing
        replicated any more; False means an unclean shutdown follows."""
        if not self.config["controlled.shutdown.enable"] or self.broker_epoch < 0:
            return False
        if self._last_live_broker():
            log.info("controlled shutdown of broker %d: no other live broker to move its "
                     "leaders to", self.broker_id)  # fmt: skip
            return False
        tries = max(1, int(self.config["controlled.shutdown.max.retries"]))
        backoff_s = self.config["controlled.shutdown.retry.backoff.ms"] / 1000
        started = time.monotonic()
        for attempt in range(1, tries + 1):
            result = await self._send_controlled_shutdown()
            if result is not None and result.error_code is ErrorCode.none:
                if not result.partitions_remaining:
                    self._demote_all_leaders()
                    log.info("controlled shutdown of broker %d succeeded in %.0f ms",
                             self.broker_id, (time.monotonic() - started) * 1000)  # fmt: skip
                    return True
                log.info("controlled shutdown try %d: still leading %s", attempt,
                         sorted(result.partitions_remaining))  # fmt: skip
            elif result is not None:
                log.info("controlled shutdown try %d: %s %s", attempt,
                         result.error_code.name, result.message)  # fmt: skip
            if attempt < tries:
                await asyncio.sleep(backoff_s)
        log.warning("controlled shutdown of broker %d failed after %d tries; stopping anyway",
                    self.broker_id, tries)  # fmt: skip
        return False

    async def _send_controlled_shutdown(self) -> ControlledShutdownResult | None:
        controller_id = self.active_controller_id
        target = self.me() if controller_id == self.broker_id else (
            self.metadata_cache.alive_broker(controller_id)
        )  # fmt: skip
        ep = self.inter_broker.endpoint(target) if target is not None else None
        if ep is None:
            return ControlledShutdownResult(ErrorCode.not_controller, message="no controller")
        conn = self.inter_broker.connection(ep, f"controlled-shutdown-{self.broker_id}")
        try:
            return await asyncio.wait_for(
                conn.send_controlled_shutdown(self.broker_id, self.broker_epoch), 30
            )
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
            log.info("controlled shutdown request to %d failed: %r", controller_id, exc)
            return None
        finally:
            conn.close()

    def _demote_all_leaders(self) -> None:
        """The controller moved every replicated leadership away: answer produce and
        fetch with NOT_LEADER from now on, even before its LeaderAndIsr arrives."""
        rm = self.replica_manager
        for partition in list(rm.partitions.values()):
            if partition.is_leader and len(partition.assigned_replicas) > 1:
                partition.leader_id = -1
                self._coordinator_resign(partition.tp)
                rm.wake(partition.tp, True)

    async def crash(self) -> None:
        """Stop everything here without telling anyone; the session stays open until it
        times out (the in-process equivalent of kill -9)."""
        for task in [*self._tasks, *self._loads]:
            task.cancel()
        for fetcher in self.fetchers.values():
            fetcher.stop()
        self.fetchers.clear()
        if self.controller is not None:  # its thread stops; ZooKeeper is not touched
            await asyncio.get_running_loop().run_in_executor(None, self.controller.shutdown)
        if self.channel is not None:
            self.channel.close()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for fetcher in self.fetchers.values():
            fetcher.stop()
        self.fetchers.clear()
        loop = asyncio.get_running_loop()
        if self.controller is not None:
            await loop.run_in_executor(None, self.controller.shutdown)
        if self.channel is not None:
            self.channel.close()
        if self.store is not None:
            await loop.run_in_executor(None, self.store.close)

    @property
    def active_controller(self) -> KafkaController | None:
        """This broker's controller when it is the active one, else None."""
        controller = self.controller
        return controller if controller is not None and controller.is_active else None

    def controller_stats(self) -> tuple[bool, int, int, int] | None:
        """(active, offline partitions, leader elections, unclean leader elections) of this
        broker's controller, read from another thread than the controller's (counts may be
        a moment old); None before the controller exists."""
        controller = self.controller
        if controller is None:
            return None
        machine = controller.partition_state_machine
        offline = 0
        if controller.is_active:
            for _ in range(3):  # the controller thread may change the dict meanwhile
                try:
                    offline = sum(
                        1 for state in list(controller.context.partition_states.values())
                        if state is PartitionState.OFFLINE_PARTITION
                    )  # fmt: skip
                    break
                except RuntimeError:
                    continue
        return (controller.is_active, offline, machine.leader_elections,
                machine.unclean_leader_elections)  # fmt: skip

    @property
    def active_controller_id(self) -> int:
        return self.controller.active_controller_id if self.controller is not None else -1

    def _last_live_broker(self) -> bool:
        """Whether this broker is the only one registered (so controlled shutdown has
        nowhere to move leaders, and every try would fail)."""
        try:
            return self.topic_admin.live_broker_ids() == [self.broker_id]
        except Exception:  # the store is unreachable: try the controller anyway
            return False

    # -- topic configs (/config/topics, announced under /config/changes) ----------------
    def _watch_config_changes(self) -> None:
        """Arm the /config/changes watch; new notifications are applied on the loop."""
        from sluice.controller.zk_data import ConfigEntityChangeNotificationZNode as Change
        from sluice.metastore.store import ensure_path

        loop = asyncio.get_running_loop()

        def fired(_event: object) -> None:  # on the coordination client's thread
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._process_config_changes)

        store = self.zk.store
        ensure_path(store, Change.path)
        self._config_watch = fired
        self._config_seen = set(store.get_children(Change.path, watch=fired))
        self.scram_credentials.load()  # users changed before the watch was armed

    def _process_config_changes(self) -> None:
        from sluice.controller.zk_data import ConfigEntityChangeNotificationZNode as Change

        store = self.zk.store
        try:
            children = set(store.get_children(Change.path, watch=self._config_watch))
        except Exception:
            log.exception("reading %s failed", Change.path)
            return
        for child in sorted(children - self._config_seen):
            try:
                entity = Change.decode(store.get(f"{Change.path}/{child}")[0])
            except Exception:
                continue  # purged meanwhile
            kind, _, name = entity.partition("/")
            if kind == "topics" and name:
                self.apply_topic_config(name)
            elif kind == "brokers" and name:  # brokers/<id>, brokers/<default>
                for listener in self.entity_config_listeners:
                    listener(entity)
            elif kind in ("users", "clients") and name:
                if kind == "users" and "/" not in name:  # users/<user>: SCRAM credentials too
                    self.scram_credentials.reload_user(desanitize(name))
                for listener in self.entity_config_listeners:
                    listener(entity)
        self._config_seen = children

    def apply_topic_config(self, topic: str) -> None:
        """Take the topic's overrides from ZooKeeper into the registry and its logs."""
        if self.registry.get(topic) is None:
            return
        configs = self.zk.get_topic_config(topic)
        try:
            self.topic_admin.apply_topic_configs(topic, configs)
            log.info("applied new config of topic %s: %s", topic, configs)
        except Exception:
            log.exception("config of topic %s not applied", topic)

    # -- controller requests (on the event loop) --------------------------------------
    def _ensure_topic(self, topic: str) -> TopicInfo:
        """The topic of a replica this broker is to host, recorded in the registry."""
        registry = self.registry
        info = registry.get(topic)
        found = self.zk.get_topic_assignment(topic)
        assignment = {} if found is None else {p: list(a.replicas) for p, a in found[1].items()}
        if info is None:
            topic_id = topic_uuid(found[0] if found else None)
            info = TopicInfo(topic, topic_id, assignment, self.zk.get_topic_config(topic))
            registry.put(info)
        elif set(assignment) - set(info.assignment):
            registry.add_partitions(topic, assignment)
        self.metadata_cache.set_topic_id(topic, info.topic_id)
        return info

    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        error = self.checker.check_request(request)
        if error is not ErrorCode.none:
            return LeaderAndIsrResponse(error)
        rm = self.replica_manager
        errors: dict[TopicPartition, ErrorCode] = {}
        leaders = {b.id: self.inter_broker.named(b) for b in request.live_leaders}
        now = self.clock.milliseconds()
        became_leader: list[LeaderAndIsrPartitionState] = []
        became_follower: list[LeaderAndIsrPartitionState] = []
        for s in request.partition_states:
            tp = s.topic_partition
            partition = rm.get_partition(tp)
            if partition is not None and partition.log.is_offline:
                # Kafka's HostedPartition.Offline, answered before any epoch check: the
                # controller takes the replica offline and moves its leadership.
                errors[tp] = ErrorCode.kafka_storage_error
                continue
            current = partition.leader_epoch if partition is not None else -1
            if partition is not None and ControllerEpochChecker.check_leader_epoch(
                s.leader_epoch, current
            ) is not ErrorCode.none:  # fmt: skip
                errors[tp] = ErrorCode.stale_controller_epoch
                continue
            if self.broker_id not in s.replicas:
                errors[tp] = ErrorCode.unknown_topic_or_partition
                continue
            try:
                if partition is None:
                    partition = self._create_partition(tp, list(s.replicas), s.is_new)
                if partition.log.is_offline:  # a log of an offline dir
                    errors[tp] = ErrorCode.kafka_storage_error
                    continue
                if s.leader == self.broker_id:
                    self._remove_from_fetchers(tp)
                    hw_moved = partition.make_leader(
                        s.leader_epoch, list(s.isr), list(s.replicas), s.partition_epoch,
                        s.controller_epoch, now,
                    )  # fmt: skip
                    rm.wake(tp, hw_moved)
                    log.debug(
                        "%s: leader at epoch %d, ISR %s, LEO %d, HW %d", tp, s.leader_epoch,
                        list(s.isr), partition.log.log_end_offset, partition.high_watermark,
                    )  # fmt: skip
                    became_leader.append(s)
                    self._coordinator_elect(tp)
                else:
                    self._remove_from_fetchers(tp)
                    self._coordinator_resign(tp)
                    partition.make_follower(
                        s.leader, s.leader_epoch, list(s.isr), list(s.replicas),
                        s.partition_epoch, s.controller_epoch,
                    )  # fmt: skip
                    rm.wake(tp, True)  # waiting produce/fetch: NOT_LEADER now
                    log.debug(
                        "%s: follower of %d at epoch %d, LEO %d, HW %d", tp, s.leader,
                        s.leader_epoch, partition.log.log_end_offset, partition.high_watermark,
                    )  # fmt: skip
                    became_follower.append(s)
                    leader = leaders.get(s.leader) or self.metadata_cache.alive_broker(s.leader)
                    if s.leader >= 0 and leader is not None:
                        self._add_to_fetcher(leader, partition)
                errors[tp] = ErrorCode.none
            except KafkaStorageException as exc:  # its log dir is offline, and said so
                log.debug("LeaderAndIsr for %s: %s", tp, exc)
                errors[tp] = ErrorCode.kafka_storage_error
            except Exception:
                log.exception("LeaderAndIsr for %s failed", tp)
                errors[tp] = ErrorCode.kafka_storage_error
        self._log_leadership(request, became_leader, became_follower)
        return LeaderAndIsrResponse(ErrorCode.none, errors)

    def _log_leadership(
        self,
        request: LeaderAndIsrRequest,
        leader: list[LeaderAndIsrPartitionState],
        follower: list[LeaderAndIsrPartitionState],
    ) -> None:
        """One line per LeaderAndIsr request that changed what this broker leads or
        follows, however many partitions it holds (each is at DEBUG above)."""
        fields: dict[str, object] = {
            "broker_id": self.broker_id, "controller_id": request.controller_id,
            "controller_epoch": request.controller_epoch,
        }  # fmt: skip
        for kind, states, describe in (
            ("leader", leader, _describe_leader), ("follower", follower, _describe_follower)
        ):  # fmt: skip
            if not states:
                continue
            one: dict[str, object] = {}
            if len(states) == 1:
                s = states[0]
                one = {"topic": s.topic_partition.topic, "partition": s.topic_partition.partition,
                       "leader_id": s.leader, "leader_epoch": s.leader_epoch}  # fmt: skip
            log.info(
                "[Broker id=%d] Became %s of %d partitions at the request of controller %d "
                "(controller epoch %d): %s",
                self.broker_id, kind, len(states), request.controller_id,
                request.controller_epoch, summarize(states, describe),
                extra={**fields, "event": f"become_{kind}", "partition_count": len(states), **one},
            )  # fmt: skip

    def _log_dir_failed(self, log_dir: Path, partitions: list[TopicPartition]) -> None:
        """A log dir of this broker went offline (ReplicaManager.handle_log_dir_failure):
        its partitions stop fetching and their coordinators resign, and the controller
        is told through /log_dir_event_notification (Kafka's ``propagateLogDirEvent``);
        it asks which replicas are offline and moves their leadership."""
        for tp in partitions:
            self._remove_from_fetchers(tp)
            self._coordinator_resign(tp)
        log.warning(
            "log dir %s failed: %d partitions offline here; telling the controller",
            log_dir, len(partitions),
        )  # fmt: skip
        task = asyncio.ensure_future(self._propagate_log_dir_event())
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    async def _propagate_log_dir_event(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self.zk.propagate_log_dir_event, self.broker_id)
        except Exception as exc:
            log.error("could not tell the controller of a failed log dir: %r", exc)

    def _coordinator_elect(self, tp: TopicPartition) -> None:
        """Leading an offsets partition makes this broker its groups' coordinator."""
        if tp.topic == GROUP_METADATA_TOPIC_NAME:
            coordinator = self.coordinators.group
            coordinator.on_election(tp.partition)
            task = asyncio.ensure_future(load_offsets_partition(coordinator, tp.partition))
            self._loads.add(task)
            task.add_done_callback(self._loads.discard)

        elif tp.topic == TRANSACTION_STATE_TOPIC_NAME:
            # The transaction coordinator moves with the leadership of its partition;
            # the partition's leader epoch is its coordinator epoch (fences old markers).
            partition = self.replica_manager.get_partition(tp)
            epoch = partition.leader_epoch if partition is not None else 0
            txn_coordinator = self.coordinators.txn
            txn_coordinator.on_elected(tp.partition, epoch, load=False)
            task = asyncio.ensure_future(load_transaction_partition(txn_coordinator, tp.partition))
            self._loads.add(task)
            task.add_done_callback(self._loads.discard)

    def _coordinator_resign(self, tp: TopicPartition) -> None:
        if tp.topic == GROUP_METADATA_TOPIC_NAME:
            self.coordinators.group.on_resignation(tp.partition)
        elif tp.topic == TRANSACTION_STATE_TOPIC_NAME:
            self.coordinators.txn.on_resigned(tp.partition)

    def _create_partition(self, tp: TopicPartition, replicas: list[int], is_new: bool) -> Partition:
        """The partition of a replica the controller assigned here; its log is not created
        afresh while a log dir is offline unless the partition is new (it may have been
        there: LogManager.get_or_create_log)."""
        info = self._ensure_topic(tp.topic)
        log_ = self.log_manager.get_or_create_log(
            tp.topic, tp.partition, self.topic_admin.log_config_for(tp.topic), is_new
        )
        partition = self.replica_manager.add_partition(
            tp, log_, replicas, leader_epoch=-1, topic_id=info.topic_id
        )
        partition.leader_id = -1
        return partition

    def handle_update_metadata(self, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
        error = self.checker.check_request(request)
        if error is not ErrorCode.none:
            return UpdateMetadataResponse(error)
        topic_ids = {}
        for topic in self.metadata_cache.topics_without_id(request.partition_states):
            found = self.zk.get_topic_assignment(topic)
            topic_ids[topic] = topic_uuid(found[0] if found else None)
        self.metadata_cache.update_metadata(
            request.live_brokers, request.partition_states, topic_ids
        )
        # CreateTopics and CreatePartitions answers waiting for these leaders (Kafka's
        # tryCompleteDelayedTopicOperations)
        topics = {s.topic_partition.topic for s in request.partition_states}
        self.topic_admin.try_complete_delayed_topic_operations(topics)
        return UpdateMetadataResponse()

    def handle_stop_replica(self, request: StopReplicaRequest) -> StopReplicaResponse:
        error = self.checker.check_request(request)
        if error is not ErrorCode.none:
            return StopReplicaResponse(error)
        rm = self.replica_manager
        errors: dict[TopicPartition, ErrorCode] = {}
        for s in request.partition_states:
            tp = s.topic_partition
            self._remove_from_fetchers(tp)
            self._coordinator_resign(tp)
            if s.delete_partition:
                rm.remove_partition(tp)
                with contextlib.suppress(Exception):
                    self.log_manager.delete_log(tp.topic, tp.partition)
                with contextlib.suppress(KafkaStorageException):  # its log dir said so
                    self.registry.remove_partition(tp.topic, tp.partition)
            else:
                partition = rm.get_partition(tp)
                if partition is not None:
                    partition.leader_id = -1
                    rm.wake(tp, True)
            errors[tp] = ErrorCode.none
        return StopReplicaResponse(ErrorCode.none, errors)

    # -- replica fetchers ---------------------------------------------------------------
    def _add_to_fetcher(self, leader: BrokerInfo, partition: Partition) -> None:
        """Each leader's partitions are spread over ``num.replica.fetchers`` fetchers
        (one connection each), by a stable hash of the partition as Kafka does."""
        tp = partition.tp
        index = zlib.crc32(f"{tp.topic}-{tp.partition}".encode()) % max(
            1, int(self.config["num.replica.fetchers"])
        )
        key = (leader.id, index)
        fetcher = self.fetchers.get(key)
        ep = self.inter_broker.endpoint(leader)
        if ep is None:
            log.warning("%s: leader %d has no %s listener to fetch from", tp, leader.id,
                        self.inter_broker.listener_name)  # fmt: skip
            return
        if fetcher is not None and (fetcher.host, fetcher.port) != (ep.host, ep.port):
            fetcher.stop()
            fetcher = None
        if fetcher is None:
            fetcher = ReplicaFetcher(self, leader.id, ep)
            self.fetchers[key] = fetcher
        fetcher.add(partition)

    def _remove_from_fetchers(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)

    # -- ISR changes (leader) --------------------------------------------------------------
    def _write_isr(self, partition: Partition, new_isr: set[int]) -> bool:
        tp = partition.tp
        old_isr = sorted(partition.isr)
        lai = LeaderAndIsr(
            self.broker_id, tuple(sorted(new_isr)), partition.leader_epoch,
            partition.partition_epoch,
        )  # fmt: skip
        try:
            result = self.zk.update_leader_and_isr({tp: lai}, partition.controller_epoch, None)
        except Exception:
            log.exception("ISR update of %s failed", tp)
            return False
        done = result.finished.get(tp)
        if not isinstance(done, LeaderAndIsr):  # the controller changed it meanwhile
            log.debug("ISR update of %s to %s not applied (stale partition epoch)", tp, new_isr)
            return False
        if len(new_isr) < len(partition.isr):
            self.isr_shrinks += 1
        elif len(new_isr) > len(partition.isr):
            self.isr_expands += 1
        partition.isr = set(new_isr)
        partition.partition_epoch = done.zk_version
        with contextlib.suppress(Exception):
            self.zk.propagate_isr_changes([tp])
        change = _IsrChange(
            tp, old_isr, sorted(new_isr), partition.leader_epoch, partition.partition_epoch,
            partition.high_watermark, partition.log.log_end_offset,
        )  # fmt: skip
        log.debug("[Partition %s broker=%d] %s", tp, self.broker_id, change)
        if not self._isr_changes:
            try:
                asyncio.get_running_loop().call_soon(self._log_isr_changes)
            except RuntimeError:  # no event loop: at once
                self._isr_changes.append(change)
                self._log_isr_changes()
                return True
        self._isr_changes.append(change)
        return True

    def _log_isr_changes(self) -> None:
        """One line for the shrinks and one for the expansions written in one turn of the
        event loop (an ISR expiration round, a follower's fetch): the change itself when
        there is one, a summary when many partitions changed at once (a broker gone)."""
        changes, self._isr_changes = self._isr_changes, []
        for event, verb in (("isr_shrink", "Shrinking"), ("isr_expand", "Expanding")):
            chosen = [c for c in changes if c.expanding is (event == "isr_expand")]
            if len(chosen) == 1:
                c = chosen[0]
                log.info(
                    "[Partition %s broker=%d] %s", c.tp, self.broker_id, c,
                    extra={
                        "event": event, "topic": c.tp.topic, "partition": c.tp.partition,
                        "broker_id": self.broker_id, "old_isr": c.old_isr, "isr": c.new_isr,
                        "leader_epoch": c.leader_epoch, "partition_epoch": c.partition_epoch,
                    },
                )  # fmt: skip
            elif chosen:
                log.info(
                    "[Broker id=%d] %s ISR of %d partitions: %s", self.broker_id, verb,
                    len(chosen), summarize(chosen, _IsrChange.brief),
                    extra={"event": event, "broker_id": self.broker_id,
                           "partition_count": len(chosen)},
                )  # fmt: skip

    def _expand_isr(self, partition: Partition, replica_id: int) -> None:
        self._write_isr(partition, partition.isr | {replica_id})

    async def _isr_expiration(self) -> None:
        lag_ms = int(self.config["replica.lag.time.max.ms"])
        while True:
            await asyncio.sleep(lag_ms / 2000)
            try:
                now = self.clock.milliseconds()
                for partition in list(self.replica_manager.partitions.values()):
                    if not partition.is_leader:
                        continue
                    out = partition.out_of_sync_replicas(now, lag_ms)
                    if out and self._write_isr(partition, partition.isr - out):
                        hw_moved = partition.maybe_increment_high_watermark()
                        self.replica_manager.wake(partition.tp, hw_moved)
            except Exception:
                log.exception("ISR expiration failed")


def _describe_leader(state: LeaderAndIsrPartitionState) -> str:
    return f"{state.topic_partition} (leader epoch {state.leader_epoch}, ISR {list(state.isr)})"


def _describe_follower(state: LeaderAndIsrPartitionState) -> str:
    return f"{state.topic_partition} (leader {state.leader}, leader epoch {state.leader_epoch})"


@dataclasses.dataclass(frozen=True, slots=True)
class _IsrChange:
    """An ISR change this broker wrote as a partition's leader, for its log line."""

    tp: TopicPartition
    old_isr: list[int]
    new_isr: list[int]
    leader_epoch: int
    partition_epoch: int
    high_watermark: int
    log_end_offset: int

    @property
    def expanding(self) -> bool:
        return len(self.new_isr) > len(self.old_isr)

    def __str__(self) -> str:
        return (
            f"{'Expanding' if self.expanding else 'Shrinking'} ISR from {self.old_isr} to "
            f"{self.new_isr} (leader epoch {self.leader_epoch}, partition epoch "
            f"{self.partition_epoch}, high watermark {self.high_watermark}, log end offset "
            f"{self.log_end_offset})"
        )

    def brief(self) -> str:
        return f"{self.tp} from {self.old_isr} to {self.new_isr}"
