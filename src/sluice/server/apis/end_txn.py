"""EndTxn (26): commit or abort a producer's transaction.

Versions 0-4: v4 lets the answer carry TRANSACTION_ABORTABLE (KIP-890 part 1), an error
Sluice never needs; v5 (Kafka 4.0) is transactions v2, which Sluice does not serve.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.end_txn.v0.request as v0
    import kio.schema.end_txn.v1.request as v1
    import kio.schema.end_txn.v2.request as v2
    import kio.schema.end_txn.v3.request as v3
    import kio.schema.end_txn.v4.request as v4

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.EndTxnRequest | v1.EndTxnRequest | v2.EndTxnRequest | v3.EndTxnRequest | v4.EndTxnRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.END_TXN, 0, 4)


def handle(ctx: RequestContext, request: Request) -> Any:
    from sluice.server.group_runtime import deferred

    body = API.body(request)
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
        return build(request.response_type, throttle_time=0, error_code=code)
    ctx.topic_admin.ensure_transaction_state()
    callback: Callable[[ErrorCode], None]
    callback, result = deferred()
    ctx.txn_coordinator.handle_end_transaction(
        body.transactional_id, int(body.producer_id), int(body.producer_epoch),
        bool(body.committed), callback,
    )  # fmt: skip

    async def respond() -> Any:
        error = await result
        if error == ErrorCode.producer_fenced and request.api_version < 2:
            error = ErrorCode.invalid_producer_epoch  # PRODUCER_FENCED came with v2 (KIP-588)
        return build(request.response_type, throttle_time=0, error_code=error)

    return respond()
