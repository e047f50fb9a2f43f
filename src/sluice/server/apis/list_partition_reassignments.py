"""ListPartitionReassignments (46): the reassignments in progress (KIP-455).

Only the active controller answers (others: NOT_CONTROLLER). Null ``topics`` lists
every reassignment; otherwise only the named partitions that are being reassigned are
listed, each with its full replica set and the replicas being added and removed. A
single node without a cluster never has a reassignment in progress.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.controller.events import ApiError
from sluice.controller.model import ReplicaAssignment
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, authorize_cluster
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.list_partition_reassignments.v0.request as v0

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.ListPartitionReassignmentsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0)

Results = Mapping[TopicPartition, ReplicaAssignment] | ApiError


def _respond(request: Request, results: Results) -> Any:
    if isinstance(results, ApiError):
        return build(
            request.response_type, throttle_time=0, error_code=results.code,
            error_message=results.message, topics=[],
        )  # fmt: skip
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in sorted(results):
        a = results[tp]
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "replicas": list(a.replicas),
             "adding_replicas": list(a.adding_replicas),
             "removing_replicas": list(a.removing_replicas)}
        )  # fmt: skip
    return build(
        request.response_type, throttle_time=0, error_code=ErrorCode.none, error_message=None,
        topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    )  # fmt: skip


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    requested = None if body.topics is None else {
        TopicPartition(t.name, int(p)) for t in body.topics for p in t.partition_indexes
    }  # fmt: skip
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return _respond(request, ApiError(ErrorCode.cluster_authorization_failed))
    controller = ctx.controller.active_controller
    if controller is None:
        return _respond(request, ApiError(ErrorCode.not_controller))

    async def respond() -> Any:
        from sluice.server.group_runtime import answer_from_thread

        results: Results = await answer_from_thread(
            lambda done: controller.list_partition_reassignments(requested, done)
        )
        return _respond(request, results)

    return respond()
