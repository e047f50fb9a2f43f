"""Topic administration: the request context's ``TopicAdmin`` and what the coordinator
runtimes ask of topics.

The broker picks one implementation at start-up. :class:`SingleNodeTopicAdmin` keeps
the topics in the local registry (``server/topics.py``), creates and deletes their
partition logs through the log manager and replica manager, and publishes each topic to
the metadata cache; ``ZkTopicAdmin`` (``server/zk_topic_admin.py``, imported in cluster
mode only) writes ZooKeeper and lets the controller create, move and delete replicas.
What does not depend on the mode is written once, in :class:`TopicAdminBase`:

- the checks of a CreateTopics request, in Kafka's order (explicit assignment or counts,
  broker defaults, partition count, replication factor against the live brokers, config
  values), before the mode registers the topic;
- config resolution: a topic's effective configs are the broker's defaults overlaid with
  its overrides, and its ``LogConfig`` is made from them;
- the auto-create policy (``auto.create.topics.enable``; never an internal topic: the
  coordinators create those) and internal-topic creation (replication capped by the
  live brokers);
- the protection of the internal topics (``__consumer_offsets``,
  ``__transaction_state``): deleting one or adding partitions to one is refused
  (InvalidTopicError, answered INVALID_TOPIC_EXCEPTION), and so are configs under which
  retention would delete its records (PolicyViolation, answered POLICY_VIOLATION), each
  with a message;
- applying config overrides to the registry and to the topic's logs here;
- a CreateTopics or CreatePartitions request's creation, awaited
  (:meth:`TopicAdminBase.create_topic_async`, :meth:`TopicAdminBase.add_partitions_async`):
  a single node makes the partition logs on worker threads and registers them once they
  all exist, within ``max.broker.partitions``; a cluster's controller makes them.

An internal topic that is missing all the same (deleted below these checks, or lost
with ZooKeeper's data) is created again by the next FindCoordinator that needs it, as
on first use; its partitions' coordinators are elected as they are hosted (on a single
node by :class:`SingleNodeTopicAdmin`, in a cluster by LeaderAndIsr), and start empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sluice.base import TopicPartition
from sluice.config import TOPIC_CONFIGS, BrokerConfig, topic_config_defaults
from sluice.controller.requests import UpdateMetadataPartitionState
from sluice.log import KafkaStorageException, Log, LogConfig, LogManager
from sluice.purgatory import DelayedOperationPurgatory
from sluice.replication.delayed import DelayedCreatePartitions
from sluice.replication.metadata_cache import INTERNAL_TOPICS
from sluice.server import gc_policy
from sluice.server.replica_assignment import (
    Assignments,
    new_partitions_assignment,
    new_topic_assignment,
)
from sluice.server.topics import (
    InvalidReplicationFactor,
    InvalidRequest,
    InvalidTopicError,
    PolicyViolation,
    TopicInfo,
    TopicRegistry,
)

if TYPE_CHECKING:
    from sluice.replication.metadata_cache import MetadataCache
    from sluice.replication.replica_manager import ReplicaManager
    from sluice.server.request_context import Coordinators

__all__ = [
    "CoordinatorTopics",
    "SingleNodeTopicAdmin",
    "TopicAdminBase",
    "check_internal_topic_configs",
    "check_replication_factor",
    "effective_topic_configs",
    "log_config_from",
    "registered_log_configs",
    "topic_log_config",
]

log = logging.getLogger(__name__)

# Kafka's names, spelled here: sluice.coordinator is not imported before the listeners open.
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"

_LOG_CONFIG_KEYS = frozenset(LogConfig.kafka_names())

# What each internal topic holds, and the config that sets its partition count.
_INTERNAL_CONTENTS = {
    OFFSETS_TOPIC: "the consumer groups' committed offsets and metadata",
    TRANSACTION_STATE_TOPIC: "the transactional ids' state",
}
_INTERNAL_PARTITION_COUNTS = {
    OFFSETS_TOPIC: "offsets.topic.num.partitions",
    TRANSACTION_STATE_TOPIC: "transaction.state.log.num.partitions",
}


def log_config_from(values: Mapping[str, object]) -> LogConfig:
    """The ``LogConfig`` of a topic whose effective configs are ``values``; raises
    ConfigError or LogError for a value the log refuses."""
    props: dict[str, object] = {}
    for key, value in values.items():
        if key in _LOG_CONFIG_KEYS and value is not None:
            props[key] = ",".join(value) if isinstance(value, list) else value
    return LogConfig.from_properties(props)


def topic_log_config(config: BrokerConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The ``LogConfig`` a topic with these (raw, requested) overrides would have: the
    broker's defaults overlaid with them. Raises for a value the log refuses."""
    return log_config_from({**topic_config_defaults(config), **overrides})


