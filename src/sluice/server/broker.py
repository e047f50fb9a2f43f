"""``Broker``: one Sluice broker's state and lifecycle, wiring logs, partitions and handlers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.base.clock import SYSTEM_CLOCK, Clock
from sluice.config import (
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    parse_listener,
    topic_config_defaults,
)
from sluice.controller.model import Broker as BrokerInfo
from sluice.controller.model import EndPoint
from sluice.controller.requests import UpdateMetadataPartitionState
from sluice.log import Log, LogConfig, LogManager
from sluice.log.file_work import FileThread
from sluice.log.group_flush import GroupFlusher
from sluice.protocol import VersionTable
from sluice.purgatory import DelayedOperationPurgatory
from sluice.replication.fetch_session import FetchSessionCache
from sluice.replication.metadata_cache import MetadataCache
from sluice.replication.producer_ids import ProducerIdManager
from sluice.replication.replica_manager import ReplicaManager
from sluice.server.apis import registry
from sluice.server.congestion import checked_algorithm
from sluice.server.network import Handler, KafkaServer
from sluice.server.request_context import Controller, Coordinators, RequestContext
from sluice.server.request_gate import RequestGate
from sluice.server.single_node_controller import SingleNodeController
from sluice.server.topics import (
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    InvalidRequest,
    InvalidTopicError,
    TopicInfo,
    TopicRegistry,
    validate_topic_name,
)

if TYPE_CHECKING:  # imported in start(), after the listeners are open
    from sluice.coordinator import GroupCoordinator
    from sluice.coordinator.transaction import TransactionCoordinator
    from sluice.log.cleaner.log_cleaner import CompactionConfig, LogCleaner
    from sluice.server.cluster import ClusterManager

__all__ = ["Broker"]

log = logging.getLogger(__name__)

_LOG_CONFIG_KEYS = frozenset(LogConfig.kafka_names())


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


class Broker:
    """A single Sluice broker: ``await start()``, serve, ``await stop()``."""

    def __init__(
        self,
        config: BrokerConfig,
        clock: Clock | None = None,
        coordination_store: Callable[[], Any] | None = None,
    ) -> None:
        """``coordination_store`` (a factory of CoordinationStore sessions) puts the
        broker in cluster mode without ZooKeeper, e.g. on an in-process DataTree."""
        self.config = config
        self._store_factory = coordination_store
        self.broker_id = config.broker_id
        self.clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self.log_dir = config.log_dir
        # What handlers know of topics, partitions and brokers: fed from the registry and
        # the replica manager on a single node, by the controller in a cluster.
        self.metadata_cache = MetadataCache(self.broker_id)
        self.servers: list[KafkaServer[RequestContext]] = []
        self.registry: TopicRegistry
        self.log_manager: LogManager
        self.replica_manager: ReplicaManager
        self.log_cleaner: LogCleaner
        self.group_coordinator: GroupCoordinator
        self.txn_coordinator: TransactionCoordinator
        self.producer_id_manager: ProducerIdManager
        self.coordinators_ready = False  # group_coordinator and txn_coordinator are built
        self.coordinators = Coordinators()  # the same two, for the request handlers
        self.versions: VersionTable = registry().versions  # what the API modules declare
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush_executor: ThreadPoolExecutor | None = None  # log.flush.group.commit
        # The logs' background file work (sluice.log.file_work): started by start(),
        # stopped once stop() or crash() has closed the logs.
        self._file_thread = FileThread(f"sluice-file-work-{self.broker_id}")
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        self.advertised = [parse_listener(x)[1:] for x in config.advertised_listeners]
        # Cluster mode (zookeeper.connect set): see sluice.server.cluster.
        self.cluster: ClusterManager | None = None
        self.request_context: RequestContext  # built once the listeners can open
        # API key -> handler: the table the listeners read, changed in place (the request
        # gate opens keys in it; sluice.testing's request controls wrap entries).
        self.handlers: dict[int, Handler[RequestContext]] = {}

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
        the latest when start() returns. A start that fails stops the file thread."""
        self._file_thread.start()
        try:
            await self._start(on_listening)
        except BaseException:
            self._stop_file_thread()
            raise

    async def _start(self, on_listening: Callable[[], None] | None) -> None:
        started = time.monotonic()
        self._loop = asyncio.get_running_loop()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._load_meta_properties()
        self.registry = TopicRegistry(self.log_dir)
        self.log_manager = LogManager(
            self.log_dir, self._default_log_config(), clock=self.clock,
            topic_config=self.log_config_for, file_work=self._file_thread,
        )  # fmt: skip
        self.replica_manager = ReplicaManager(
            self.broker_id, self._make_purgatory, min_isr=self._min_isr, clock=self.clock
        )
        if self.config["log.flush.group.commit"]:
            self._flush_executor = ThreadPoolExecutor(1, f"sluice-flush-{self.broker_id}")
            self.log_manager.flush_group = GroupFlusher(
                self._loop.call_soon, self._run_flush, self.replica_manager.flushed
            )
        self.replica_manager.load_high_watermarks(self.log_dir / HW_CHECKPOINT_FILE)
        self.producer_id_manager = ProducerIdManager(self.log_dir, self.broker_id)
        gate: RequestGate[RequestContext] | None = None
        controller: Controller
        if self.config["zookeeper.connect"] or self._store_factory is not None:
            from sluice.server.cluster import ClusterManager

            self.cluster = controller = ClusterManager(self, self._store_factory)
            await self._loop.run_in_executor(None, self.cluster.connect)
            self.request_context = self._request_context(controller)
        else:  # in a cluster, partitions are hosted when the controller says so
            for info in self.registry.topics.values():
                self._host_partitions(info, list(info.assignment))
            self.request_context = self._request_context(
                SingleNodeController(self.broker_id, self.replica_manager)
            )
            # As Kafka binds its SocketServer once the logs are loaded: connections are
            # accepted from here, requests wait in the gate until their handlers exist.
            gate = RequestGate(self.versions)
            await self._open_listeners(gate.handlers, None)
            if on_listening is not None:
                on_listening()
                on_listening = None
        try:
            if gate is not None:
                await self._serve_before_coordinators(gate)
            await self._start_coordinators_and_handlers(gate)
        except BaseException:
            if gate is not None:
                gate.close()
                for server in self.servers:
                    server.abort()
            raise
        if self.cluster is not None:
            await self.cluster.start()
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        self._start_log_cleaner()
        if on_listening is not None:
            on_listening()
        bound = ", ".join(f"{s.host}:{s.port}" for s in self.servers)
        log.info(
            "Sluice broker %d ready on %s (cluster %s, %d topics, started in %.0f ms)",
            self.broker_id, bound, self.cluster_id, len(self.registry.topics),
            (time.monotonic() - started) * 1000,
        )  # fmt: skip

    def _request_context(self, controller: Controller) -> RequestContext:
        """What the request handlers may use; the network layer adds each client's
        identity."""
        return RequestContext(
            broker_id=self.broker_id, config=self.config, versions=self.versions,
            clock=self.clock, metadata_cache=self.metadata_cache,
            replica_manager=self.replica_manager, fetch_sessions=self.fetch_sessions,
            producer_ids=self.producer_id_manager, topic_admin=self, controller=controller,
            coordinators=self.coordinators,
        )  # fmt: skip

    async def _serve_before_coordinators(self, gate: RequestGate[RequestContext]) -> None:
        """Single node, listeners open: the APIs that need no coordinator are served at once
        (the requests held meanwhile in arrival order); then, once the first clients'
        handshakes are answered, the coordinators are built."""
        apis = registry()
        gate.open(apis.handlers(apis.served_before_coordinators))
        await self._quiet_listeners(gate)

    async def _start_coordinators_and_handlers(
        self, gate: RequestGate[RequestContext] | None
    ) -> None:
        """The group and transaction coordinators and the remaining request handlers; then
        the listeners serve them. ``gate`` given (single node): the listeners already serve
        the other APIs, so this is done in slices (requests are answered in between) and
        the held coordinator requests are served last, in arrival order."""
        slices = _Slices(enabled=gate is not None)
        await slices.pause()
        from sluice.server.group_runtime import (  # the one block of 20-50 ms
            build_group_coordinator,
            create_offsets_topic,
            run_group_coordinator,
        )

        # Single node: __consumer_offsets' logs are created on a worker thread meanwhile
        # (else build_group_coordinator finds the topic, or creates it itself).
        offsets_logs = None
        if gate is not None:
            offsets_logs = asyncio.ensure_future(create_offsets_topic(self))
        try:
            handlers: dict[int, Handler[RequestContext]] = registry().handlers(
                self.versions if gate is None else gate.closed_keys
            )
            await slices.pause()
            import sluice.log.cleaner.log_cleaner  # noqa: F401  # for _start_log_cleaner(), in a slice
            from sluice.server.txn_runtime import (
                build_transaction_coordinator,
                run_transaction_coordinator,
            )

            if offsets_logs is not None:
                await offsets_logs
        except BaseException:
            if offsets_logs is not None:
                offsets_logs.cancel()
            raise
        # Group coordinator: creates __consumer_offsets if needed, loads it in the background.
        self.group_coordinator = build_group_coordinator(self)
        self._tasks.append(asyncio.create_task(run_group_coordinator(self.group_coordinator)))
        # Transaction coordinator: __transaction_state, loaded in the background likewise.
        self.txn_coordinator = build_transaction_coordinator(self)
        self._tasks.append(asyncio.create_task(run_transaction_coordinator(self.txn_coordinator)))
        self.coordinators.set(self.group_coordinator, self.txn_coordinator)
        self.coordinators_ready = True
        if gate is not None:
            gate.open(handlers)
            await asyncio.sleep(0)  # the held requests' answers go out first
        else:
            raw_handlers = None if self.cluster is None else registry().raw_handlers(self.cluster)
            await self._open_listeners(handlers, raw_handlers)

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
        self, handlers: dict[int, Handler[RequestContext]], raw_handlers: dict[int, Any] | None
    ) -> None:
        self.handlers = handlers
        congestion = self.config["socket.loopback.congestion.control"]
        checked_algorithm(congestion)  # a refused name is reported now, not at a connection
        for listener in self.config.listeners:
            _, host, port = parse_listener(listener)
            server = KafkaServer(
                host, port, handlers, self.versions,
                self.config["socket.request.max.bytes"], self.config["connections.max.idle.ms"],
                self.request_context, raw_handlers=raw_handlers, loopback_congestion=congestion,
            )  # fmt: skip
            await server.start()
            self.servers.append(server)
        if self.advertised and self.advertised[0][1] == 0:  # port 0: advertise the real one
            self.advertised[0] = (self.advertised[0][0], self.servers[0].port)
        host, port = self.advertised[0]
        # A single node is the one live broker; in a cluster the controller names them.
        self.metadata_cache.register_local_broker(
            BrokerInfo(self.broker_id, (EndPoint(host, port),)), alive=self.cluster is None
        )

    async def stop(self) -> None:
        """Stop accepting, answer requests in flight, flush and close the logs cleanly.
        In a cluster, controlled shutdown comes first: the controller moves this broker's
        leaders away while it still serves."""
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
        self.log_cleaner.shutdown()  # drops a half-written cleaned segment
        self.replica_manager.shutdown()
        self.replica_manager.checkpoint_high_watermarks()
        self.log_manager.shutdown()  # flushes and writes the clean-shutdown marker
        self._stop_file_thread()
        self._close_flush_thread()
        log.info("Sluice broker %d stopped cleanly", self.broker_id)
        self._stopped.set()

    async def crash(self) -> None:
        """Stop as kill -9 would: connections dropped, nothing answered or flushed, no
        controlled shutdown, no clean-shutdown marker, the coordination session left to
        expire. For in-process fault tests (EmbeddedCluster.kill_broker)."""
        for server in self.servers:
            server.abort()
        for task in self._tasks:
            task.cancel()
        if self.cluster is not None:
            await self.cluster.crash()
        self.log_cleaner.shutdown()
        self.replica_manager.shutdown()
        self.log_manager.abandon()
        self._stop_file_thread()
        self._close_flush_thread()
        log.info("Sluice broker %d crashed on purpose", self.broker_id)
        self._stopped.set()

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

    def _make_purgatory(self, name: str, purge_interval: int) -> DelayedOperationPurgatory:  # type: ignore[type-arg]
        loop = self._loop
        assert loop is not None

        def on_loop(fn: Any) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(fn)

        return DelayedOperationPurgatory(
            name, broker_id=self.broker_id, purge_interval=purge_interval,
            clock=self.clock, executor=on_loop,
        )  # fmt: skip

    async def _housekeeping(self) -> None:
        """Retention and time-based flushes, as Kafka's log manager schedules them."""
        interval_s = self.config["log.retention.check.interval.ms"] / 1000
        flush_s = min(interval_s, 1.0)
        next_retention = time.monotonic() + interval_s
        # Kafka's producer.id.expiration.check.interval.ms (10 min), never longer than the expiry.
        expiry_s = min(600_000, self.config["producer.id.expiration.ms"]) / 1000
        next_expiry = time.monotonic() + expiry_s
        hw_s = self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000
        next_hw = time.monotonic() + hw_s
        while True:
            await asyncio.sleep(min(flush_s, hw_s))
            try:
                self.log_manager.flush_dirty_logs()
                if time.monotonic() >= next_hw:
                    next_hw = time.monotonic() + hw_s
                    hws = self.replica_manager.high_watermarks_to_checkpoint()
                    if hws is not None:
                        await asyncio.to_thread(self.replica_manager.write_high_watermarks, hws)
                if time.monotonic() >= next_retention:
                    next_retention = time.monotonic() + interval_s
                    self.run_retention()
                if time.monotonic() >= next_expiry:
                    next_expiry = time.monotonic() + expiry_s
                    self.remove_expired_producers()
            except Exception:
                log.exception("log housekeeping failed")

    # -- log compaction -----------------------------------------------------------------
    def _start_log_cleaner(self) -> None:
        from sluice.log.cleaner.log_cleaner import LogCleaner

        self.log_cleaner = LogCleaner(
            lambda: list(self.log_manager), config_for=self._compaction_config,
            high_watermark=self._cleaner_bound, clock=self.clock,
        )  # fmt: skip
        if self.config["log.cleaner.enable"]:
            self._tasks.append(asyncio.create_task(self._run_log_cleaner()))

    async def _run_log_cleaner(self) -> None:
        """Compaction on the event loop thread (the log classes are not thread-safe): one
        bounded slice per loop iteration while there is work, log.cleaner.backoff.ms of
        sleep when there is none. Progress: ``log_cleaner.passes_completed``."""
        backoff_s = self.config["log.cleaner.backoff.ms"] / 1000
        while True:
            try:
                busy = self.log_cleaner.step()
            except Exception:
                log.exception("log cleaner failed")
                busy = False
            await asyncio.sleep(0 if busy else backoff_s)

    def _compaction_config(self, log_: Log) -> CompactionConfig:
        from sluice.log.cleaner.log_cleaner import CompactionConfig

        return CompactionConfig.from_topic_configs(self.topic_configs(log_.topic))

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

    # -- topics ---------------------------------------------------------------------
    def _default_log_config(self) -> LogConfig:
        return self._log_config_from(topic_config_defaults(self.config))

    @staticmethod
    def _log_config_from(values: dict[str, Any]) -> LogConfig:
        props: dict[str, Any] = {}
        for key, value in values.items():
            if key in _LOG_CONFIG_KEYS and value is not None:
                props[key] = ",".join(value) if isinstance(value, list) else value
        return LogConfig.from_properties(props)

    def topic_info(self, name: str) -> TopicInfo | None:
        """The topic as this broker knows it; in a cluster a topic with no replica here
        is read from ZooKeeper."""
        info = self.registry.get(name)
        if info is None and self.cluster is not None:
            info = self.cluster.existing_topic(name)
        return info

    def topic_configs(self, topic: str) -> dict[str, Any]:
        """Effective topic configs: broker defaults overlaid with the topic's overrides."""
        values = topic_config_defaults(self.config)
        info = self.topic_info(topic)
        if info is not None:
            for key, raw in info.configs.items():
                values[key] = TOPIC_CONFIGS[key][1].parse(raw)
        return values

    def topic_config(self, topic: str, key: str) -> Any:
        """One effective topic config (as :meth:`topic_configs` would give it), without
        building them all: the produce path asks for min.insync.replicas per request."""
        synonym, definition = TOPIC_CONFIGS[key]
        info = self.topic_info(topic)
        raw = None if info is None else info.configs.get(key)
        if raw is not None:
            return definition.parse(raw)
        return self.config.broker_synonym(synonym) if synonym else definition.default

    def log_config_for(self, topic: str) -> LogConfig:
        return self._log_config_from(self.topic_configs(topic))

    def _min_isr(self, tp: TopicPartition) -> int:
        return int(self.topic_config(tp.topic, "min.insync.replicas"))

    def _host_partitions(self, info: TopicInfo, partitions: list[int]) -> None:
        """Single node: host the topic's ``partitions`` and publish the topic."""
        config = self.log_config_for(info.name)
        for p in partitions:
            replicas = info.assignment[p]
            if self.broker_id not in replicas:
                continue
            log_ = self.log_manager.get_or_create_log(info.name, p, config)
            self.replica_manager.add_partition(
                TopicPartition(info.name, p), log_, replicas, topic_id=info.topic_id
            )
        self._publish_topic(info)

    def _publish_topic(self, info: TopicInfo) -> None:
        """Single node: the metadata cache's view of a registry topic, this broker the
        leader of every partition it hosts."""
        states = []
        for p, replicas in info.assignment.items():
            tp = TopicPartition(info.name, p)
            partition = self.replica_manager.get_partition(tp)
            isr: tuple[int, ...] = ()
            if partition is None:
                leader, epoch = -1, -1
            else:
                leader, epoch = partition.leader_id, partition.leader_epoch
                isr = tuple(sorted(partition.isr))
            states.append(
                UpdateMetadataPartitionState(tp, 0, leader, epoch, isr, 0, tuple(replicas))
            )
        self.metadata_cache.put_topic(info.name, info.topic_id, states)

    async def create_partition_logs(
        self, name: str, num_partitions: int, configs: dict[str, str]
    ) -> None:
        """Create a topic's partition logs ahead of :meth:`create_topic`, on a worker thread
        (directories, files and fsyncs: 50 partitions take 40-100 ms, more on a busy disk)
        while the event loop serves: for an internal topic created once the listeners are
        open. The topic exists once create_topic registers it, which finds them."""
        config = self._log_config_from({**topic_config_defaults(self.config), **configs})
        manager = self.log_manager
        planned = manager.new_log_dirs(name, range(num_partitions))

        def create() -> dict[int, Log]:
            return {p: manager.create_log(log_dir, config) for p, log_dir in planned.items()}

        logs = await asyncio.get_running_loop().run_in_executor(None, create)
        for p, log_ in logs.items():
            manager.add_log(name, p, log_)

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        validate_only: bool = False,
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicInfo:
        """Create a topic and its partition logs; raises InvalidTopicError, ConfigError,
        FileExistsError, or ValueError for bad partition/replica counts. ``assignment``
        (partition -> replicas) replaces the counts, which must then be -1."""
        if assignment is not None:
            if num_partitions != -1 or replication_factor != -1:
                raise InvalidRequest(
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time."
                )
            check_replica_assignment(assignment, self._live_broker_ids())
            num_partitions = len(assignment)
            replication_factor = len(assignment[0])
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if num_partitions < 1:
            raise ValueError("Number of partitions must be larger than 0.")
        if self.cluster is not None:
            self._log_config_from({**topic_config_defaults(self.config), **configs})
            from sluice.config import validate_topic_configs

            validate_topic_name(name)
            validate_topic_configs(configs)
            return self.cluster.create_topic(
                name, num_partitions, replication_factor, configs, validate_only, assignment
            )
        if replication_factor < 1 or replication_factor > 1:
            raise InvalidReplicationFactor(
                f"Replication factor: {replication_factor} larger than available brokers: 1."
                if replication_factor > 1 else "Replication factor must be larger than 0."
            )  # fmt: skip
        assignment = {p: [self.broker_id] for p in range(num_partitions)}
        self._log_config_from({**topic_config_defaults(self.config), **configs})
        info = self.registry.create(name, assignment, configs, validate_only)
        if not validate_only:
            self._host_partitions(info, list(assignment))
            log.info("created topic %s with %d partitions", name, num_partitions)
        return info

    def _live_broker_ids(self) -> list[int]:
        return self.cluster.live_broker_ids() if self.cluster is not None else [self.broker_id]

    def maybe_auto_create(self, name: str) -> bool:
        """Whether the topic exists (a replica here, or in the metadata cache) or is being
        created: it is created with broker defaults when auto-creation is on. A single
        node has it at once; in a cluster the controller creates its partitions, and the
        topic is in the metadata cache once it has told this broker about them."""
        if self.registry.get(name) is not None or self.metadata_cache.contains_topic(name):
            return True
        if name == OFFSETS_TOPIC and not self.coordinators_ready:
            return False  # the group coordinator creates it, with its own partition count
        if not self.config["auto.create.topics.enable"]:
            return False
        try:
            self.create_topic(name, -1, -1, {})
        except FileExistsError:  # created meanwhile
            return True
        except (InvalidTopicError, ValueError):
            return False
        return True

    def create_internal_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        """Create an internal topic (``__consumer_offsets``, ``__transaction_state``) on
        first use unless it exists, its replication factor capped by the live brokers."""
        rf = max(1, min(replication_factor, len(self._live_broker_ids())))
        with contextlib.suppress(FileExistsError):
            self.create_topic(name, num_partitions, rf, configs)

    def ensure_transaction_state(self) -> None:
        """Single node: ``__transaction_state`` is created at the first transactional
        request and coordinated here (see :func:`txn_runtime.ensure_transaction_state`)."""
        from sluice.server.txn_runtime import ensure_transaction_state

        ensure_transaction_state(self)

    def delete_topic(self, name: str) -> None:
        if self.cluster is not None:  # the controller deletes it (StopReplica)
            self.cluster.delete_topic(name)
            return
        info = self.registry.delete(name)
        if info is None:
            raise KeyError(name)
        gone = [TopicPartition(name, p) for p in info.assignment]
        self.metadata_cache.remove_topic(name)
        for tp in gone:
            self.replica_manager.remove_partition(tp)
            self.log_manager.delete_log(tp.topic, tp.partition)
        self.group_coordinator.handle_deleted_partitions(gone)  # their committed offsets too
        log.info("deleted topic %s", name)

    def add_partitions(self, name: str, total: int, validate_only: bool = False) -> None:
        if self.cluster is not None:
            self.cluster.add_partitions(name, total, validate_only)
            return
        info = self.registry.get(name)
        if info is None:
            raise KeyError(name)
        if total <= info.num_partitions:
            raise ValueError(
                f"Topic currently has {info.num_partitions} partitions, which is higher than "
                f"or equal to the requested {total}."
            )
        if validate_only:
            return
        new = {p: [self.broker_id] for p in range(info.num_partitions, total)}
        self.registry.add_partitions(name, new)
        self._host_partitions(info, list(new))
        log.info("topic %s now has %d partitions", name, total)

    def update_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's overrides (validated first). In a cluster they go to
        ZooKeeper, and every broker applies them when notified."""
        self._log_config_from({**topic_config_defaults(self.config), **configs})
        if self.cluster is not None:
            self.cluster.change_topic_config(name, configs)
        self.apply_topic_configs(name, configs)

    def apply_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        if self.registry.get(name) is None:
            return  # no replica here (a cluster keeps the overrides in ZooKeeper)
        self.registry.set_configs(name, configs)
        self.log_manager.update_config(name, self.log_config_for(name))

    def path(self) -> Path:
        return self.log_dir


HW_CHECKPOINT_FILE = "replication-offset-checkpoint"
OFFSETS_TOPIC = "__consumer_offsets"  # GROUP_METADATA_TOPIC_NAME, not imported before listening


def check_replica_assignment(assignment: dict[int, list[int]], live: list[int]) -> None:
    """Kafka's rules for a manual assignment: partitions 0..n-1, each with the same number
    of distinct replicas, every one a live broker."""
    if not assignment:
        raise InvalidReplicaAssignment("The replica assignment is empty.")
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidReplicaAssignment(
            "Partitions should be a consecutive 0-based integer sequence."
        )
    sizes = {len(r) for r in assignment.values()}
    if 0 in sizes or len(sizes) > 1:
        raise InvalidReplicaAssignment("All partitions should have the same number of replicas.")
    for p, replicas in assignment.items():
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignment(f"Duplicate brokers in the replicas of partition {p}.")
        unknown = sorted(set(replicas) - set(live))
        if unknown:
            raise InvalidReplicaAssignment(f"Unknown broker(s) in replica assignment: {unknown}.")
