"""AddOffsetsToTxn (25): add the group's ``__consumer_offsets`` partition to a transaction,
before TxnOffsetCommit sends the offsets to the group coordinator."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.protocol.requests import body_of
from sluice.server.messages import build

if TYPE_CHECKING:
    from sluice.server.request_context import RequestContext


def handle(ctx: RequestContext, request: Request) -> Any:
    from sluice.coordinator.group import GROUP_METADATA_TOPIC_NAME
    from sluice.server.group_runtime import deferred

    body = body_of(request, ApiKey.ADD_OFFSETS_TO_TXN)
    ctx.topic_admin.ensure_transaction_state()
    partition = ctx.group_coordinator.partition_for(body.group_id)
    tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
    callback: Callable[[ErrorCode], None]
    callback, result = deferred()
    ctx.txn_coordinator.handle_add_partitions(
        body.transactional_id, int(body.producer_id), int(body.producer_epoch), [tp], callback
    )

    async def respond() -> Any:
        return build(request.response_type, throttle_time=0, error_code=await result)

    return respond()
