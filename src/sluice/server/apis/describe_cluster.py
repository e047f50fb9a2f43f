"""DescribeCluster (60): cluster id, controller and brokers (the admin client's view),
from the metadata cache: a single node is the whole cluster and its own controller.

Without an authorizer every cluster operation is allowed, so when the client asks for the
authorized operations they are all of CLUSTER's, as Kafka answers with no authorizer.

Versions 0-1: v2 adds IncludeFencedBrokers (KIP-1073).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.describe_cluster.v0.request as v0
    import kio.schema.describe_cluster.v1.request as v1

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.DescribeClusterRequest | v1.DescribeClusterRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.DESCRIBE_CLUSTER, 0, 1, needs_coordinators=False)

BROKER_ENDPOINT = 1
OPERATIONS_NOT_REQUESTED = -2147483648  # the schema default, INT32_MIN
# AclOperation codes Kafka supports on the CLUSTER resource: CREATE 5, ALTER 7,
# DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    endpoint_type = field(body, "endpoint_type", BROKER_ENDPOINT)
    common: dict[str, Any] = {"throttle_time": 0, "endpoint_type": endpoint_type}
    if endpoint_type != BROKER_ENDPOINT:
        return build(
            request.response_type, **common,
            error_code=ErrorCode.mismatched_endpoint_type,
            error_message="The request was sent to an endpoint of type BROKER, but we wanted "
            f"an endpoint of type {'CONTROLLER' if endpoint_type == 2 else endpoint_type}",
            cluster_id=ctx.metadata_cache.cluster_id, controller_id=-1, brokers=[],
        )  # fmt: skip
    cache = ctx.metadata_cache
    operations = (
        CLUSTER_OPERATIONS
        if field(body, "include_cluster_authorized_operations", False)
        else OPERATIONS_NOT_REQUESTED
    )
    return build(
        request.response_type, **common,
        error_code=ErrorCode.none,
        error_message=None,
        cluster_id=cache.cluster_id,
        controller_id=cache.controller_id,
        brokers=[
            {"broker_id": b.id, "host": ep.host, "port": ep.port, "rack": b.rack}
            for b, ep in cache.alive_endpoints(ctx.session.listener_name)
        ],
        cluster_authorized_operations=operations,
    )  # fmt: skip
