"""EndTxn (26): commit or abort a producer's transaction."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.protocol.requests import body_of
from sluice.server.messages import build

if TYPE_CHECKING:
    from sluice.server.request_context import RequestContext


def handle(ctx: RequestContext, request: Request) -> Any:
    from sluice.server.group_runtime import deferred

    body = body_of(request, ApiKey.END_TXN)
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
