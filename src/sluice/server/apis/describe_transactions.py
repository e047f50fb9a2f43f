"""DescribeTransactions (65): the state of transactional ids this broker coordinates."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize, filter_by_authorized
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.describe_transactions.v0.request as v0

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.DescribeTransactionsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)


def _describe(ctx: RequestContext, txn_id: str) -> dict[str, Any]:
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return {"error_code": ErrorCode.transactional_id_authorization_failed,
                "transactional_id": txn_id, "transaction_state": "", "transaction_timeout": 0,
                "transaction_start_time": -1, "producer_id": -1, "producer_epoch": -1,
                "topics": []}  # fmt: skip
    error, meta = ctx.txn_coordinator.handle_describe(txn_id)
    if meta is None or error != ErrorCode.none:
        return {"error_code": error, "transactional_id": txn_id, "transaction_state": "",
                "transaction_timeout": 0, "transaction_start_time": -1, "producer_id": -1,
                "producer_epoch": -1, "topics": []}  # fmt: skip
    by_topic: dict[str, list[int]] = {}
    described = filter_by_authorized(  # as Kafka: the topics it may not describe left out
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, {tp.topic for tp in meta.topic_partitions}
    )
    for tp in sorted(meta.topic_partitions):
        if tp.topic in described:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
    return {
        "error_code": ErrorCode.none, "transactional_id": txn_id,
        "transaction_state": meta.state.state_name, "transaction_timeout": meta.txn_timeout_ms,
        "transaction_start_time": meta.txn_start_timestamp, "producer_id": meta.producer_id,
        "producer_epoch": meta.producer_epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
    }  # fmt: skip


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    states = [_describe(ctx, t) for t in body.transactional_ids]
    return build(request.response_type, throttle_time=0, transaction_states=states)
