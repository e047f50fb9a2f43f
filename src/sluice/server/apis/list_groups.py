"""ListGroups (16): the groups this coordinator knows (v4+: by state, v5+: by type)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize, authorize_cluster
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.list_groups.v0.request as v0
    import kio.schema.list_groups.v1.request as v1
    import kio.schema.list_groups.v2.request as v2
    import kio.schema.list_groups.v3.request as v3
    import kio.schema.list_groups.v4.request as v4
    import kio.schema.list_groups.v5.request as v5

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.ListGroupsRequest
        | v1.ListGroupsRequest
        | v2.ListGroupsRequest
        | v3.ListGroupsRequest
        | v4.ListGroupsRequest
        | v5.ListGroupsRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.LIST_GROUPS, 0, 5)


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    error, groups = ctx.group_coordinator.handle_list_groups(
        field(body, "states_filter", ()), field(body, "types_filter", ())
    )
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):  # as Kafka: those it may describe
        groups = [
            g
            for g in groups
            if authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
        ]
    return build(
        request.response_type,
        throttle_time=0,
        error_code=error,
        groups=[
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": "classic",
            }
            for g in groups
        ],
    )