def effective_topic_configs(config: BrokerConfig, overrides: Mapping[str, str]) -> dict[str, Any]:
    """Every topic config: the broker's defaults overlaid with a topic's (stored)
    overrides, parsed."""
    values = topic_config_defaults(config)
    for key, raw in overrides.items():
        values[key] = TOPIC_CONFIGS[key][1].parse(raw)
    return values


def registered_log_configs(
    config: BrokerConfig, registry: TopicRegistry
) -> Callable[[str], LogConfig]:
    """The ``LogConfig`` of each topic of ``registry``, by name: what the log manager
    opens the logs on disk with, before the broker has chosen its topic admin."""

    def log_config(topic: str) -> LogConfig:
        info = registry.get(topic)
        return log_config_from(
            effective_topic_configs(config, {} if info is None else info.configs)
        )

    return log_config


def check_internal_topic_configs(name: str, config: LogConfig) -> None:
    """Refuse (PolicyViolation) a ``LogConfig`` under which an internal topic would lose
    records: its cleanup policy must stay ``compact`` alone, as the coordinators create
    it, since with ``delete`` retention removes whole segments, live records and all
    (``retention.ms`` and ``retention.bytes`` apply only then). Kafka itself accepts
    such a change (an ``alter.config.policy.class.name`` policy would refuse it)."""
    if name in INTERNAL_TOPICS and config.delete_enabled:
        raise PolicyViolation(
            f"Internal topic {name} must keep cleanup.policy=compact: with "
            f"cleanup.policy={config.cleanup_policy}, retention would delete "
            f"{_INTERNAL_CONTENTS[name]}."
        )


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:  # no loop runs on this thread
        return False


def check_replication_factor(replication_factor: int, live_brokers: int) -> None:
    """Kafka's rule for an assignment this broker makes: 1 to the live broker count."""
    if replication_factor < 1 or replication_factor > live_brokers:
        raise InvalidReplicationFactor(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{live_brokers}." if replication_factor > 1
            else "Replication factor must be larger than 0."
        )  # fmt: skip


class CoordinatorTopics(Protocol):
    """What the group and transaction coordinator runtimes ask of topics."""

    def topic_info(self, name: str) -> TopicInfo | None: ...

    def is_known(self, name: str) -> bool: ...

    def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicInfo: ...

    def coordinator_topic(
        self, name: str, num_partitions: int, configs: dict[str, str]
    ) -> TopicInfo: ...

    async def create_partition_logs(
        self, name: str, num_partitions: int, configs: dict[str, str]
    ) -> None: ...


