"""What the controller sends to brokers, and the channel it sends it through.

The controller's output is LeaderAndIsr, UpdateMetadata and StopReplica requests per
broker (these dataclasses carry the fields of Kafka's requests of those names). The
network is not the controller's business: it hands requests to a
:class:`ControllerChannel` (Kafka's ``ControllerChannelManager``), which the broker
implements over its connections; :class:`RecordingControllerChannel` keeps them for
tests. Response callbacks may run on any thread; the controller turns them into events.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from sluice.base import TopicPartition

from ..protocol.errors import ErrorCode
from .model import Broker

__all__ = [
    "ControllerChannel",
    "ControllerRequest",
    "ControllerResponse",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "RecordingControllerChannel",
    "ResponseCallback",
    "SentRequest",
    "StopReplicaPartitionState",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
]


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartitionState:
    """One partition in a LeaderAndIsr request: become leader or follower at this epoch."""

    topic_partition: TopicPartition
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    """LeaderAndIsr (API key 4) for one broker."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    topic_ids: Mapping[str, str]
    live_leaders: tuple[Broker, ...]


@dataclass(frozen=True, slots=True)
class UpdateMetadataPartitionState:
    """One partition in an UpdateMetadata request (leader -2 while the topic is deleted)."""

    topic_partition: TopicPartition
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class UpdateMetadataRequest:
    """UpdateMetadata (API key 6): live brokers and partition leaders for a broker's cache."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    live_brokers: tuple[Broker, ...]
    topic_ids: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class StopReplicaPartitionState:
    """One partition in a StopReplica request; ``delete_partition`` also deletes its log."""

    topic_partition: TopicPartition
    leader_epoch: int
    delete_partition: bool


@dataclass(frozen=True, slots=True)
class StopReplicaRequest:
    """StopReplica (API key 5) for one broker."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[StopReplicaPartitionState, ...]


@dataclass(frozen=True, slots=True)
class LeaderAndIsrResponse:
    """A broker's answer to LeaderAndIsr."""

    error_code: ErrorCode = ErrorCode.none
    partition_errors: Mapping[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UpdateMetadataResponse:
    """A broker's answer to UpdateMetadata."""

    error_code: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class StopReplicaResponse:
    """A broker's answer to StopReplica, with an error per partition."""

    error_code: ErrorCode = ErrorCode.none
    partition_errors: Mapping[TopicPartition, ErrorCode] = field(default_factory=dict)


ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
ControllerResponse = LeaderAndIsrResponse | UpdateMetadataResponse | StopReplicaResponse
ResponseCallback = Callable[[ControllerResponse], None]


class ControllerChannel(Protocol):
    """Delivers controller requests to brokers (Kafka's ``ControllerChannelManager``).

    ``send_request`` must not block: queue the request per broker, send in order,
    retry until the broker is removed, and call ``callback`` with the response.
    """

    def add_broker(self, broker: Broker) -> None:
        """Open a connection (and a send queue) to a newly live broker."""
        ...

    def remove_broker(self, broker_id: int) -> None:
        """Drop a dead broker's connection and its unsent requests."""
        ...

    def send_request(
        self, broker_id: int, request: ControllerRequest, callback: ResponseCallback | None = None
    ) -> None:
        """Queue ``request`` for ``broker_id``."""
        ...


@dataclass(slots=True)
class SentRequest:
    """A request as the recording channel saw it, with the callback to answer it."""

    broker_id: int
    request: ControllerRequest
    callback: ResponseCallback | None


class RecordingControllerChannel:
    """A :class:`ControllerChannel` that records requests; tests answer them by hand."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.brokers: dict[int, Broker] = {}
        self.sent: list[SentRequest] = []

    def add_broker(self, broker: Broker) -> None:
        with self._lock:
            self.brokers[broker.id] = broker

    def remove_broker(self, broker_id: int) -> None:
        with self._lock:
            self.brokers.pop(broker_id, None)

    def send_request(
        self, broker_id: int, request: ControllerRequest, callback: ResponseCallback | None = None
    ) -> None:
        with self._lock:
            self.sent.append(SentRequest(broker_id, request, callback))

    def take(self) -> list[SentRequest]:
        """Return and forget everything sent so far."""
        with self._lock:
            sent, self.sent = self.sent, []
            return sent

    def answer_all(self, sent: list[SentRequest] | None = None) -> None:
        """Answer requests successfully (those given, or all recorded, which are forgotten)."""
        for item in sent if sent is not None else self.take():
            if item.callback is None:
                continue
            if isinstance(item.request, StopReplicaRequest):
                item.callback(StopReplicaResponse())
            elif isinstance(item.request, LeaderAndIsrRequest):
                item.callback(LeaderAndIsrResponse())
            else:
                item.callback(UpdateMetadataResponse())
