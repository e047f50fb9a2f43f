"""AddOffsetsToTxn (25): add the group's ``__consumer_offsets`` partition to a transaction,
before TxnOffsetCommit sends the offsets to the group coordinator.

Versions 0-4: v4 lets the answer carry TRANSACTION_ABORTABLE (KIP-890 part 1), an error
Sluice never needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.add_offsets_to_txn.v0.request as v0
    import kio.schema.add_offsets_to_txn.v1.request as v1
    import kio.schema.add_offsets_to_txn.v2.request as v2
    import kio.schema.add_offsets_to_txn.v3.request as v3
    import kio.schema.add_offsets_to_txn.v4.request as v4

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.AddOffsetsToTxnRequest
        | v1.AddOffsetsToTxnRequest
        | v2.AddOffsetsToTxnRequest
        | v3.AddOffsetsToTxnRequest
        | v4.AddOffsetsToTxnRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4)


def handle(ctx: RequestContext, request: Request) -> Any:
    from sluice.coordinator.group import GROUP_METADATA_TOPIC_NAME
    from sluice.server.group_runtime import deferred

    body = API.body(request)
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
        return build(request.response_type, throttle_time=0, error_code=code)
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        code = ErrorCode.group_authorization_failed
        return build(request.response_type, throttle_time=0, error_code=code)
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
