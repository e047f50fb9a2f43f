"""InitProducerId (22): a producer id and epoch for an idempotent producer.

As Kafka's transaction coordinator does for a null transactional id, every request gets a
fresh producer id with epoch 0, also when it names the producer's current id and epoch
(KIP-360: the client asks to bump its epoch after an unknown-producer or sequence error;
for an idempotent producer Kafka answers with a new id, which resets its sequences the same
way). A request naming only one of producer id / epoch is INVALID_REQUEST. A transactional
id goes to the transaction coordinator, which bumps its epoch (fencing older producers);
an empty one is INVALID_REQUEST, as in Kafka.

Versions 0-5: v6 is two-phase commit (KIP-939). The minimum stays at 0: librdkafka
before 2.11.1 enables the idempotent producer only if the range holds v0.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.replication.producer_ids import ProducerIdsExhaustedError
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_by_resource_type,
    authorize_cluster,
)
from sluice.server.messages import build, field, ms

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.init_producer_id.v0.request as v0
    import kio.schema.init_producer_id.v1.request as v1
    import kio.schema.init_producer_id.v2.request as v2
    import kio.schema.init_producer_id.v3.request as v3
    import kio.schema.init_producer_id.v4.request as v4
    import kio.schema.init_producer_id.v5.request as v5

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.InitProducerIdRequest
        | v1.InitProducerIdRequest
        | v2.InitProducerIdRequest
        | v3.InitProducerIdRequest
        | v4.InitProducerIdRequest
        | v5.InitProducerIdRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.INIT_PRODUCER_ID, 0, 5)

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


def _transactional(
    ctx: RequestContext, request: Request, transactional_id: str, producer_id: int, epoch: int
) -> Any:
    from sluice.server.group_runtime import deferred

    body = API.body(request)
    ctx.topic_admin.ensure_transaction_state()
    callback: Callable[[tuple[ErrorCode, int, int]], None]
    callback, result = deferred()
    expected = None if producer_id == NO_PRODUCER_ID else (producer_id, epoch)
    ctx.txn_coordinator.handle_init_producer_id(
        transactional_id, ms(body.transaction_timeout), expected,
        lambda error, pid, new_epoch: callback((error, pid, new_epoch)),
    )  # fmt: skip

    async def respond() -> Any:
        error, pid, new_epoch = await result
        if error == ErrorCode.producer_fenced and request.api_version < 4:
            error = ErrorCode.invalid_producer_epoch  # PRODUCER_FENCED came with v4 (KIP-588)
        return _response(request, error, pid, new_epoch)

    return respond()


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    transactional_id = field(body, "transactional_id")
    producer_id = int(field(body, "producer_id", NO_PRODUCER_ID))
    producer_epoch = int(field(body, "producer_epoch", NO_PRODUCER_EPOCH))
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return _response(request, ErrorCode.invalid_request, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    if transactional_id == "":
        return _response(request, ErrorCode.invalid_request, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    # As Kafka (KIP-679): WRITE on the transactional id; an idempotent producer needs
    # IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
    if transactional_id is not None and not authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        code = ErrorCode.transactional_id_authorization_failed
        return _response(request, code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    if (
        transactional_id is None
        and not authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE)
        and not authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC)
    ):
        code = ErrorCode.cluster_authorization_failed
        return _response(request, code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    if transactional_id is not None:
        return _transactional(ctx, request, transactional_id, producer_id, producer_epoch)
    try:
        new_id = ctx.producer_ids.generate_producer_id()
    except (ProducerIdsExhaustedError, OSError, ValueError) as exc:
        log.error("cannot allocate a producer id: %s", exc)
        return _response(request, ErrorCode.unknown_server_error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    if producer_id != NO_PRODUCER_ID:
        log.debug(
            "producer %d (epoch %d) asked for a new epoch; gave it producer id %d",
            producer_id, producer_epoch, new_id,
        )  # fmt: skip
    return _response(request, ErrorCode.none, new_id, 0)
