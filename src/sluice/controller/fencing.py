"""Broker-side fencing of controller requests by controller epoch and broker epoch.

A broker keeps the newest controller epoch it has seen and rejects LeaderAndIsr,
UpdateMetadata and StopReplica requests from an older controller with
``STALE_CONTROLLER_EPOCH`` (Kafka's ``ReplicaManager`` check); requests addressed to
an earlier registration of the broker get ``STALE_BROKER_EPOCH``; a LeaderAndIsr
partition state is applied only if its leader epoch is newer. The controller side of
fencing is in :class:`~.kafka_zk_client.KafkaZkClient` (writes checked against the
``/controller_epoch`` version).
"""

from __future__ import annotations

import threading

from ..protocol.errors import ErrorCode
from .errors import StaleBrokerEpochError, StaleControllerEpochError
from .model import INITIAL_CONTROLLER_EPOCH
from .requests import ControllerRequest

__all__ = ["ControllerEpochChecker"]

UNKNOWN_BROKER_EPOCH = -1


class ControllerEpochChecker:
    """Tracks the newest controller epoch a broker has seen and fences older controllers."""

    def __init__(self, broker_epoch: int = UNKNOWN_BROKER_EPOCH) -> None:
        self._lock = threading.Lock()
        self.controller_epoch = INITIAL_CONTROLLER_EPOCH
        self.controller_id = -1
        self.broker_epoch = broker_epoch

    def check(self, controller_id: int, controller_epoch: int) -> ErrorCode:
        """NONE (and remember the epoch) unless ``controller_epoch`` is older than the newest."""
        with self._lock:
            if controller_epoch < self.controller_epoch:
                return ErrorCode.stale_controller_epoch
            self.controller_epoch = controller_epoch
            self.controller_id = controller_id
            return ErrorCode.none

    def check_broker_epoch(self, request_broker_epoch: int) -> ErrorCode:
        """STALE_BROKER_EPOCH if the request was meant for an earlier registration."""
        if request_broker_epoch == UNKNOWN_BROKER_EPOCH:
            return ErrorCode.none
        if request_broker_epoch < self.broker_epoch:
            return ErrorCode.stale_broker_epoch
        return ErrorCode.none

    def check_request(self, request: ControllerRequest) -> ErrorCode:
        """Both checks for one controller request (broker epoch first, as Kafka does)."""
        error = self.check_broker_epoch(request.broker_epoch)
        if error is not ErrorCode.none:
            return error
        return self.check(request.controller_id, request.controller_epoch)

    def ensure_current(self, request: ControllerRequest) -> None:
        """Raise StaleBrokerEpochError / StaleControllerEpochError instead of returning codes."""
        error = self.check_request(request)
        if error is ErrorCode.stale_broker_epoch:
            raise StaleBrokerEpochError(
                f"request for broker epoch {request.broker_epoch}, current {self.broker_epoch}"
            )
        if error is ErrorCode.stale_controller_epoch:
            raise StaleControllerEpochError(
                f"controller {request.controller_id} epoch {request.controller_epoch} is older "
                f"than {self.controller_epoch}"
            )

    @staticmethod
    def check_leader_epoch(request_leader_epoch: int, current_leader_epoch: int) -> ErrorCode:
        """Per partition in LeaderAndIsr: apply only a newer leader epoch."""
        if request_leader_epoch > current_leader_epoch:
            return ErrorCode.none
        return ErrorCode.stale_controller_epoch
