"""AddPartitionsToTxn (24): add partitions to a producer's transaction.

Versions 0-5. v0-v3 come from producers, one transaction each. v4+ are the batched form
a partition leader sends to a transaction coordinator (KIP-890): several transactions,
each either added to as by a producer or, with VerifyOnly, checked: each partition NONE
if the ongoing transaction holds it, else TRANSACTION_ABORTABLE (INVALID_TXN_STATE to a
v4 request, which predates that error). Sluice's own brokers do not send it: they do
not verify a transactional batch's partition before appending it. A partition of an
unknown topic answers UNKNOWN_TOPIC_OR_PARTITION and the transaction's others
OPERATION_NOT_ATTEMPTED, as for v0-v3.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_cluster,
    filter_by_authorized,
)
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.add_partitions_to_txn.v0.request as v0
    import kio.schema.add_partitions_to_txn.v1.request as v1
    import kio.schema.add_partitions_to_txn.v2.request as v2
    import kio.schema.add_partitions_to_txn.v3.request as v3
    import kio.schema.add_partitions_to_txn.v4.request as v4
    import kio.schema.add_partitions_to_txn.v5.request as v5

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.AddPartitionsToTxnRequest
        | v1.AddPartitionsToTxnRequest
        | v2.AddPartitionsToTxnRequest
        | v3.AddPartitionsToTxnRequest
        | v4.AddPartitionsToTxnRequest
        | v5.AddPartitionsToTxnRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5)

BATCHED_VERSION = 4
TRANSACTION_ABORTABLE_VERSION = 5


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "partition_error_code": error}
        )
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


def _response(request: Request, errors: dict[TopicPartition, ErrorCode]) -> Any:
    return build(
        request.response_type, throttle_time=0, results_by_topic_v3_and_below=_topic_results(errors)
    )


def _missing(
    ctx: RequestContext, partitions: list[TopicPartition]
) -> dict[TopicPartition, ErrorCode] | None:
    """Kafka: the partitions of unknown topics UNKNOWN_TOPIC_OR_PARTITION, the others not
    attempted; None when every partition exists."""
    missing = [tp for tp in partitions if not ctx.metadata_cache.contains_partition(tp)]
    if not missing:
        return None
    return {
        tp: ErrorCode.unknown_topic_or_partition
        if tp in missing else ErrorCode.operation_not_attempted
        for tp in partitions
    }  # fmt: skip


def _unauthorized(
    ctx: RequestContext, txn_id: str, partitions: list[TopicPartition]
) -> dict[TopicPartition, ErrorCode] | None:
    """Kafka: WRITE on the transactional id, then on each topic (the unauthorized ones
    TOPIC_AUTHORIZATION_FAILED, the rest not attempted); None when all is allowed."""
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed)
    topics = {tp.topic for tp in partitions}
    writable = filter_by_authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, topics)
    if len(writable) == len(topics):
        return None
    return {
        tp: ErrorCode.operation_not_attempted
        if tp.topic in writable else ErrorCode.topic_authorization_failed
        for tp in partitions
    }  # fmt: skip


def handle(ctx: RequestContext, request: Request) -> Any:
    from sluice.server.group_runtime import deferred

    body = API.body(request)
    ctx.topic_admin.ensure_transaction_state()
    if request.api_version >= BATCHED_VERSION:
        return _handle_batch(ctx, request)
    txn_id = field(body, "v3_and_below_transactional_id")  # "": INVALID_REQUEST, as Kafka
    producer_id = int(field(body, "v3_and_below_producer_id"))
    epoch = int(field(body, "v3_and_below_producer_epoch"))
    topics = field(body, "v3_and_below_topics")
    partitions = [TopicPartition(t.name, int(p)) for t in topics for p in t.partitions]
    errors = _unauthorized(ctx, txn_id, partitions) or _missing(ctx, partitions)
    if errors is not None:
        return _response(request, errors)
    callback: Callable[[ErrorCode], None]
    callback, result = deferred()
    ctx.txn_coordinator.handle_add_partitions(txn_id, producer_id, epoch, partitions, callback)

    async def respond() -> Any:
        return _response(request, dict.fromkeys(partitions, await result))

    return respond()


def _handle_batch(ctx: RequestContext, request: Request) -> Any:
    """v4+: each transaction added to or verified; one answer for them all."""
    from sluice.server.group_runtime import deferred

    body = API.body(request)
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):  # brokers only, as Kafka
        return build(
            request.response_type, throttle_time=0,
            error_code=ErrorCode.cluster_authorization_failed, results_by_transaction=[],
        )  # fmt: skip
    coordinator = ctx.txn_coordinator
    verdicts: dict[str, dict[TopicPartition, ErrorCode]] = {}
    pending: list[tuple[str, list[TopicPartition], Awaitable[ErrorCode]]] = []
    for txn in field(body, "transactions"):
        txn_id = str(txn.transactional_id)
        partitions = [TopicPartition(t.name, int(p)) for t in txn.topics for p in t.partitions]
        errors = _missing(ctx, partitions)
        if errors is not None:
            verdicts[txn_id] = errors
        elif txn.verify_only:
            verdicts[txn_id] = coordinator.verify_partitions_in_transaction(
                txn_id, int(txn.producer_id), int(txn.producer_epoch), partitions
            )
        else:
            callback: Callable[[ErrorCode], None]
            callback, result = deferred()
            coordinator.handle_add_partitions(
                txn_id, int(txn.producer_id), int(txn.producer_epoch), partitions, callback
            )
            pending.append((txn_id, partitions, result))
    abortable_ok = request.api_version >= TRANSACTION_ABORTABLE_VERSION

    async def respond() -> Any:
        for txn_id, partitions, result in pending:
            verdicts[txn_id] = dict.fromkeys(partitions, await result)
        results = []
        for txn_id, errors in verdicts.items():
            if not abortable_ok:
                errors = {
                    tp: ErrorCode.invalid_txn_state
                    if e == ErrorCode.transaction_abortable else e
                    for tp, e in errors.items()
                }  # fmt: skip
            results.append({"transactional_id": txn_id, "topic_results": _topic_results(errors)})
        return build(
            request.response_type, throttle_time=0, error_code=ErrorCode.none,
            results_by_transaction=results,
        )  # fmt: skip

    return respond()
