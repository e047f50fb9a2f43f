"""ElectLeaders (43): preferred (0) or unclean (1) leader elections, run by the controller.

Only the active controller answers (others: NOT_CONTROLLER, and the admin client asks
the controller named in Metadata); a single node is its own, where no election is ever
needed (:class:`~sluice.server.single_node_controller.SingleNodeController`). Null
``topic_partitions`` means every partition. Each partition's outcome comes back from the
controller (a cluster's on its event thread).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.controller.events import ElectionType, ReplicaLeaderElectionResults
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.protocol.errors import KafkaError
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, authorize_cluster
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.elect_leaders.v0.request as v0
    import kio.schema.elect_leaders.v1.request as v1
    import kio.schema.elect_leaders.v2.request as v2

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.ElectLeadersRequest | v1.ElectLeadersRequest | v2.ElectLeadersRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.ELECT_LEADERS, 0, 2)


def _respond(request: Request, error: ErrorCode, results: dict[TopicPartition, Any]) -> Any:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in sorted(results):
        outcome = results[tp]
        code, message = ErrorCode.none, None
        if isinstance(outcome, KafkaError):
            code, message = ErrorCode(outcome.code), str(outcome) or None
        elif isinstance(outcome, Exception):
            code, message = ErrorCode.unknown_server_error, str(outcome)
        by_topic.setdefault(tp.topic, []).append(
            {"partition_id": tp.partition, "error_code": code, "error_message": message}
        )
    return build(
        request.response_type, throttle_time=0, error_code=error,
        replica_election_results=[
            {"topic": t, "partition_result": ps} for t, ps in by_topic.items()
        ],
    )  # fmt: skip


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    controller = ctx.controller.active_controller
    try:
        election_type = ElectionType(int(getattr(body, "election_type", 0)))
    except ValueError:
        return _respond(request, ErrorCode.invalid_request, {})
    requested = None if body.topic_partitions is None else {
        TopicPartition(t.topic, int(p)) for t in body.topic_partitions for p in t.partitions
    }  # fmt: skip
    if not authorize_cluster(ctx, AclOperation.ALTER):  # as Kafka: every partition too
        denied = KafkaError(code=ErrorCode.cluster_authorization_failed)
        return _respond(
            request, ErrorCode.cluster_authorization_failed, dict.fromkeys(requested or (), denied)
        )
    if controller is None:
        return _respond(request, ErrorCode.not_controller, {})
    partitions = ctx.metadata_cache.all_partitions() if requested is None else requested

    async def respond() -> Any:
        from sluice.server.group_runtime import answer_from_thread

        results: ReplicaLeaderElectionResults = await answer_from_thread(
            lambda done: controller.elect_leaders(partitions, election_type, done)
        )
        return _respond(request, ErrorCode.none, dict(results))

    return respond()
