"""``RequestContext``: everything a request handler may use, by name and typed.

As Kafka's ``KafkaApis`` receives its collaborators by name (``replicaManager``,
``groupCoordinator``, ``txnCoordinator``, ``metadataCache``, ...) and each request
carries its ``RequestContext`` (client id, client address, the session's principal), a
Sluice handler is ``handle(ctx, request)``: ``ctx`` holds the broker's collaborators and
the identity of the client that sent the request. Handlers never see the ``Broker``,
the network layer or an ``Any``.

The broker builds one context once its listeners can open (:meth:`Broker._context`);
the network layer derives one per connection and client id from it
(:meth:`RequestContext.for_client`), so a request costs no new object. The group and
transaction coordinators are built after a single node's listeners open: their
accessors raise until then, and only handlers held until then (those whose
``ApiSpec`` says ``needs_coordinators``, :mod:`sluice.server.apis`) use them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sluice.security import DEFAULT_SESSION, KafkaPrincipal, Session

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Iterable, Mapping, Sequence

    from sluice.base import TopicPartition
    from sluice.base.clock import Clock
    from sluice.config import BrokerConfig
    from sluice.controller.events import (
        AlterReassignmentsCallback,
        ElectionType,
        ListReassignmentsCallback,
        ReplicaLeaderElectionResults,
    )
    from sluice.coordinator import GroupCoordinator
    from sluice.coordinator.transaction import TransactionCoordinator
    from sluice.log import LogConfig
    from sluice.log.manager import LogManager
    from sluice.protocol import VersionTable
    from sluice.replication.fetch_session import FetchSessionCache
    from sluice.replication.metadata_cache import MetadataCache
    from sluice.replication.producer_ids import ProducerIdManager
    from sluice.replication.replica_manager import ReplicaManager
    from sluice.security.authorizer import AclAuthorizer
    from sluice.security.sasl.credential_store import ScramCredentialStore
    from sluice.server.broker_metrics import BrokerTopicStats
    from sluice.server.client_quotas import ClientQuotas
    from sluice.server.dynamic_broker_config import DynamicConfigManager
    from sluice.server.replica_alter_log_dirs import ReplicaAlterLogDirsManager
    from sluice.server.replica_assignment import Assignments
    from sluice.server.topics import TopicInfo

__all__ = ["ActiveController", "Controller", "Coordinators", "RequestContext", "TopicAdmin"]


class TopicAdmin(Protocol):
    """Topic administration: create, delete, add partitions, configs. A single node
    changes its registry and logs; a cluster writes ZooKeeper and the controller acts."""

    def topic_info(self, name: str) -> TopicInfo | None:
        """The topic with its config overrides (in a cluster, read from ZooKeeper when no
        replica is here)."""

    def topic_configs(self, topic: str) -> dict[str, Any]:
        """Effective topic configs: broker defaults overlaid with the topic's overrides."""

    def log_config_for(self, topic: str) -> LogConfig: ...

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        validate_only: bool = False,
        assignments: Assignments | None = None,
    ) -> TopicInfo: ...

    async def create_topic_async(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        validate_only: bool = False,
        assignments: Assignments | None = None,
    ) -> TopicInfo:
        """``create_topic`` with the partition logs made off the event loop (a CreateTopics
        request; the creation goes on if the wait is cancelled)."""

    def create_internal_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        """Create an internal topic unless it exists (replication capped by the brokers)."""

    def maybe_auto_create(self, name: str) -> bool:
        """Whether the topic exists or is being created (auto-creation on)."""

    def delete_topic(self, name: str) -> None:
        """Delete a topic; KeyError if there is none, InvalidTopicError for an internal
        one."""

    def add_partitions(
        self,
        name: str,
        total: int,
        validate_only: bool = False,
        assignments: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Grow a topic (on the replicas ``assignments`` names for each new partition);
        KeyError, ValueError if not more, InvalidReplicaAssignment, InvalidTopicError
        for an internal one."""

    async def add_partitions_async(
        self,
        name: str,
        total: int,
        validate_only: bool = False,
        assignments: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """``add_partitions`` with the partition logs made off the event loop (the
        creation goes on if the wait is cancelled)."""

    def await_leaders(
        self, partitions: Mapping[str, Iterable[int]], timeout_ms: int
    ) -> asyncio.Future[set[str]]:
        """Kafka's DelayedCreatePartitions: the topics whose given partitions still have
        no leader in this broker's metadata once every one has one or ``timeout_ms``
        has passed (none: all led)."""

    def check_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """ConfigError or LogError for a value the log refuses, PolicyViolation for
        overrides under which an internal topic would lose records."""

    def update_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's overrides, checked first as by :meth:`check_topic_configs`."""

    def ensure_transaction_state(self) -> None:
        """Single node: ``__transaction_state`` exists and is coordinated here."""


class ActiveController(Protocol):
    """The controller operations admin requests ask for (Kafka's ``KafkaController``);
    each answers through its callback, possibly from the controller's own thread."""

    def elect_leaders(
        self,
        partitions: set[TopicPartition],
        election_type: ElectionType,
        callback: Callable[[ReplicaLeaderElectionResults], None],
    ) -> None: ...

    def alter_partition_reassignments(
        self,
        reassignments: dict[TopicPartition, tuple[int, ...] | None],
        callback: AlterReassignmentsCallback,
        *,
        allow_replication_factor_change: bool = True,
    ) -> None: ...

    def list_partition_reassignments(
        self, partitions: set[TopicPartition] | None, callback: ListReassignmentsCallback
    ) -> None: ...


class Controller(Protocol):
    """The way to the controller: this broker's own when it is the active one."""

    @property
    def active_controller(self) -> ActiveController | None: ...


class Coordinators:
    """The group and transaction coordinators, set once the broker has built them."""

    __slots__ = ("_group", "_txn")

    def __init__(self) -> None:
        self._group: GroupCoordinator | None = None
        self._txn: TransactionCoordinator | None = None

    def set(self, group: GroupCoordinator, txn: TransactionCoordinator) -> None:
        self._group, self._txn = group, txn

    @property
    def built(self) -> bool:
        """Whether the broker has built them."""
        return self._group is not None

    @property
    def group(self) -> GroupCoordinator:
        if self._group is None:
            raise RuntimeError("the group coordinator is not built yet")
        return self._group

    @property
    def txn(self) -> TransactionCoordinator:
        if self._txn is None:
            raise RuntimeError("the transaction coordinator is not built yet")
        return self._txn


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a handler may use (see the module)."""

    broker_id: int
    config: BrokerConfig
    versions: VersionTable
    clock: Clock
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    fetch_sessions: FetchSessionCache
    producer_ids: ProducerIdManager
    topic_admin: TopicAdmin
    controller: Controller
    coordinators: Coordinators
    log_manager: LogManager
    """The ``log.dirs`` and their logs (DescribeLogDirs)."""
    alter_log_dirs: ReplicaAlterLogDirsManager
    """The moves between log dirs (AlterReplicaLogDirs)."""
    scram_credentials: ScramCredentialStore
    """Users' SCRAM credentials: the cache the SCRAM exchanges read and where they are
    kept (a file on a single node, ZooKeeper in a cluster)."""
    client_id: str | None = None
    """The request header's client id."""
    client_host: str = ""
    """The client's address as Kafka shows it (``/127.0.0.1``)."""
    session: Session = DEFAULT_SESSION
    """The connection's principal and listener (:mod:`sluice.security`)."""
    authorizer: AclAuthorizer | None = None
    """``authorizer.class.name``'s authorizer; None: every request is authorized
    (:mod:`sluice.server.auth_helper`)."""
    quotas: ClientQuotas | None = None
    """The client quotas and their stored configs (the broker always sets them)."""
    dynamic_configs: DynamicConfigManager | None = None
    """The dynamic broker configs and their store (the broker always sets them)."""
    topic_stats: BrokerTopicStats | None = None
    """Per-topic message and byte counts for the metrics endpoint; None: metrics off
    (:mod:`sluice.server.broker_metrics`)."""

    @property
    def group_coordinator(self) -> GroupCoordinator:
        return self.coordinators.group

    @property
    def txn_coordinator(self) -> TransactionCoordinator:
        return self.coordinators.txn

    @property
    def principal(self) -> KafkaPrincipal:
        """Who sent the request (``User:ANONYMOUS`` when not authenticated)."""
        return self.session.principal

    def for_client(
        self, client_id: str | None, client_host: str, session: Session = DEFAULT_SESSION
    ) -> RequestContext:
        """This context for the requests of one client connection."""
        return dataclasses.replace(
            self, client_id=client_id, client_host=client_host, session=session
        )