class TopicAdminBase(ABC):
    """What both modes share (see the module); the mode supplies where topics are read
    and registered, the live brokers, deletion and partition addition."""

    def __init__(
        self,
        config: BrokerConfig,
        registry: TopicRegistry,
        log_manager: LogManager,
        metadata_cache: MetadataCache,
        coordinators: Coordinators,
    ) -> None:
        self.config = config
        self.registry = registry  # the topics with a replica here
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.coordinators = coordinators
        # CreateTopics and CreatePartitions answers waiting for leaders (Kafka's "topic"
        # purgatory); made at the first that has to wait.
        self._topic_purgatory: DelayedOperationPurgatory[DelayedCreatePartitions] | None = None

    # -- what the mode supplies ------------------------------------------------------
    @abstractmethod
    def topic_info(self, name: str) -> TopicInfo | None:
        """The topic with its config overrides, as this broker knows it."""

    @abstractmethod
    def live_broker_ids(self) -> list[int]: ...

    def _whole_topic(self, name: str) -> TopicInfo | None:
        """The topic with every partition (the registry of a cluster member holds only
        those with a replica here)."""
        return self.topic_info(name)

    @abstractmethod
    def _register(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        validate_only: bool,
        assignment: dict[int, list[int]] | None,
    ) -> TopicInfo:
        """Check the name and whether the topic exists, assign its replicas unless
        ``assignment`` is given, and create it (unless ``validate_only``)."""

    @abstractmethod
    def _delete_topic(self, name: str) -> None:
        """Delete a topic (KeyError if there is none), internal or not."""

    @abstractmethod
    def _add_partitions(
        self, name: str, total: int, validate_only: bool, assignment: dict[int, list[int]] | None
    ) -> None:
        """Grow a topic to ``total`` partitions (KeyError, or ValueError if not more), the
        new ones on the replicas of ``assignment`` if given (checked already)."""

    @abstractmethod
    def _update_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's config overrides (checked already)."""

    @abstractmethod
    def ensure_transaction_state(self) -> None:
        """``__transaction_state`` exists where this mode creates it on first use."""

    @abstractmethod
    def coordinator_topic(
        self, name: str, num_partitions: int, configs: dict[str, str]
    ) -> TopicInfo:
        """The internal topic a coordinator starts with."""

    @abstractmethod
    async def create_partition_logs(
        self, name: str, num_partitions: int, configs: dict[str, str]
    ) -> None:
        """Make an internal topic's partition logs ahead of its creation, off the loop."""

    # -- changes, internal topics protected ---------------------------------------------
    def delete_topic(self, name: str) -> None:
        """Delete a topic (KeyError if there is none). An internal topic is refused
        (InvalidTopicError): deleting it would drop what its coordinator keeps there."""
        if name in INTERNAL_TOPICS:
            raise InvalidTopicError(
                f"Cannot delete internal topic {name}: it holds {_INTERNAL_CONTENTS[name]}."
            )
        self._delete_topic(name)

    def add_partitions(
        self,
        name: str,
        total: int,
        validate_only: bool = False,
        assignments: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Grow a topic to ``total`` partitions (KeyError, or ValueError if not more), on
        the replicas ``assignments`` gives each new partition in order, if it does
        (InvalidReplicaAssignment: see :mod:`sluice.server.replica_assignment`). An
        internal topic is refused (InvalidTopicError): its partition count decides which
        partition holds each group or transactional id."""
        if name in INTERNAL_TOPICS:
            raise InvalidTopicError(
                f"Cannot add partitions to internal topic {name}: its partition count "
                f"({_INTERNAL_PARTITION_COUNTS[name]}) decides which partition holds each "
                f"key, and {_INTERNAL_CONTENTS[name]} would no longer be found."
            )
        assignment = self._checked_new_partitions(name, total, assignments)
        self._add_partitions(name, total, validate_only, assignment)

    async def add_partitions_async(
        self,
        name: str,
        total: int,
        validate_only: bool = False,
        assignments: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """:meth:`add_partitions` for a CreatePartitions request: where this broker makes
        the partition logs (a single node) they are made off the event loop. Cancelling
        the wait leaves the creation going (a request's timeout)."""
        self.add_partitions(name, total, validate_only, assignments)

    def _checked_new_partitions(
        self, name: str, total: int, assignments: Sequence[Sequence[int]] | None
    ) -> dict[int, list[int]] | None:
        """The new partitions' replicas a CreatePartitions request names, checked against
        the topic's partitions and the registered brokers; None if it names none, or if
        ``total`` is no increase (which the mode refuses)."""
        if assignments is None:
            return None
        info = self._whole_topic(name)
        if info is None:
            raise KeyError(name)
        current = info.num_partitions
        if total <= current:
            return None
        replication_factor = len(next(iter(info.assignment.values()), []))
        return new_partitions_assignment(
            assignments, current, total, replication_factor, self.live_broker_ids()
        )

    def check_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Check a topic's new overrides: ConfigError or LogError for a value the log
        refuses, PolicyViolation for an internal topic that would lose records."""
        check_internal_topic_configs(name, topic_log_config(self.config, configs))

    def update_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's config overrides, checked first (:meth:`check_topic_configs`)."""
        self.check_topic_configs(name, configs)
        self._update_topic_configs(name, configs)

    # -- answers that wait for leaders ---------------------------------------------------
    def await_leaders(
        self, partitions: Mapping[str, Iterable[int]], timeout_ms: int
    ) -> asyncio.Future[set[str]]:
        """Kafka's DelayedCreatePartitions: a future of the topics whose given partitions
        still have no live leader in this broker's metadata cache once every one has
        one (the controller's UpdateMetadata: :meth:`try_complete_delayed_topic_operations`)
        or ``timeout_ms`` has passed; empty when all are led. A single node has
        published its new partitions, leaders and all, before the creation returns."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[set[str]] = loop.create_future()

        def settle(missing: set[str]) -> None:
            if not answer.done():
                answer.set_result(missing)

        def complete(missing: set[str]) -> None:  # on the loop, or the timer's thread
            if _on_loop(loop):
                settle(missing)
            elif not loop.is_closed():
                loop.call_soon_threadsafe(settle, missing)

        op = DelayedCreatePartitions(timeout_ms, partitions, self.metadata_cache, complete)
        if not op.missing_leaders() or timeout_ms <= 0:
            op.force_complete()
            return answer
        if self._topic_purgatory is None:
            self._topic_purgatory = DelayedOperationPurgatory(
                "topic", broker_id=self.config.broker_id
            )
        self._topic_purgatory.try_complete_else_watch(op, list(op.partitions))
        return answer

    def try_complete_delayed_topic_operations(self, topics: Iterable[str]) -> None:
        """The metadata cache has new partition states for ``topics``: complete the
        answers waiting for their leaders that now have them."""
        purgatory = self._topic_purgatory
        if purgatory is None:
            return
        for topic in topics:
            purgatory.check_and_complete(topic)

    def shutdown(self) -> None:
        """Stop the purgatory's reaper; the answers still waiting are answered."""
        purgatory, self._topic_purgatory = self._topic_purgatory, None
        if purgatory is not None:
            purgatory.complete_all()
            purgatory.shutdown()

    # -- configs ---------------------------------------------------------------------
    def topic_configs(self, topic: str) -> dict[str, Any]:
        """Effective topic configs: broker defaults overlaid with the topic's overrides."""
        info = self.topic_info(topic)
        return effective_topic_configs(self.config, {} if info is None else info.configs)

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
        return log_config_from(self.topic_configs(topic))

    def min_insync_replicas(self, tp: TopicPartition) -> int:
        return int(self.topic_config(tp.topic, "min.insync.replicas"))

    def apply_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Take new overrides into the registry and the topic's logs here (none: nothing
        to do; a cluster keeps the overrides of other topics in ZooKeeper)."""
        if self.registry.get(name) is None:
            return
        self.registry.set_configs(name, configs)
        self.log_manager.update_config(name, self.log_config_for(name))

    # -- creation --------------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        validate_only: bool = False,
        assignments: Assignments | None = None,
    ) -> TopicInfo:
        """Create a topic; raises InvalidRequest, InvalidReplicaAssignment,
        InvalidReplicationFactor, InvalidTopicError, ConfigError, LogError,
        PolicyViolation (an internal topic not compacted), FileExistsError, or
        ValueError for a bad partition count. ``assignments`` (partition, replicas) as
        the request lists them replace the counts, which must then be -1."""
        num_partitions, replication_factor, assignment = self._checked_counts(
            name, num_partitions, replication_factor, configs, assignments
        )
        return self._register(
            name, num_partitions, replication_factor, configs, validate_only, assignment
        )

    async def create_topic_async(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        validate_only: bool = False,
        assignments: Assignments | None = None,
    ) -> TopicInfo:
        """:meth:`create_topic` for a CreateTopics request: where this broker makes the
        partition logs (a single node) they are made off the event loop and the topic is
        registered once they all exist; raises as :meth:`create_topic` does, and
        KafkaStorageException when the logs cannot be made (nothing is registered then).
        Cancelling the wait leaves the creation going (a request's timeout)."""
        num_partitions, replication_factor, assignment = self._checked_counts(
            name, num_partitions, replication_factor, configs, assignments
        )
        return await self._register_async(
            name, num_partitions, replication_factor, configs, validate_only, assignment
        )

    async def _register_async(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        validate_only: bool,
        assignment: dict[int, list[int]] | None,
    ) -> TopicInfo:
        """:meth:`_register`, awaited where the mode makes the logs itself."""
        return self._register(
            name, num_partitions, replication_factor, configs, validate_only, assignment
        )

    def _checked_counts(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignments: Assignments | None,
    ) -> tuple[int, int, dict[int, list[int]] | None]:
        """The partition count, replication factor and manual assignment (if any) of a
        request, checked in Kafka's order with its configs, before anything is written."""
        assignment = None
        if assignments:
            if replication_factor != -1:
                raise InvalidRequest(
                    "A manual partition assignment was specified, but replication factor "
                    "was not set to -1."
                )
            if num_partitions != -1:
                raise InvalidRequest(
                    "A manual partition assignment was specified, but numPartitions was "
                    "not set to -1."
                )
            assignment = new_topic_assignment(assignments, self.live_broker_ids())
            num_partitions = len(assignment)
            replication_factor = len(assignment[0])
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if num_partitions < 1:
            raise ValueError("Number of partitions must be larger than 0.")
        if assignment is None:
            check_replication_factor(replication_factor, len(self.live_broker_ids()))
        self.check_topic_configs(name, configs)  # the values, before anything is written
        return num_partitions, replication_factor, assignment

    def create_internal_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        """Create an internal topic (``__consumer_offsets``, ``__transaction_state``) on
        first use unless it exists, its replication factor capped by the live brokers."""
        rf = max(1, min(replication_factor, len(self.live_broker_ids())))
        with contextlib.suppress(FileExistsError):
            self.create_topic(name, num_partitions, rf, configs)

    def is_known(self, name: str) -> bool:
        """Whether the topic has a replica here or is in the metadata cache."""
        return self.registry.get(name) is not None or self.metadata_cache.contains_topic(name)

    def maybe_auto_create(self, name: str) -> bool:
        """Whether the topic exists (a replica here, or in the metadata cache) or is being
        created: it is created with broker defaults when auto-creation is on. A single
        node has it at once; in a cluster the controller creates its partitions, and the
        topic is in the metadata cache once it has told this broker about them. An
        internal topic is never made here: its coordinator creates it (at start, or at
        the FindCoordinator that needs it) with its own partition count and configs."""
        if self.is_known(name):
            return True
        if name in INTERNAL_TOPICS:
            return False
        if not self.config["auto.create.topics.enable"]:
            return False
        try:
            self.create_topic(name, -1, -1, {})
        except FileExistsError:  # created meanwhile, or being created
            return True
        except (InvalidTopicError, ValueError, KafkaStorageException):
            return False
        return True


class SingleNodeTopicAdmin(TopicAdminBase):
    """A broker that is not in a cluster: the registry is the record of its topics, it
    hosts and leads every partition, and it publishes each topic to the metadata cache.
    Once the coordinators are built, hosting an internal topic's partition elects its
    coordinator there and deleting it resigns it, as LeaderAndIsr and StopReplica do in
    a cluster."""

    def __init__(
        self,
        config: BrokerConfig,
        registry: TopicRegistry,
        log_manager: LogManager,
        metadata_cache: MetadataCache,
        coordinators: Coordinators,
        replica_manager: ReplicaManager,
    ) -> None:
        super().__init__(config, registry, log_manager, metadata_cache, coordinators)
        self.broker_id = config.broker_id
        self.replica_manager = replica_manager
        # Topics whose partition logs are being made off the loop, with their partition
        # counts: their names are taken, their partitions count towards the limit.
        self._creating: dict[str, int] = {}
        self._creations: set[asyncio.Task[TopicInfo]] = set()  # held until done

    def topic_info(self, name: str) -> TopicInfo | None:
        return self.registry.get(name)

    def live_broker_ids(self) -> list[int]:
        return [self.broker_id]

    def host_registered_topics(self) -> None:
        """At start-up: host every partition of the registry's topics and publish them;
        remove the logs of partitions no topic holds (a creation cut short by a crash,
        or a deletion), as Kafka removes stray logs."""
        for info in self.registry.topics.values():
            self._host_partitions(info, list(info.assignment), is_new=False)
        strays = []
        for tp in self.log_manager.logs:
            topic = self.registry.get(tp.topic)
            if topic is None or tp.partition not in topic.assignment:
                strays.append(tp)
        for tp in strays:
            self.log_manager.delete_log(tp.topic, tp.partition)
        if strays:
            log.warning("removed %d partition logs of no registered topic (%s)",
                        len(strays), ", ".join(sorted({tp.topic for tp in strays})))  # fmt: skip

    def _host_partitions(
        self, info: TopicInfo, partitions: list[int], is_new: bool, publish: bool = True
    ) -> None:
        """Host the topic's ``partitions`` (their logs made if missing) and, unless told
        not to, publish the topic. A partition whose log cannot be opened or created (its
        log dir is offline: LogManager.get_or_create_log) is not hosted; it is published
        without a leader."""
        config = self.log_config_for(info.name)
        hosted = []
        for p in partitions:
            replicas = info.assignment[p]
            if self.broker_id not in replicas:
                continue
            try:
                log_ = self.log_manager.get_or_create_log(info.name, p, config, is_new)
            except KafkaStorageException as exc:
                log.warning("partition %s-%d is not served: %s", info.name, p, exc)
                continue
            tp = TopicPartition(info.name, p)
            self.replica_manager.add_partition(tp, log_, replicas, topic_id=info.topic_id)
            hosted.append(tp)
        if publish:
            self._publish_topic(info)
        if info.name in INTERNAL_TOPICS and self.coordinators.built:
            for tp in hosted:
                self._coordinator_elect(tp)

    def _coordinator_elect(self, tp: TopicPartition) -> None:
        """This broker leads an internal topic's partition it just hosted, once the
        coordinators run (``__transaction_state`` on first use, or a topic made again
        after it went missing): its coordinator owns it and loads it now, a new log and
        empty. At start the coordinator runtimes take the partitions instead."""
        if tp.topic == OFFSETS_TOPIC:
            group = self.coordinators.group
            group.on_election(tp.partition)
            group.load_partition(tp.partition)
        elif tp.topic == TRANSACTION_STATE_TOPIC:
            partition = self.replica_manager.get_partition(tp)
            epoch = 0 if partition is None else partition.leader_epoch
            self.coordinators.txn.on_elected(tp.partition, epoch, load=True)

    def _coordinator_resign(self, tp: TopicPartition) -> None:
        """An internal topic's partition goes: its coordinator unloads what it held."""
        if tp.topic == OFFSETS_TOPIC:
            self.coordinators.group.on_resignation(tp.partition)
        elif tp.topic == TRANSACTION_STATE_TOPIC:
            self.coordinators.txn.on_resigned(tp.partition)

    def _publish_topic(self, info: TopicInfo) -> None:
        """The metadata cache's view of a registry topic, this broker the leader of every
        partition it hosts."""
        states = self._partition_states(info, info.assignment)
        self.metadata_cache.put_topic(info.name, info.topic_id, states)

    def _partition_states(
        self, info: TopicInfo, partitions: Iterable[int]
    ) -> list[UpdateMetadataPartitionState]:
        states = []
        for p in partitions:
            replicas = info.assignment[p]
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
        return states

    def _register(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        validate_only: bool,
        assignment: dict[int, list[int]] | None,
    ) -> TopicInfo:
        """Checked (:meth:`_new_topic`), its partition logs made here, then into the
        registry and hosted: for the few partitions of an auto-created or internal
        topic (a CreateTopics request makes them off the loop, :meth:`_register_async`)."""
        info = self._new_topic(name, num_partitions, configs, validate_only, assignment)
        if validate_only:
            return info
        started = time.monotonic()
        self._create_now(info, list(info.assignment), topic_log_config(self.config, configs),
                         lambda: self.registry.put(info))  # fmt: skip
        log.info("created topic %s with %d partitions in %.0f ms",
                 name, num_partitions, (time.monotonic() - started) * 1000)  # fmt: skip
        return info

    def _create_now(
        self,
        info: TopicInfo,
        partitions: list[int],
        config: LogConfig,
        register: Callable[[], object],
    ) -> None:
        """Make the logs of ``partitions`` here, ``register`` them, host and publish."""
        planned = self.log_manager.new_log_dirs(info.name, partitions)
        try:
            logs = self.log_manager.create_logs(planned, config)
        except KafkaStorageException as exc:
            raise self._not_created(info.name, len(partitions), exc) from exc
        self._complete(info, logs, register)
        self._host_partitions(info, partitions, is_new=True)

    async def _register_async(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        validate_only: bool,
        assignment: dict[int, list[int]] | None,
    ) -> TopicInfo:
        """Checked (:meth:`_new_topic`) before anything is written; the logs are made on
        worker threads, in batches, then the topic is registered and hosted (in slices
        of the event loop's time). The creation is a task of its own: a caller that
        stops waiting does not stop it."""
        info = self._new_topic(name, num_partitions, configs, validate_only, assignment)
        if validate_only:
            return info
        config = topic_log_config(self.config, configs)
        return await self._in_background(
            info, list(info.assignment), config, lambda: self.registry.put(info),
            f"created topic {name} with {num_partitions} partitions",
        )  # fmt: skip

    CREATE_BATCH = 500
    """Partition logs made per job of a worker thread (a few hundred milliseconds)."""
    HOST_SLICE = 1000
    """Partitions hosted or published per slice of the event loop's time (milliseconds)."""

    async def _in_background(
        self,
        info: TopicInfo,
        partitions: list[int],
        config: LogConfig,
        register: Callable[[], object],
        done: str,
    ) -> TopicInfo:
        """Run :meth:`_create` as a task of its own, which the topic admin holds: a
        caller that stops waiting (a request's timeout) does not stop it. The topic's
        name is taken, and the partitions count towards the limit, until it ends."""
        self._creating[info.name] = len(partitions)
        task = asyncio.ensure_future(self._create(info, partitions, config, register, done))
        self._creations.add(task)
        task.add_done_callback(self._creation_done)
        return await asyncio.shield(task)

    async def _create(
        self,
        info: TopicInfo,
        partitions: list[int],
        config: LogConfig,
        register: Callable[[], object],
        done: str,
    ) -> TopicInfo:
        """The logs of ``partitions`` made on worker threads, in batches; then
        ``register`` (the registry written: from there on the partitions exist), and the
        partitions hosted and the topic published in slices of the loop's time."""
        started = time.monotonic()
        name = info.name
        loop = asyncio.get_running_loop()
        manager = self.log_manager
        logs: dict[int, Log] = {}
        try:
            try:
                batch = self.CREATE_BATCH
                for first in range(0, len(partitions), batch):
                    planned = manager.new_log_dirs(name, partitions[first : first + batch])
                    made = await loop.run_in_executor(None, manager.create_logs, planned, config)
                    logs.update(made)
                    gc_policy.freeze_long_lived()  # no full pass over them as they grow
            except KafkaStorageException as exc:  # a log dir failed, or all are offline
                await loop.run_in_executor(None, manager.remove_unmanaged, list(logs.values()))
                raise self._not_created(name, len(partitions), exc) from exc
            except BaseException:  # cancelled (the broker stops), or the manager stopped
                manager.remove_unmanaged(logs.values())
                raise
            self._complete(info, logs, register)
        finally:
            del self._creating[name]
        step = self.HOST_SLICE
        for first in range(0, len(partitions), step):
            await asyncio.sleep(0)
            self._host_partitions(info, partitions[first : first + step], True, publish=False)
        states: list[UpdateMetadataPartitionState] = []
        everything = list(info.assignment)
        for first in range(0, len(everything), step):
            await asyncio.sleep(0)
            states.extend(self._partition_states(info, everything[first : first + step]))
        await asyncio.sleep(0)
        self.metadata_cache.put_topic(name, info.topic_id, states)
        await asyncio.sleep(0)
        gc_policy.freeze_long_lived()
        log.info("%s in %.0f ms", done, (time.monotonic() - started) * 1000)
        return info

    def _creation_done(self, task: asyncio.Task[TopicInfo]) -> None:
        self._creations.discard(task)
        exc = None if task.cancelled() else task.exception()
        if exc is not None and not isinstance(exc, KafkaStorageException | KeyError):
            log.error("creating partitions failed", exc_info=exc)  # else logged, or answered

    def _new_topic(
        self,
        name: str,
        num_partitions: int,
        configs: dict[str, str],
        validate_only: bool,
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicInfo:
        """The topic as it would be registered (on ``assignment``'s replicas, checked
        already, if given: this broker's id for each partition), after the registry's
        checks (name, existence, collisions, config keys), a creation of the same name
        under way, ``max.broker.partitions`` and, unless ``validate_only``, live log dirs;
        nothing is written."""
        if name in self._creating:
            raise FileExistsError(f"Topic '{name}' already exists.")
        collision = name.replace(".", "_")
        for creating in self._creating:
            if creating.replace(".", "_") == collision:
                raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {creating}")
        if assignment is None:
            assignment = {p: [self.broker_id] for p in range(num_partitions)}
        if not validate_only and not (self.registry.writable and self.log_manager.live_log_dirs):
            raise KafkaStorageException(f"cannot create topic {name}: log dirs are offline")
        info = self.registry.create(name, assignment, configs, validate_only=True)
        self._check_partition_limit(num_partitions)
        return info

    def _check_partition_limit(self, more: int) -> None:
        """PolicyViolation when ``more`` partitions would take this broker past
        ``max.broker.partitions`` (those being created count)."""
        limit = self.config["max.broker.partitions"]
        hosted = sum(t.num_partitions for t in self.registry.topics.values())
        total = hosted + sum(self._creating.values()) + more
        if total > limit:
            raise PolicyViolation(
                f"{more} more partitions would make {total} on broker {self.broker_id}, "
                f"more than max.broker.partitions={limit}."
            )

    def _not_created(self, name: str, count: int, exc: Exception) -> KafkaStorageException:
        log.error("could not create %d partition logs of topic %s: %s", count, name, exc)
        return KafkaStorageException(
            f"Could not create the partition logs of topic '{name}': {exc}. Nothing was created."
        )

    def _complete(
        self, info: TopicInfo, logs: dict[int, Log], register: Callable[[], object]
    ) -> None:
        """``register`` the partitions, their logs existing, and have the log manager
        manage the logs; if the registry cannot be written (or the topic was deleted
        meanwhile: KeyError), the logs are removed."""
        try:
            register()
        except (KafkaStorageException, OSError, KeyError) as exc:
            self.log_manager.remove_unmanaged(logs.values())
            if isinstance(exc, KeyError):
                raise
            raise self._not_created(info.name, len(logs), exc) from exc
        for p, log_ in logs.items():
            self.log_manager.add_log(info.name, p, log_)

    async def create_partition_logs(
        self, name: str, num_partitions: int, configs: dict[str, str]
    ) -> None:
        """Create a topic's partition logs ahead of :meth:`create_topic`, on a worker thread
        (directories, files and fsyncs: 50 partitions take 40-100 ms, more on a busy disk)
        while the event loop serves: for an internal topic created once the listeners are
        open. The topic exists once create_topic registers it, which finds them. Nothing
        to do if the topic exists."""
        if self.registry.get(name) is not None:
            return
        config = topic_log_config(self.config, configs)
        manager = self.log_manager
        planned = manager.new_log_dirs(name, range(num_partitions))
        logs = await asyncio.get_running_loop().run_in_executor(
            None, manager.create_logs, planned, config
        )
        for p, log_ in logs.items():
            manager.add_log(name, p, log_)

    def coordinator_topic(
        self, name: str, num_partitions: int, configs: dict[str, str]
    ) -> TopicInfo:
        """The topic, created now (one replica) if it does not exist yet."""
        info = self.registry.get(name)
        if info is None:
            info = self.create_topic(name, num_partitions, 1, configs)
        return info

    def ensure_transaction_state(self) -> None:
        """``__transaction_state`` is created at the first transactional request (or again,
        if it went missing) and coordinated here (see
        :func:`txn_runtime.create_transaction_state`)."""
        if self.registry.get(TRANSACTION_STATE_TOPIC) is not None:
            return
        from sluice.server.txn_runtime import create_transaction_state

        create_transaction_state(self, self.coordinators.txn)

    def _delete_topic(self, name: str) -> None:
        info = self.registry.delete(name)
        if info is None:
            raise KeyError(name)
        gone = [TopicPartition(name, p) for p in info.assignment]
        self.metadata_cache.remove_topic(name)
        for tp in gone:
            if name in INTERNAL_TOPICS and self.coordinators.built:
                self._coordinator_resign(tp)
            self.replica_manager.remove_partition(tp)
            self.log_manager.delete_log(tp.topic, tp.partition)
        self.coordinators.group.handle_deleted_partitions(gone)  # their committed offsets too
        log.info("deleted topic %s", name)

    def _add_partitions(
        self, name: str, total: int, validate_only: bool, assignment: dict[int, list[int]] | None
    ) -> None:
        info, new = self._new_partitions(name, total, assignment)
        if validate_only:
            return
        self._create_now(info, list(new), self.log_config_for(name),
                         lambda: self.registry.add_partitions(name, new))  # fmt: skip
        log.info("topic %s now has %d partitions", name, total)

    async def add_partitions_async(
        self,
        name: str,
        total: int,
        validate_only: bool = False,
        assignments: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """:meth:`add_partitions` with the logs made off the event loop, as a topic's
        creation (:meth:`_register_async`); an internal topic is refused first."""
        if name in INTERNAL_TOPICS:
            self.add_partitions(name, total, validate_only)  # raises InvalidTopicError
        assignment = self._checked_new_partitions(name, total, assignments)
        info, new = self._new_partitions(name, total, assignment)
        if validate_only:
            return
        await self._in_background(
            info, list(new), self.log_config_for(name),
            lambda: self.registry.add_partitions(name, new),
            f"topic {name} now has {total} partitions",
        )  # fmt: skip

    def _new_partitions(
        self, name: str, total: int, assignment: dict[int, list[int]] | None
    ) -> tuple[TopicInfo, dict[int, list[int]]]:
        """The topic and its partitions to add (on ``assignment``'s replicas, checked
        already, if given), checked: KeyError (no such topic), ValueError (not more),
        InvalidRequest (some being created), PolicyViolation."""
        info = self.registry.get(name)
        if info is None:
            raise KeyError(name)
        if total <= info.num_partitions:
            raise ValueError(
                f"Topic currently has {info.num_partitions} partitions, which is higher than "
                f"or equal to the requested {total}."
            )
        if name in self._creating:
            raise InvalidRequest(f"Partitions of topic '{name}' are being created.")
        self._check_partition_limit(total - info.num_partitions)
        if assignment is not None:
            return info, assignment
        return info, {p: [self.broker_id] for p in range(info.num_partitions, total)}

    def _update_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.apply_topic_configs(name, configs)
