"""Controller exceptions, each carrying the Kafka error code a broker would answer with."""

from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError

__all__ = [
    "BrokerNotAvailableError",
    "ControllerMovedError",
    "IllegalStateError",
    "StaleBrokerEpochError",
    "StaleControllerEpochError",
    "StateChangeFailedError",
]


class ControllerMovedError(KafkaError):
    """This broker is no longer the controller: /controller_epoch moved on (``NOT_CONTROLLER``)."""

    code = ErrorCode.not_controller


class StaleControllerEpochError(KafkaError):
    """A request came from a controller older than the newest one seen."""

    code = ErrorCode.stale_controller_epoch


class StaleBrokerEpochError(KafkaError):
    """A broker request carried an epoch older than the broker's current registration."""

    code = ErrorCode.stale_broker_epoch


class BrokerNotAvailableError(KafkaError):
    """The broker named in a request is not alive."""

    code = ErrorCode.broker_not_available


class IllegalStateError(KafkaError):
    """A partition or replica state transition that Kafka's state machines forbid."""

    code = ErrorCode.unknown_server_error


class StateChangeFailedError(KafkaError):
    """A state change could not be made, e.g. no replica was eligible to lead."""

    code = ErrorCode.eligible_leaders_not_available
