"""WriteTxnMarkers (27): the transaction coordinator asks the leader of each partition of
a transaction to append its COMMIT or ABORT marker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, authorize_cluster
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.write_txn_markers.v1.request as v1

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v1.WriteTxnMarkersRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.WRITE_TXN_MARKERS, 1, 1)


def _settle(future: asyncio.Future[ErrorCode]) -> Callable[[ErrorCode], None]:
    """The marker write's callback: sets ``future`` once."""

    def done(error: ErrorCode) -> None:
        if not future.done():
            future.set_result(error)

    return done


def handle(ctx: RequestContext, request: Request) -> Any:
    from sluice.server.txn_runtime import write_marker

    body = API.body(request)
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):  # brokers only, as Kafka
        code = ErrorCode.cluster_authorization_failed
        return build(
            request.response_type,
            markers=[
                {"producer_id": m.producer_id,
                 "topics": [{"name": t.name, "partitions": [
                     {"partition_index": p, "error_code": code} for p in t.partition_indexes]}
                     for t in m.topics]}
                for m in body.markers
            ],
        )  # fmt: skip
    loop = asyncio.get_running_loop()
    pending: list[tuple[int, TopicPartition, asyncio.Future[ErrorCode]]] = []
    for marker in body.markers:
        for topic in marker.topics:
            for p in topic.partition_indexes:
                tp = TopicPartition(topic.name, int(p))
                future: asyncio.Future[ErrorCode] = loop.create_future()
                pending.append((int(marker.producer_id), tp, future))
                write_marker(
                    ctx.replica_manager, ctx.group_coordinator, ctx.config["request.timeout.ms"],
                    tp, int(marker.producer_id), int(marker.producer_epoch),
                    bool(marker.transaction_result), int(marker.coordinator_epoch),
                    _settle(future),
                )  # fmt: skip

    async def respond() -> Any:
        by_producer: dict[int, dict[str, list[dict[str, Any]]]] = {}
        for producer_id, tp, future in pending:
            error = await future
            by_producer.setdefault(producer_id, {}).setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "error_code": error}
            )
        markers = [
            {
                "producer_id": pid,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            }
            for pid, topics in by_producer.items()
        ]
        return build(request.response_type, markers=markers)

    return respond()
