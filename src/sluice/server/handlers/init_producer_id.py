"""InitProducerId (22): a producer id and epoch for an idempotent producer.

As Kafka's transaction coordinator does for a null transactional id, every request gets a
fresh producer id with epoch 0, also when it names the producer's current id and epoch
(KIP-360: the client asks to bump its epoch after an unknown-producer or sequence error;
for an idempotent producer Kafka answers with a new id, which resets its sequences the same
way). A request naming only one of producer id / epoch is INVALID_REQUEST. Transactional
ids need the transaction coordinator, which Sluice does not run yet: they are answered
COORDINATOR_NOT_AVAILABLE (an empty one INVALID_REQUEST, as in Kafka).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sluice.protocol import ErrorCode, Request
from sluice.server.messages import build, field
from sluice.server.producer_ids import ProducerIdsExhaustedError

if TYPE_CHECKING:
    from sluice.server.broker import Broker

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def _response(request: Request, error: ErrorCode, producer_id: int, epoch: int) -> Any:
    return build(
        request.response_type,
        throttle_time=0,
        error_code=error,
        producer_id=producer_id,
        producer_epoch=epoch,
    )


def handle(broker: Broker, request: Request) -> Any:
    body: Any = request.body
    transactional_id = field(body, "transactional_id")
    producer_id = int(field(body, "producer_id", NO_PRODUCER_ID))
    producer_epoch = int(field(body, "producer_epoch", NO_PRODUCER_EPOCH))
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return _response(request, ErrorCode.invalid_request, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    if transactional_id is not None:
        error = ErrorCode.invalid_request if transactional_id == "" else None
        return _response(
            request, error or ErrorCode.coordinator_not_available, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        )
    try:
        new_id = broker.producer_id_manager.generate_producer_id()
    except (ProducerIdsExhaustedError, OSError, ValueError) as exc:
        log.error("cannot allocate a producer id: %s", exc)
        return _response(request, ErrorCode.unknown_server_error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    if producer_id != NO_PRODUCER_ID:
        log.debug(
            "producer %d (epoch %d) asked for a new epoch; gave it producer id %d",
            producer_id, producer_epoch, new_id,
        )  # fmt: skip
    return _response(request, ErrorCode.none, new_id, 0)
