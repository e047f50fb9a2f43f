"""AddPartitionsToTxn (24): add partitions to a producer's transaction (v0-v3).

Versions 0-3, transactions v1 only: v4+ bring TRANSACTION_ABORTABLE and KIP-890.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize, filter_by_authorized
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.add_partitions_to_txn.v0.request as v0
    import kio.schema.add_partitions_to_txn.v1.request as v1
    import kio.schema.add_partitions_to_txn.v2.request as v2
    import kio.schema.add_partitions_to_txn.v3.request as v3

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.AddPartitionsToTxnRequest
        | v1.AddPartitionsToTxnRequest
        | v2.AddPartitionsToTxnRequest
        | v3.AddPartitionsToTxnRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 3)


def _response(request: Request, errors: dict[TopicPartition, ErrorCode]) -> Any:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "partition_error_code": error}
        )
    results = [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]
    return build(request.response_type, throttle_time=0, results_by_topic_v3_and_below=results)


def handle(ctx: RequestContext, request: Request) -> Any:
    from sluice.server.group_runtime import deferred

    body = API.body(request)
    ctx.topic_admin.ensure_transaction_state()
    txn_id = body.v3_and_below_transactional_id  # "": INVALID_REQUEST, as Kafka
    producer_id = int(body.v3_and_below_producer_id)
    epoch = int(body.v3_and_below_producer_epoch)
    topics = body.v3_and_below_topics
    partitions = [TopicPartition(t.name, int(p)) for t in topics for p in t.partitions]
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        code = ErrorCode.transactional_id_authorization_failed
        return _response(request, dict.fromkeys(partitions, code))
    writable = filter_by_authorized(
        ctx, AclOperation.WRITE, ResourceType.TOPIC, {tp.topic for tp in partitions}
    )
    if len(writable) < len({tp.topic for tp in partitions}):
        # Kafka: the unauthorized ones TOPIC_AUTHORIZATION_FAILED, the rest not attempted.
        errors = {
            tp: ErrorCode.operation_not_attempted
            if tp.topic in writable else ErrorCode.topic_authorization_failed
            for tp in partitions
        }  # fmt: skip
        return _response(request, errors)
    missing = [tp for tp in partitions if not ctx.metadata_cache.contains_partition(tp)]
    if missing:
        # Kafka: the missing ones UNKNOWN_TOPIC_OR_PARTITION, the rest not attempted.
        errors = {
            tp: ErrorCode.unknown_topic_or_partition
            if tp in missing else ErrorCode.operation_not_attempted
            for tp in partitions
        }  # fmt: skip
        return _response(request, errors)
    callback: Callable[[ErrorCode], None]
    callback, result = deferred()
    ctx.txn_coordinator.handle_add_partitions(txn_id, producer_id, epoch, partitions, callback)

    async def respond() -> Any:
        return _response(request, dict.fromkeys(partitions, await result))

    return respond()
