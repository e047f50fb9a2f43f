"""AlterPartitionReassignments (45): move partitions to new replicas (KIP-455).

Only the active controller answers (others: NOT_CONTROLLER at the top level, and the
admin client asks the controller named in Metadata). Each partition names its target
replicas, or null to cancel the reassignment in progress; the outcome per partition
comes back from the controller's event thread once the reassignment has *started*
(ListPartitionReassignments shows it until the new replicas joined the ISR).

A single node without a cluster is its own controller and answers as a one-broker Kafka
cluster would (:class:`~sluice.server.single_node_controller.SingleNodeController`).

Version 0, as Kafka 3.9: v1 (Kafka 4.1) adds AllowReplicationFactorChange; a reassignment
may change the replication factor, as v0 always could.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.controller.events import ApiError
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, authorize_cluster
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.alter_partition_reassignments.v0.request as v0

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.AlterPartitionReassignmentsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0)

Results = Mapping[TopicPartition, ApiError] | ApiError


def _respond(request: Request, results: Results) -> Any:
    if isinstance(results, ApiError):
        return build(
            request.response_type, throttle_time=0, error_code=results.code,
            error_message=results.message, responses=[],
        )  # fmt: skip
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in sorted(results):
        error = results[tp]
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": error.code,
             "error_message": error.message}
        )  # fmt: skip
    return build(
        request.response_type, throttle_time=0, error_code=ErrorCode.none, error_message=None,
        responses=[{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    )  # fmt: skip


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    reassignments: dict[TopicPartition, tuple[int, ...] | None] = {
        TopicPartition(t.name, int(p.partition_index)): (
            None if p.replicas is None else tuple(int(r) for r in p.replicas)
        )
        for t in body.topics
        for p in t.partitions
    }
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return _respond(request, ApiError(ErrorCode.cluster_authorization_failed))
    controller = ctx.controller.active_controller
    if controller is None:
        return _respond(request, ApiError(ErrorCode.not_controller))

    async def respond() -> Any:
        from sluice.server.group_runtime import answer_from_thread

        results: Results = await answer_from_thread(
            lambda done: controller.alter_partition_reassignments(reassignments, done)
        )
        return _respond(request, results)

    return respond()
