"""``Broker``: one Sluice broker's state and life cycle, wiring logs, partitions,
coordinators and handlers.

The broker builds its collaborators and hands them on by name: the request handlers get
a :class:`RequestContext`, the coordinator runtimes and the cluster manager what they
use. Whether it is a single node or a member of a ZooKeeper cluster decides which topic
admin and which controller it builds (:class:`SingleNodeTopicAdmin` and
:class:`SingleNodeController`, or the :class:`ClusterManager`'s) and the order of start-up:
a single node opens its listeners as soon as its logs are loaded and serves what needs no
coordinator meanwhile; a cluster member builds its coordinators first and registers in
ZooKeeper last. Past start-up, only stopping differs (controlled shutdown first, the
cluster manager stopped before the logs close).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import resource
import ssl
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sluice.base import TopicPartition
from sluice.base.clock import SYSTEM_CLOCK, Clock
from sluice.config import CONSOLE_LISTENER, BrokerConfig, ConfigError
from sluice.controller.model import Broker as BrokerInfo
from sluice.controller.model import EndPoint
from sluice.log import Log, LogDirFailureChannel, LogManager
from sluice.log.file_cache import FileCache, default_capacity
from sluice.log.file_work import FileThread
from sluice.log.group_flush import GroupFlusher
from sluice.protocol import VersionTable
from sluice.protocol.memory_pool import MemoryPool
from sluice.purgatory import DelayedOperation, DelayedOperationPurgatory
from sluice.quota import MetricConfig, QuotaManagers
from sluice.replication.fetch_session import FetchSessionCache
from sluice.replication.metadata_cache import MetadataCache
from sluice.replication.producer_ids import ProducerIdManager
from sluice.replication.replica_manager import ReplicaManager
from sluice.security.sasl.credential_store import FileScramCredentialStore, ScramCredentialStore
from sluice.server import gc_policy
from sluice.server.apis import registry
from sluice.server.broker_metrics import BrokerMetrics, BrokerState, MetricsEndpoint
from sluice.server.client_quotas import (
    ClientQuotas,
    EntityConfigStore,
    LocalEntityConfigStore,
    ZkEntityConfigStore,
)
from sluice.server.congestion import checked_algorithm
from sluice.server.connection_quotas import ConnectionQuotas
from sluice.server.dynamic_broker_config import (
    CONNECTION_CONFIGS,
    LOG_DEFAULT_CONFIGS,
    REPLICATION_THROTTLE_CONFIGS,
    DynamicBrokerConfig,
    DynamicConfigManager,
)
from sluice.server.event_loop_timer import EventLoopTimer
from sluice.server.listener_security import listener_security
from sluice.server.network import Handler, KafkaServer
from sluice.server.replica_alter_log_dirs import ReplicaAlterLogDirsManager
from sluice.server.request_context import Controller, Coordinators, RequestContext
from sluice.server.request_gate import RequestGate
from sluice.server.sasl_authentication import ServerAuthentication
from sluice.server.single_node_controller import SingleNodeController
from sluice.server.throttled_channel import ThrottledChannels
from sluice.server.topic_admin import (
    SingleNodeTopicAdmin,
    TopicAdminBase,
    registered_log_configs,
    topic_log_config,
)
from sluice.server.topics import TopicRegistry

if TYPE_CHECKING:  # imported in start(), after the listeners are open
    from prometheus_client import CollectorRegistry

    from sluice.console import Console
    from sluice.coordinator import GroupCoordinator
    from sluice.coordinator.transaction import TransactionCoordinator
    from sluice.log.cleaner.log_cleaner import CompactionConfig, LogCleaner
    from sluice.metastore.store import CoordinationStore
    from sluice.security.authorizer import AclAuthorizer, AclStore
    from sluice.server.cluster import ClusterManager

__all__ = ["Broker", "EventLoopPurgatories"]

log = logging.getLogger(__name__)

T = TypeVar("T", bound=DelayedOperation)


QUIET_S = 0.01
"""How long the listeners must have been idle before the coordinators are built."""
QUIET_WAIT_S = 0.1
"""The longest the coordinators wait for that."""
FILE_WORK_STOP_S = 10.0
"""The longest a stopping broker waits for its queued file work (removals, page drops)."""


class _Slices:
    """Startup work done while the listeners already serve, in slices of about
    ``SLICE_S`` of work, between which the event loop runs whatever is ready. The pause
    is a short timer rather than ``sleep(0)``, so that everything ready runs first however
    many loop iterations it takes (accepting a connection, reading its request,
    answering it). The first :meth:`pause` always yields."""

    SLICE_S = 0.005
    PAUSE_S = 0.001
    __slots__ = ("_enabled", "_since")

    def __init__(self, enabled: bool = True) -> None:
        self._enabled = enabled  # False: nobody to serve meanwhile, pause() never waits
        self._since = float("-inf")

    async def pause(self) -> None:
        if self._enabled and time.monotonic() - self._since >= self.SLICE_S:
            await asyncio.sleep(self.PAUSE_S)
            self._since = time.monotonic()


class EventLoopPurgatories:
    """The broker's :class:`~sluice.purgatory.PurgatoryFactory`: purgatories on the
    broker's clock whose expirations, found on each purgatory's reaper thread, run on the
    event loop."""

    __slots__ = ("_broker_id", "_clock", "_loop", "made")

    def __init__(self, broker_id: int, clock: Clock, loop: asyncio.AbstractEventLoop) -> None:
        self._broker_id = broker_id
        self._clock = clock
        self._loop = loop
        self.made: list[DelayedOperationPurgatory[Any]] = []  # for the metrics

    def _on_loop(self, fn: Callable[[], None]) -> None:
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn)

    def __call__(self, name: str, purge_interval: int) -> DelayedOperationPurgatory[T]:
        purgatory: DelayedOperationPurgatory[T] = DelayedOperationPurgatory(
            name, broker_id=self._broker_id, purge_interval=purge_interval,
            clock=self._clock, executor=self._on_loop,
        )  # fmt: skip
        self.made.append(purgatory)
        return purgatory


class Broker:
    """A single Sluice broker: ``await start()``, serve, ``await stop()``."""

    def __init__(
        self,
        config: BrokerConfig,
        clock: Clock | None = None,
        coordination_store: Callable[[], CoordinationStore] | None = None,
    ) -> None:
        """``coordination_store`` (a factory of CoordinationStore sessions) puts the
        broker in cluster mode without ZooKeeper, e.g. on an in-process DataTree."""
        self.config = config
        self._store_factory = coordination_store
        self.broker_id = config.broker_id
        self.clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self.log_dirs = config.log_dirs
        self.log_dir = self.log_dirs[0]  # also holds meta.properties and the topic registry
        # I/O errors take a log dir offline (sluice.log.log_dir_failure_channel); the
        # failure is handled on the event loop (_handle_log_dir_failure).
        self.log_dir_failure_channel = LogDirFailureChannel()
        # What handlers know of topics, partitions and brokers: fed from the registry and
        # the replica manager on a single node, by the controller in a cluster.
        self.metadata_cache = MetadataCache(self.broker_id)
        self.servers: list[KafkaServer[RequestContext]] = []
        self.registry: TopicRegistry
        self.log_manager: LogManager
        self.purgatories: EventLoopPurgatories
        self.replica_manager: ReplicaManager
        self.alter_log_dirs: ReplicaAlterLogDirsManager
        self.topic_admin: TopicAdminBase  # chosen at start: single node or cluster
        self.log_cleaner: LogCleaner
        self.group_coordinator: GroupCoordinator
        self.txn_coordinator: TransactionCoordinator
        self.producer_id_manager: ProducerIdManager
        self.coordinators = Coordinators()  # the same two, once built (coordinators.built)
        self.versions: VersionTable = registry().versions  # what the API modules declare
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush_executor: ThreadPoolExecutor | None = None  # log.flush.group.commit
        # The logs' background file work (sluice.log.file_work): started by start(),
        # stopped once stop() or crash() has closed the logs.
        self._file_thread = FileThread(f"sluice-file-work-{self.broker_id}")
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        # What this broker registers, one endpoint per advertised listener (a port 0 is
        # replaced by the bound one once the listeners are open).
        self.advertised: list[EndPoint] = config.advertised_endpoints
        # Each listener with its security, settled before anything starts: a listener the
        # broker cannot serve (or whose TLS settings are wrong) stops it here.
        self.listener_security = [
            (endpoint, listener_security(config, endpoint))
            for endpoint in config.listener_endpoints
        ]
        # Cluster mode (zookeeper.connect set): see sluice.server.cluster.
        self.cluster: ClusterManager | None = None
        self.request_context: RequestContext  # built once the listeners can open
        # authorizer.class.name set: the ACLs (sluice.security), built at start.
        self.authorizer: AclAuthorizer | None = None
        # Users' SCRAM credentials: a file in log_dir, or ZooKeeper in a cluster.
        self.scram_credentials: ScramCredentialStore
        self._auth_timer: EventLoopTimer | None = None  # SASL listeners' delays
        # API key -> handler: the table the listeners read, changed in place (the request
        # gate opens keys in it; sluice.testing's request controls wrap entries).
        self.handlers: dict[int, Handler[RequestContext]] = {}
        self.client_quotas: ClientQuotas  # with the request context
        # Dynamic broker configs over the static ones (sluice.server.dynamic_broker_config)
        self.dynamic_config = DynamicBrokerConfig(config)
        self.dynamic_configs: DynamicConfigManager | None = None
        self._local_entity_configs: LocalEntityConfigStore  # a single node's
        self.connection_quotas: ConnectionQuotas | None = None  # the listeners' counts
        self.throttled_channels: ThrottledChannels | None = None
        # Metrics (metrics.port or console.port set; sluice.server.broker_metrics): the
        # broker's own Prometheus registry, which the endpoint and the console read.
        self.metrics: BrokerMetrics | None = None
        self.metrics_endpoint: MetricsEndpoint | None = None
        self.console: Console | None = None  # console.port set: the web console

    @property
    def cluster_id(self) -> str:
        return self.metadata_cache.cluster_id

    @cluster_id.setter
    def cluster_id(self, cluster_id: str) -> None:
        self.metadata_cache.cluster_id = cluster_id

    # -- lifecycle ------------------------------------------------------------------
    async def start(self, on_listening: Callable[[], None] | None = None) -> None:
        """Start the file thread, load the logs, open the listeners, start the
        coordinators. ``on_listening`` is called as soon as clients can connect (in
        single-node mode before the broker is ready: requests wait for it meanwhile), at
        the latest when start() returns. A start that fails stops the file thread and
        the metrics endpoint."""
        self._file_thread.start()
        try:
            await self._start(on_listening)
        except BaseException:
            self._stop_file_thread()
            await self._stop_metrics_endpoint()
            raise

    async def _start(self, on_listening: Callable[[], None] | None) -> None:
        started = time.monotonic()
        self._loop = asyncio.get_running_loop()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._load_meta_properties()
        self.registry = TopicRegistry(self.log_dir, self.log_dir_failure_channel)
        if not self._cluster_mode:  # the logs open with the stored dynamic log defaults
            self._local_entity_configs = LocalEntityConfigStore(self.log_dir)
            self.dynamic_configs = DynamicConfigManager(
                self.dynamic_config, self.broker_id, self._local_entity_configs
            )
            self.dynamic_configs.load(self.dynamic_configs.fetch())
        self.log_dir_failure_channel.on_offline = self._on_log_dir_offline
        with gc_policy.paused():  # many objects made to last: no pass over them meanwhile
            self.log_manager = LogManager(
                self.log_dirs, topic_log_config(self.config, {}), clock=self.clock,
                topic_config=registered_log_configs(self.config, self.registry),
                file_work=self._file_thread, log_dir_failure_channel=self.log_dir_failure_channel,
                file_cache=self._file_cache(),
            )  # fmt: skip
        gc_policy.freeze_long_lived()
        self.purgatories = EventLoopPurgatories(self.broker_id, self.clock, self._loop)
        self.replica_manager = ReplicaManager(
            self.broker_id, self.purgatories,
            min_isr=lambda tp: self.topic_admin.min_insync_replicas(tp), clock=self.clock,
            log_dir_failure_channel=self.log_dir_failure_channel,
        )  # fmt: skip
        self._configure_replication_quotas()
        if self.config["log.flush.group.commit"]:
            self._flush_executor = ThreadPoolExecutor(1, f"sluice-flush-{self.broker_id}")
            self.log_manager.flush_group = GroupFlusher(
                self._loop.call_soon, self._run_flush, self.replica_manager.flushed
            )
        self.replica_manager.load_high_watermarks(self.log_manager.live_log_dirs)
        self._build_metrics()
        await self._start_metrics_endpoint()  # a port in use stops the start here
        self.alter_log_dirs = ReplicaAlterLogDirsManager(
            self.log_manager, self.replica_manager, before_swap=self._stop_cleaning
        )
        self.producer_id_manager = ProducerIdManager(
            self.log_dir, self.broker_id, failure_channel=self.log_dir_failure_channel
        )
        if self._cluster_mode:
            await self._start_cluster_member()
        else:
            await self._start_single_node(on_listening)
            on_listening = None  # called once the listeners were open
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        if self.metrics is not None:  # what the state collector reads, now built
            self.metrics.broker_state.quotas = self.client_quotas.managers
            self.metrics.broker_state.cluster = self.cluster
        self._start_log_cleaner()
        self.alter_log_dirs.start()  # moves between log dirs a stop interrupted
        if self.config["console.port"] >= 0:
            await self._start_console()
        if on_listening is not None:
            on_listening()
        bound = ", ".join(
            f"{s.listener_name}://{s.host}:{s.port} ({s.security.description})"
            for s in self.servers
        )
        log.info(
            "Sluice broker %d ready on %s (cluster %s, %d topics, started in %.0f ms)",
            self.broker_id, bound, self.cluster_id, len(self.registry.topics),
            (time.monotonic() - started) * 1000,
        )  # fmt: skip

    async def _start_single_node(self, on_listening: Callable[[], None] | None) -> None:
        """Host the registry's topics, open the listeners, serve what needs no coordinator
        while the coordinators are built, then everything."""
        topic_admin = SingleNodeTopicAdmin(
            self.config, self.registry, self.log_manager, self.metadata_cache,
            self.coordinators, self.replica_manager,
        )  # fmt: skip
        with gc_policy.paused():
            topic_admin.host_registered_topics()
        gc_policy.freeze_long_lived()
        self.topic_admin = topic_admin
        if self.config["authorizer.class.name"]:
            from sluice.security.acl_store import ACL_FILE, FileAclStore

            self.authorizer = self._authorizer(FileAclStore(self.log_dir / ACL_FILE))
        self._watch_dynamic_configs()
        store = self._local_entity_configs
        self._start_client_quotas(store, store.fetch_all_entity_configs())
        self.scram_credentials = FileScramCredentialStore(self.log_dir)
        self.request_context = self._request_context(
            SingleNodeController(self.broker_id, self.replica_manager)
        )
        # As Kafka binds its SocketServer once the logs are loaded: connections are
        # accepted from here, requests wait in the gate until their handlers exist.
        gate: RequestGate[RequestContext] = RequestGate(self.versions)
        await self._open_listeners(gate.handlers, None, alive=True)
        if on_listening is not None:
            on_listening()
        try:
            await self._serve_before_coordinators(gate)
            # In slices: requests are answered in between.
            handlers = await self._start_coordinators_and_handlers(gate.closed_keys, _Slices())
            gate.open(handlers)  # the held coordinator requests, in arrival order
            await asyncio.sleep(0)  # the held requests' answers go out first
        except BaseException:
            gate.close()
            for server in self.servers:
                server.abort()
            raise

    async def _start_cluster_member(self) -> None:
        """Connect to ZooKeeper, build the coordinators and handlers, open the listeners,
        then register and start the controller: partitions are hosted when the controller
        says so."""
        from sluice.server.cluster import ClusterManager

        assert self._loop is not None
        self.cluster = cluster = ClusterManager(
            self.config, log_dir=self.log_dir, advertised=lambda: tuple(self.advertised),
            metadata_cache=self.metadata_cache, replica_manager=self.replica_manager,
            log_manager=self.log_manager, registry=self.registry,
            producer_ids=self.producer_id_manager, coordinators=self.coordinators,
            clock=self.clock, store_factory=self._store_factory,
        )  # fmt: skip
        await self._loop.run_in_executor(None, cluster.connect)
        self.topic_admin = cluster.topic_admin
        if self.config["authorizer.class.name"] and cluster.store is not None:
            await self._loop.run_in_executor(None, self._zk_authorizer, cluster.store)
        zk_store = ZkEntityConfigStore(cluster.admin)
        self.dynamic_configs = DynamicConfigManager(self.dynamic_config, self.broker_id, zk_store)
        self._watch_dynamic_configs()
        layers = await self._loop.run_in_executor(None, self.dynamic_configs.fetch)
        self.dynamic_configs.load(layers)
        cluster.entity_config_listeners.append(self.dynamic_configs.reload)
        stored = await self._loop.run_in_executor(None, zk_store.fetch_all_entity_configs)
        quotas = self._start_client_quotas(zk_store, stored)
        cluster.entity_config_listeners.append(quotas.reload)
        self.scram_credentials = cluster.scram_credentials
        self.request_context = self._request_context(cluster)
        handlers = await self._start_coordinators_and_handlers(
            self.versions, _Slices(enabled=False)
        )
        await self._open_listeners(handlers, registry().raw_handlers(cluster), alive=False)
        await cluster.start()

    @property
    def _cluster_mode(self) -> bool:
        return bool(self.config["zookeeper.connect"]) or self._store_factory is not None

    def _watch_dynamic_configs(self) -> None:
        """Have the parts that hold a dynamic config's value take its changes (the topic
        admin is chosen: the logs' configs are the topics')."""
        self.dynamic_config.add_reconfigurable(self._reconfigure)

    def _reconfigure(self, changed: frozenset[str]) -> None:
        """Dynamic broker configs changed: the logs of topics without their own override
        take the new defaults, the listeners the new connection limits. The others
        (log.cleaner.backoff.ms, producer.id.expiration.ms) are read when used."""
        if changed & LOG_DEFAULT_CONFIGS:
            self.log_manager.default_config = topic_log_config(self.config, {})
            for topic in list(self.registry.topics):
                self.log_manager.update_config(topic, self.topic_admin.log_config_for(topic))
        if changed & CONNECTION_CONFIGS and self.connection_quotas is not None:
            self.connection_quotas.reconfigure(ConnectionQuotas.from_config(self.config))
        if changed & REPLICATION_THROTTLE_CONFIGS:
            self._configure_replication_quotas()

    def _configure_replication_quotas(self) -> None:
        """The replication throttles' bounds from the broker config (dynamic layers
        included) and their throttled replicas from the topics' configs, read when
        checked."""
        config, rm, registry = self.config, self.replica_manager, self.registry

        def entries(key: str) -> Callable[[str], str]:
            def of(topic: str) -> str:
                info = registry.get(topic)
                return info.configs.get(key, "") if info is not None else ""

            return of

        samples = config["replication.quota.window.num"]
        window_s = config["replication.quota.window.size.seconds"]
        for quota, rate_key, replicas_key in (
            (rm.leader_quota, "leader.replication.throttled.rate",
             "leader.replication.throttled.replicas"),
            (rm.follower_quota, "follower.replication.throttled.rate",
             "follower.replication.throttled.replicas"),
            (rm.alter_log_dirs_quota, "replica.alter.log.dirs.io.max.bytes.per.second", None),
        ):  # fmt: skip
            if (samples, window_s) != quota.window:
                quota.configure(samples, window_s)
            if replicas_key is not None:
                quota.topic_entries = entries(replicas_key)
            quota.update_bound(config[rate_key])

    def _file_cache(self) -> FileCache:
        """The cache of the logs' segment descriptors (``log.open.files.max``), made once
        the open-file limit is raised as far as it goes."""
        soft = raise_open_file_limit()
        configured = self.config["log.open.files.max"]
        capacity = configured if configured > 0 else default_capacity(soft)
        log.info("open-file limit %d: up to %d segment files open", soft, capacity)
        return FileCache(capacity)

    def _authorizer(self, store: AclStore) -> AclAuthorizer:
        """The ACL authorizer over ``store``, its ACLs loaded (blocking)."""
        from sluice.security.authorizer import AclAuthorizer, parse_super_users

        authorizer = AclAuthorizer(
            store, super_users=parse_super_users(self.config["super.users"]),
            allow_everyone_if_no_acl_found=self.config["allow.everyone.if.no.acl.found"],
        )  # fmt: skip
        authorizer.load()
        log.info("authorizer %s: %d ACLs", self.config["authorizer.class.name"],
                 authorizer.acl_count)  # fmt: skip
        return authorizer

    def _zk_authorizer(self, store: CoordinationStore) -> None:
        """Cluster mode: the ACLs in ZooKeeper, followed through the change notifications
        (their processing runs on the default executor, off the event loop)."""
        from sluice.security.acl_store import ZkAclStore

        loop = self._loop
        assert loop is not None
        acl_store = ZkAclStore(store, self.clock.milliseconds)

        def run(work: Callable[[], None]) -> None:  # on the coordination client's thread
            with contextlib.suppress(RuntimeError):  # the loop is closed: stopping
                loop.call_soon_threadsafe(loop.run_in_executor, None, work)

        authorizer = self._authorizer(acl_store)
        acl_store.watch(authorizer.apply_change, authorizer.reload, run)
        authorizer.reload()  # what changed before the watches were armed
        self.authorizer = authorizer

    def _start_client_quotas(
        self, store: EntityConfigStore, stored: dict[str, dict[str, str]]
    ) -> ClientQuotas:
        """The client quota managers with the stored quotas, and the timer that ends
        throttles."""
        config = self.config
        managers = QuotaManagers(
            MetricConfig(config["quota.window.num"], config["quota.window.size.seconds"] * 1000),
            MetricConfig(
                config["controller.quota.window.num"],
                config["controller.quota.window.size.seconds"] * 1000,
            ),
            self.clock.hi_res_clock_ms,
        )
        self.client_quotas = ClientQuotas(managers, store)
        self.client_quotas.load(stored)
        self.throttled_channels = ThrottledChannels(self.client_quotas, self.clock, self.broker_id)
        assert self._loop is not None
        self.throttled_channels.start(self._loop)
        return self.client_quotas

    def _request_context(self, controller: Controller) -> RequestContext:
        """What the request handlers may use; the network layer adds each client's
        identity."""
        return RequestContext(
            broker_id=self.broker_id, config=self.config, versions=self.versions,
            clock=self.clock, metadata_cache=self.metadata_cache,
            replica_manager=self.replica_manager, fetch_sessions=self.fetch_sessions,
            producer_ids=self.producer_id_manager, topic_admin=self.topic_admin,
            controller=controller, coordinators=self.coordinators, authorizer=self.authorizer,
            log_manager=self.log_manager, alter_log_dirs=self.alter_log_dirs,
            quotas=self.client_quotas, dynamic_configs=self.dynamic_configs,
            scram_credentials=self.scram_credentials,
            topic_stats=self.metrics.topic_stats if self.metrics is not None else None,
        )  # fmt: skip

    async def _serve_before_coordinators(self, gate: RequestGate[RequestContext]) -> None:
        """Single node, listeners open: the APIs that need no coordinator are served at once
        (the requests held meanwhile in arrival order); then, once the first clients'
        handshakes are answered, the coordinators are built."""
        apis = registry()
        gate.open(apis.handlers(apis.served_before_coordinators))
        await self._quiet_listeners(gate)

    async def _start_coordinators_and_handlers(
        self, keys: Iterable[int], slices: _Slices
    ) -> dict[int, Handler[RequestContext]]:
        """The request handlers of ``keys`` and the group and transaction coordinators,
        in ``slices`` (on a single node the listeners already serve the other APIs)."""
        await slices.pause()
        from sluice.server.group_runtime import (  # the one block of 20-50 ms
            build_group_coordinator,
            create_offsets_topic,
            run_group_coordinator,
        )

        # __consumer_offsets' partition logs are made on a worker thread meanwhile where
        # the topic admin makes them ahead (a single node); build_group_coordinator then
        # finds the topic or creates it.
        offsets_logs = asyncio.ensure_future(create_offsets_topic(self.config, self.topic_admin))
        try:
            await slices.pause()
            handlers: dict[int, Handler[RequestContext]] = registry().handlers(keys)
            await slices.pause()
            import sluice.log.cleaner.log_cleaner  # noqa: F401  # for _start_log_cleaner(), in a slice
            from sluice.server.txn_runtime import (
                build_transaction_coordinator,
                run_transaction_coordinator,
            )

            await offsets_logs
        except BaseException:
            offsets_logs.cancel()
            raise
        # Group coordinator: loads __consumer_offsets in the background.
        self.group_coordinator = build_group_coordinator(
            self.config, self.topic_admin, self.replica_manager, self.purgatories, self.clock
        )
        self._tasks.append(asyncio.create_task(run_group_coordinator(self.group_coordinator)))
        # Transaction coordinator: __transaction_state, loaded in the background likewise.
        self.txn_coordinator = build_transaction_coordinator(
            self.config, self.topic_admin, self.replica_manager, self.metadata_cache,
            self.producer_id_manager, self.group_coordinator, self.purgatories, self.clock,
        )  # fmt: skip
        self._tasks.append(asyncio.create_task(run_transaction_coordinator(self.txn_coordinator)))
        self.coordinators.set(self.group_coordinator, self.txn_coordinator)
        return handlers

    async def _quiet_listeners(self, gate: RequestGate[RequestContext]) -> None:
        """Wait until the listeners, just opened, have accepted no connection and read no
        request for ``QUIET_S`` (at most ``QUIET_WAIT_S``), or a coordinator request is
        held: the first clients' handshakes (ApiVersions, Metadata, ...) are then answered
        before the coordinator modules' import, one block of 20-50 ms (no bytecode cache),
        takes the loop; a client that already waits for a coordinator does not wait
        longer."""
        opened = time.monotonic()
        deadline = opened + QUIET_WAIT_S
        while not gate.held_count:
            now = time.monotonic()
            last = max(opened, *(server.last_active_at for server in self.servers))
            if now - last >= QUIET_S or now >= deadline:
                return
            await asyncio.sleep(_Slices.PAUSE_S)

    async def _open_listeners(
        self,
        handlers: dict[int, Handler[RequestContext]],
        raw_handlers: dict[int, Any] | None,
        *,
        alive: bool,
    ) -> None:
        """Bind the listeners and register this broker's endpoint in the metadata cache:
        ``alive``, a single node is the one live broker; in a cluster the controller names
        the live brokers."""
        self.handlers = handlers
        congestion = self.config["socket.loopback.congestion.control"]
        checked_algorithm(congestion)  # a refused name is reported now, not at a connection
        # One memory pool and one set of connection counts for all the listeners, as
        # Kafka's SocketServer has.
        pool = MemoryPool(self.config["queued.max.request.bytes"])
        quotas = ConnectionQuotas.from_config(self.config)
        self.connection_quotas = quotas
        for endpoint, security in self.listener_security:
            authentication = None
            if security.sasl is not None:
                authentication = ServerAuthentication(
                    security.sasl.server_config(self.scram_credentials.cache, self.clock),
                    self.clock, self.config["connection.failed.authentication.delay.ms"],
                    self._authentication_timer().schedule,
                    self.config["sasl.server.max.receive.size"],
                )  # fmt: skip
            server = KafkaServer(
                endpoint.host, endpoint.port, handlers, self.versions,
                self.config["socket.request.max.bytes"], self.config["connections.max.idle.ms"],
                self.request_context, raw_handlers=raw_handlers, loopback_congestion=congestion,
                quotas=quotas, pool=pool,
                read_timeout_ms=self.config["socket.request.read.timeout.ms"],
                throttling=self.throttled_channels,
                security=security, authentication=authentication,
                socket_buffers=(
                    self.config["socket.send.buffer.bytes"],
                    self.config["socket.receive.buffer.bytes"],
                ),
                request_metrics=self.metrics.requests if self.metrics is not None else None,
            )  # fmt: skip
            await server.start()
            self.servers.append(server)
        _warn_if_exposed(self.servers)
        bound = {s.listener_name: s.port for s in self.servers}
        self.advertised = [  # port 0: advertise the real one
            dataclasses.replace(ep, port=bound[ep.listener_name]) if ep.port == 0 else ep
            for ep in self.advertised
        ]
        self.metadata_cache.register_local_broker(
            BrokerInfo(self.broker_id, tuple(self.advertised)), alive=alive
        )

    async def _start_console(self) -> None:
        """The web console (sluice.console), a Kafka client of this broker's listener
        ``console.listener.name``, on ``console.host:console.port``."""
        from sluice import __version__
        from sluice.console import Console, ListenerInfo, console_listener

        advertised = {ep.listener_name: ep for ep in self.advertised}
        listeners = []
        for server in self.servers:
            security = server.security
            endpoint = advertised.get(server.listener_name)
            context = security.ssl_context
            listeners.append(ListenerInfo(
                server.listener_name, security.security_protocol,
                endpoint.host if endpoint is not None else server.host,
                endpoint.port if endpoint is not None else server.port,
                context is not None and context.verify_mode == ssl.CERT_REQUIRED,
                tuple(security.sasl.enabled_mechanisms) if security.sasl is not None else (),
            ))  # fmt: skip
        console = Console(
            console_listener(self.config, listeners), broker_id=self.broker_id,
            version=__version__, metrics_registry=lambda: getattr(self, "metrics_registry", None),
        )  # fmt: skip
        context = None
        if self.config["console.ssl.enabled"]:
            from sluice.security.ssl_engine_factory import SslConfigError, SslEngineFactory

            try:
                context = SslEngineFactory(
                    lambda key: self.config.for_listener(CONSOLE_LISTENER, key)
                ).server_context()
            except SslConfigError as exc:
                raise ConfigError(f"console.ssl.enabled: {exc}") from exc
        await console.start(self.config["console.host"], self.config["console.port"], context)
        self.console = console

    async def _stop_console(self) -> None:
        if self.console is not None:
            await self.console.stop()
            self.console = None

    def _authentication_timer(self) -> EventLoopTimer:
        """The timer of the SASL listeners' failed-authentication delays (made once)."""
        if self._auth_timer is None:
            assert self._loop is not None
            self._auth_timer = EventLoopTimer(
                f"sluice-sasl-delay-{self.broker_id}", self._loop, self.clock
            )
        return self._auth_timer

    async def stop(self) -> None:
        """Stop accepting, answer requests in flight, flush and close the logs cleanly.
        In a cluster, controlled shutdown comes first: the controller moves this broker's
        leaders away while it still serves."""
        await self._stop_console()
        if self.cluster is not None:
            await self.cluster.controlled_shutdown()
        for server in self.servers:
            await server.stop_accepting()
        self.group_coordinator.shutdown()  # answer waiting JoinGroup/SyncGroup: NOT_COORDINATOR
        self.txn_coordinator.shutdown()
        answered = self.replica_manager.stop_fetch_waits()  # not held to their max wait
        if answered:
            log.info("stopping: %d waiting fetches answered now", answered)
        for server in self.servers:
            await server.drain_and_close(timeout_s=10)
        for task in self._tasks:
            task.cancel()
        if self.cluster is not None:
            await self.cluster.stop()
        await self.alter_log_dirs.stop()  # the future logs stay; their moves resume
        self.log_cleaner.shutdown()  # drops a half-written cleaned segment
        self.topic_admin.shutdown()
        self.replica_manager.shutdown()
        self.replica_manager.checkpoint_high_watermarks()
        self.log_manager.shutdown()  # flushes and writes the clean-shutdown marker
        self._stop_throttled_channels()
        self._stop_file_thread()
        self._close_flush_thread()
        if self._auth_timer is not None:
            self._auth_timer.shutdown()
        await self._stop_metrics_endpoint()
        log.info("Sluice broker %d stopped cleanly", self.broker_id)
        self._stopped.set()

    async def crash(self) -> None:
        """Stop as kill -9 would: connections dropped, nothing answered or flushed, no
        controlled shutdown, no clean-shutdown marker, the coordination session left to
        expire. For in-process fault tests (EmbeddedCluster.kill_broker)."""
        await self._stop_console()
        for server in self.servers:
            server.abort()
        for task in self._tasks:
            task.cancel()
        if self.cluster is not None:
            await self.cluster.crash()
        await self.alter_log_dirs.stop()
        self.log_cleaner.shutdown()
        self.topic_admin.shutdown()
        self.replica_manager.shutdown()
        self.log_manager.abandon()
        self._stop_throttled_channels()
        self._stop_file_thread()
        self._close_flush_thread()
        if self._auth_timer is not None:
            self._auth_timer.shutdown()
        await self._stop_metrics_endpoint()
        log.info("Sluice broker %d crashed on purpose", self.broker_id)
        self._stopped.set()

    # -- metrics ----------------------------------------------------------------------------
    @property
    def metrics_registry(self) -> CollectorRegistry | None:
        """The broker's Prometheus registry (None: metrics off): what the metrics
        endpoint renders and the web console charts."""
        return self.metrics.registry if self.metrics is not None else None

    def _build_metrics(self) -> None:
        """The metrics, when metrics.port or console.port asks for them: the hot-path
        counts hooked into the replica manager; the state read at scrape time."""
        if self.config["metrics.port"] < 0 and self.config["console.port"] < 0:
            return
        self.metrics = BrokerMetrics(BrokerState(
            self.broker_id, self.metadata_cache, replica_manager=self.replica_manager,
            log_manager=self.log_manager, purgatories=self.purgatories.made,
            group_coordinator=lambda: self.coordinators.group if self.coordinators.built
            else None,
            listeners=self.servers,
        ))  # fmt: skip
        self.replica_manager.on_client_append = self.metrics.topic_stats.record_append

    async def _start_metrics_endpoint(self) -> None:
        """The endpoint on metrics.host:metrics.port (what it reports fills in as the
        broker's collaborators are built)."""
        metrics = self.metrics
        port = self.config["metrics.port"]
        if metrics is None or port < 0:
            return
        host = self.config["metrics.host"] or self.config.listener_endpoints[0].host
        endpoint = MetricsEndpoint(metrics, f"metrics-{self.broker_id}")
        await endpoint.start(host, port)
        self.metrics_endpoint = endpoint
        log.info("metrics endpoint %s", endpoint.url)

    async def _stop_metrics_endpoint(self) -> None:
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
            self.metrics_endpoint = None

    def _on_log_dir_offline(self, log_dir: Path) -> None:
        """The failure channel took ``log_dir`` offline (on any thread): handle it on the
        event loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._handle_log_dir_failure, log_dir)

    def _handle_log_dir_failure(self, log_dir: Path) -> None:
        """Kafka's ``ReplicaManager.handleLogDirFailure``: the log manager takes every log
        in ``log_dir`` offline, the replica manager answers their partitions'
        waiting requests (KAFKA_STORAGE_ERROR) and, in a cluster, has the controller told
        (the cluster manager), which moves their leadership. The other dirs serve on;
        with none left the broker still answers (unlike Kafka, which halts)."""
        self.log_manager.handle_log_dir_failure(log_dir)
        self.replica_manager.handle_log_dir_failure(log_dir)

    def _stop_throttled_channels(self) -> None:
        if self.throttled_channels is not None:
            self.throttled_channels.stop()

    def _stop_file_thread(self) -> None:
        """Run the file work still queued and end the file thread (the logs are closed:
        nothing queues more)."""
        if not self._file_thread.stop(FILE_WORK_STOP_S):
            log.warning("file work still pending; the next start removes its leftover files")

    def _run_flush(self, job: Callable[[], None], done: Callable[[], None]) -> None:
        """A group flush round's fsyncs on the flush thread, then ``done`` on the loop."""
        assert self._loop is not None
        self._loop.run_in_executor(self._flush_executor, job).add_done_callback(lambda _: done())

    def _close_flush_thread(self) -> None:
        """Stop the flush thread once the logs are closed (a round still running syncs
        duplicated descriptors; its answer finds the logs closed)."""
        if self._flush_executor is not None:
            self._flush_executor.shutdown(wait=False)
            self._flush_executor = None

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    @property
    def port(self) -> int:
        return self.servers[0].port

    def _load_meta_properties(self) -> str:
        path = self.log_dir / "meta.properties"
        props: dict[str, str] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                key, sep, value = line.partition("=")
                if sep and not key.startswith("#"):
                    props[key.strip()] = value.strip()
            stored = props.get("broker.id")
            if stored is not None and int(stored) != self.broker_id:
                raise ConfigError(
                    f"broker.id {self.broker_id} does not match {stored} stored in {path}"
                )
        cluster_id = self.config["cluster.id"] or props.get("cluster.id")
        if not cluster_id:
            cluster_id = uuid.uuid4().hex[:22]
        if props.get("cluster.id") != cluster_id or "broker.id" not in props:
            path.write_text(
                f"version=0\nbroker.id={self.broker_id}\ncluster.id={cluster_id}\n",
                encoding="utf-8",
            )
        return str(cluster_id)

    async def _housekeeping(self) -> None:
        """Retention, time-based flushes and recovery-point checkpoints, as Kafka's log
        manager schedules them."""
        interval_s = self.config["log.retention.check.interval.ms"] / 1000
        flush_s = min(interval_s, 1.0)
        next_retention = time.monotonic() + interval_s
        # Kafka's producer.id.expiration.check.interval.ms (10 min), never longer than the expiry.
        expiry_s = min(600_000, self.config["producer.id.expiration.ms"]) / 1000
        next_expiry = time.monotonic() + expiry_s
        hw_s = self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000
        next_hw = time.monotonic() + hw_s
        rp_s = self.config["log.flush.offset.checkpoint.interval.ms"] / 1000
        next_rp = time.monotonic() + rp_s
        while True:
            await asyncio.sleep(min(flush_s, hw_s, rp_s))
            try:
                self.log_manager.flush_dirty_logs()
                if time.monotonic() >= next_rp:  # written on the file thread
                    next_rp = time.monotonic() + rp_s
                    self.log_manager.checkpoint_recovery_points()
                if time.monotonic() >= next_hw:
                    next_hw = time.monotonic() + hw_s
                    hws = self.replica_manager.high_watermarks_to_checkpoint()
                    if hws is not None:
                        await asyncio.to_thread(self.replica_manager.write_high_watermarks, hws)
                if time.monotonic() >= next_retention:
                    next_retention = time.monotonic() + interval_s
                    self.run_retention()
                if time.monotonic() >= next_expiry:
                    expiry_s = min(600_000, self.config["producer.id.expiration.ms"]) / 1000
                    next_expiry = time.monotonic() + expiry_s
                    self.remove_expired_producers()
            except Exception:
                log.exception("log housekeeping failed")

    # -- log compaction -----------------------------------------------------------------
    def _start_log_cleaner(self) -> None:
        from sluice.log.cleaner.log_cleaner import LogCleaner

        self.log_cleaner = LogCleaner(
            lambda: [log_ for log_ in self.log_manager if not log_.is_offline],
            config_for=self._compaction_config,
            high_watermark=self._cleaner_bound, clock=self.clock,
        )  # fmt: skip
        if self.config["log.cleaner.enable"]:
            self._tasks.append(asyncio.create_task(self._run_log_cleaner()))

    async def _run_log_cleaner(self) -> None:
        """Compaction on the event loop thread (the log classes are not thread-safe): one
        bounded slice per loop iteration while there is work, log.cleaner.backoff.ms of
        sleep when there is none. Progress: ``log_cleaner.passes_completed``."""
        while True:
            try:
                busy = self.log_cleaner.step()
            except Exception:
                log.exception("log cleaner failed")
                busy = False
            await asyncio.sleep(0 if busy else self.config["log.cleaner.backoff.ms"] / 1000)

    def _stop_cleaning(self, log_: Log) -> None:
        """Abort a compaction pass on ``log_``, which is about to be closed and deleted (a
        move between log dirs swaps its future log in)."""
        cleaning = self.log_cleaner.in_progress
        if cleaning is not None and cleaning.log is log_:
            self.log_cleaner.abort()

    def _compaction_config(self, log_: Log) -> CompactionConfig:
        from sluice.log.cleaner.log_cleaner import CompactionConfig

        return CompactionConfig.from_topic_configs(self.topic_admin.topic_configs(log_.topic))

    def _cleaner_bound(self, log_: Log) -> int:
        """Cleaning stops at the partition's last stable offset (the HW until transactions)."""
        partition = self.replica_manager.partitions.get(TopicPartition(log_.topic, log_.partition))
        return 0 if partition is None else partition.last_stable_offset

    def run_retention(self) -> int:
        hws = {tp: p.high_watermark for tp, p in self.replica_manager.partitions.items()}
        started = time.perf_counter()
        deleted = self.log_manager.cleanup_logs(hws)
        if deleted:  # with the time the pass held the event loop
            log.info("retention deleted %d segments in %.1f ms", deleted,
                     (time.perf_counter() - started) * 1000)  # fmt: skip
        return deleted

    def remove_expired_producers(self) -> int:
        """Forget producer ids idle for producer.id.expiration.ms in every partition."""
        expiration_ms = self.config["producer.id.expiration.ms"]
        return sum(log_.remove_expired_producers(expiration_ms) for log_ in self.log_manager)


def _warn_if_exposed(servers: Iterable[KafkaServer[RequestContext]]) -> None:
    """One warning for the listeners that take unauthenticated clients on an address
    other than loopback."""
    exposed = [
        f"{s.listener_name}://{s.host}:{s.port}"
        for s in servers
        if not s.security.authenticates and not _is_loopback(s.host)
    ]
    if exposed:
        log.warning(
            "listeners %s accept unauthenticated clients on a non-loopback address: anyone "
            "who can reach them can read, write and delete every topic",
            ", ".join(exposed),
        )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: resolved when bound, not known to be loopback
        return False


def raise_open_file_limit() -> int:
    """Raise this process's soft open-file limit (``RLIMIT_NOFILE``) to its hard limit, as
    Kafka's start scripts leave to the operator, and return the soft limit then."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:  # an unlimited hard limit beyond the kernel's nr_open is refused
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
