"""Per-event batching of controller requests (Kafka's ``ControllerBrokerRequestBatch``).

State machines add LeaderAndIsr, StopReplica and UpdateMetadata entries while they
handle one event; :meth:`ControllerBrokerRequestBatch.send_requests_to_brokers` then
sends one request of each kind per broker, in Kafka's order (LeaderAndIsr,
UpdateMetadata, StopReplica), to brokers that are alive or shutting down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from sluice.base import TopicPartition

from ..protocol.errors import ErrorCode
from .context import ControllerContext
from .errors import IllegalStateError
from .model import LEADER_DURING_DELETE, LeaderIsrAndControllerEpoch, ReplicaAssignment
from .requests import (
    ControllerChannel,
    ControllerResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

__all__ = ["ControllerBrokerRequestBatch"]

log = logging.getLogger("sluice.controller.state.change")

NO_EPOCH = -1
EPOCH_DURING_DELETE = -2

# (broker id, error per partition the request asked to delete)
StopReplicaCallback = Callable[[int, dict[TopicPartition, ErrorCode]], None]
# (broker id, its answer to a LeaderAndIsr request)
LeaderAndIsrCallback = Callable[[int, LeaderAndIsrResponse], None]


class ControllerBrokerRequestBatch:
    """Collects one event's requests to brokers and sends them together at the end."""

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        channel: ControllerChannel,
        on_stop_replica_response: StopReplicaCallback | None = None,
        on_leader_and_isr_response: LeaderAndIsrCallback | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.context = context
        self.channel = channel
        self.on_stop_replica_response = on_stop_replica_response
        self.on_leader_and_isr_response = on_leader_and_isr_response
        self.leader_and_isr_requests: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]]
        self.stop_replica_requests: dict[int, dict[TopicPartition, StopReplicaPartitionState]]
        self.update_metadata_brokers: set[int]
        self.update_metadata_partitions: dict[TopicPartition, UpdateMetadataPartitionState]
        self.clear()

    def clear(self) -> None:
        self.leader_and_isr_requests = {}
        self.stop_replica_requests = {}
        self.update_metadata_brokers = set()
        self.update_metadata_partitions = {}

    def is_empty(self) -> bool:
        return not (
            self.leader_and_isr_requests
            or self.stop_replica_requests
            or self.update_metadata_brokers
        )

    def new_batch(self) -> None:
        if not self.is_empty():
            pending = (
                f"LeaderAndIsr {sorted(self.leader_and_isr_requests)}, "
                f"StopReplica {sorted(self.stop_replica_requests)}, "
                f"UpdateMetadata {sorted(self.update_metadata_brokers)}"
            )
            raise IllegalStateError(
                f"controller-to-broker request batch is not empty when a new one starts: {pending}"
            )

    def add_leader_and_isr_request_for_brokers(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        leader_isr: LeaderIsrAndControllerEpoch,
        assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        lai = leader_isr.leader_and_isr
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self.leader_and_isr_requests.setdefault(broker_id, {})
            previous = per_broker.get(tp)
            per_broker[tp] = LeaderAndIsrPartitionState(
                topic_partition=tp,
                controller_epoch=leader_isr.controller_epoch,
                leader=lai.leader,
                leader_epoch=lai.leader_epoch,
                isr=lai.isr,
                partition_epoch=lai.zk_version,
                replicas=assignment.replicas,
                adding_replicas=assignment.adding_replicas,
                removing_replicas=assignment.removing_replicas,
                is_new=is_new or (previous is not None and previous.is_new),
                leader_recovery_state=lai.leader_recovery_state,
            )
        self.add_update_metadata_request_for_brokers(
            self.context.live_or_shutting_down_broker_ids, [tp]
        )

    def add_stop_replica_request_for_brokers(
        self, broker_ids: Iterable[int], tp: TopicPartition, delete_partition: bool
    ) -> None:
        if delete_partition:
            leader_epoch = EPOCH_DURING_DELETE
        else:
            info = self.context.partition_leadership_info.get(tp)
            leader_epoch = info.leader_and_isr.leader_epoch if info is not None else NO_EPOCH
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self.stop_replica_requests.setdefault(broker_id, {})
            previous = per_broker.get(tp)
            delete = delete_partition or (previous is not None and previous.delete_partition)
            per_broker[tp] = StopReplicaPartitionState(tp, leader_epoch, delete)

    def add_update_metadata_request_for_brokers(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] | None = None
    ) -> None:
        """Send UpdateMetadata to ``broker_ids`` for ``partitions`` (None: every partition)."""
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        given = self.context.partition_leadership_info.keys() if partitions is None else partitions
        for tp in list(given):
            info = self.context.partition_leadership_info.get(tp)
            if info is None:
                continue
            lai = info.leader_and_isr
            replicas = self.context.partition_replica_assignment(tp)
            being_deleted = tp.topic in self.context.topics_to_be_deleted
            self.update_metadata_partitions[tp] = UpdateMetadataPartitionState(
                topic_partition=tp,
                controller_epoch=info.controller_epoch,
                leader=LEADER_DURING_DELETE if being_deleted else lai.leader,
                leader_epoch=lai.leader_epoch,
                isr=lai.isr,
                zk_version=lai.zk_version,
                replicas=replicas,
                offline_replicas=tuple(
                    r for r in replicas if not self.context.is_replica_online(r, tp)
                ),
            )

    def send_requests_to_brokers(self, controller_epoch: int) -> None:
        try:
            self._send_leader_and_isr(controller_epoch)
            self._send_update_metadata(controller_epoch)
            self._send_stop_replica(controller_epoch)
        finally:
            self.clear()

    def _targets(self, broker_ids: Iterable[int]) -> list[int]:
        live = self.context.live_or_shutting_down_broker_ids
        return sorted(b for b in broker_ids if b in live)

    def _topic_ids(self, partitions: Iterable[TopicPartition]) -> dict[str, str]:
        topics = {tp.topic for tp in partitions}
        return {t: i for t, i in self.context.topic_ids.items() if t in topics}

    def _send_leader_and_isr(self, controller_epoch: int) -> None:
        for broker_id in self._targets(self.leader_and_isr_requests):
            states = self.leader_and_isr_requests[broker_id]
            leader_ids = {s.leader for s in states.values()}
            request = LeaderAndIsrRequest(
                controller_id=self.controller_id,
                controller_epoch=controller_epoch,
                broker_epoch=self.context.live_broker_epochs.get(broker_id, -1),
                partition_states=tuple(states[tp] for tp in sorted(states)),
                topic_ids=self._topic_ids(states),
                live_leaders=tuple(
                    self.context.live_brokers[b]
                    for b in sorted(leader_ids)
                    if b in self.context.live_brokers
                ),
            )
            for state in request.partition_states:
                role = "leader" if state.leader == broker_id else "follower"
                log.debug(
                    "sending become-%s LeaderAndIsr for %s to broker %d (leader %d, epoch %d)",
                    role,
                    state.topic_partition,
                    broker_id,
                    state.leader,
                    state.leader_epoch,
                )
            self.channel.send_request(broker_id, request, self._leader_and_isr_callback(broker_id))

    def _leader_and_isr_callback(
        self, broker_id: int
    ) -> Callable[[ControllerResponse], None] | None:
        handler = self.on_leader_and_isr_response
        if handler is None:
            return None

        def on_response(response: ControllerResponse) -> None:
            if isinstance(response, LeaderAndIsrResponse):
                handler(broker_id, response)

        return on_response

    def _send_update_metadata(self, controller_epoch: int) -> None:
        partitions = self.update_metadata_partitions
        live_brokers = tuple(
            self.context.live_brokers[b] for b in sorted(self.context.live_brokers)
        )
        for broker_id in self._targets(self.update_metadata_brokers):
            request = UpdateMetadataRequest(
                controller_id=self.controller_id,
                controller_epoch=controller_epoch,
                broker_epoch=self.context.live_broker_epochs.get(broker_id, -1),
                partition_states=tuple(partitions[tp] for tp in sorted(partitions)),
                live_brokers=live_brokers,
                topic_ids=self._topic_ids(partitions),
            )
            self.channel.send_request(broker_id, request)

    def _send_stop_replica(self, controller_epoch: int) -> None:
        for broker_id in self._targets(self.stop_replica_requests):
            states = self.stop_replica_requests[broker_id]
            request = StopReplicaRequest(
                controller_id=self.controller_id,
                controller_epoch=controller_epoch,
                broker_epoch=self.context.live_broker_epochs.get(broker_id, -1),
                partition_states=tuple(states[tp] for tp in sorted(states)),
            )
            deleting = [tp for tp, s in sorted(states.items()) if s.delete_partition]
            callback = None
            if deleting and self.on_stop_replica_response is not None:
                callback = self._stop_replica_callback(broker_id, deleting)
            self.channel.send_request(broker_id, request, callback)

    def _stop_replica_callback(
        self, broker_id: int, deleting: list[TopicPartition]
    ) -> Callable[[ControllerResponse], None]:
        handler = self.on_stop_replica_response
        assert handler is not None

        def on_response(response: ControllerResponse) -> None:
            if isinstance(response, StopReplicaResponse):
                errors = {
                    tp: response.partition_errors.get(tp, response.error_code) for tp in deleting
                }
                handler(broker_id, errors)

        return on_response
