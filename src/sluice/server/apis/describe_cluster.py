"""DescribeCluster (60): cluster id, controller and brokers (the admin client's view),
from the metadata cache: a single node is the whole cluster and its own controller.

As in Kafka, DescribeCluster itself needs no ACL. The authorized operations, when asked
for, are those the principal has on the CLUSTER if it may DESCRIBE it (none otherwise);
without an authorizer, all of CLUSTER's.

Versions 0-1: v2 adds IncludeFencedBrokers (KIP-1073).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.security.acl import CLUSTER_NAME
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize_cluster,
    authorized_operations,
)
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.describe_cluster.v0.request as v0
    import kio.schema.describe_cluster.v1.request as v1

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.DescribeClusterRequest | v1.DescribeClusterRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.DESCRIBE_CLUSTER, 0, 1, needs_coordinators=False)

BROKER_ENDPOINT = 1


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
    operations = authorized_operations(
        ctx, ResourceType.CLUSTER, CLUSTER_NAME,
        asked=bool(field(body, "include_cluster_authorized_operations", False)),
    )  # fmt: skip
    if operations >= 0 and not authorize_cluster(ctx, AclOperation.DESCRIBE):
        operations = 0  # as Kafka: DescribeCluster itself needs no ACL
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
