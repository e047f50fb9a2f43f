"""DeleteGroups (42): delete empty groups and their committed offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, filter_by_authorized
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.delete_groups.v0.request as v0
    import kio.schema.delete_groups.v1.request as v1
    import kio.schema.delete_groups.v2.request as v2

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.DeleteGroupsRequest | v1.DeleteGroupsRequest | v2.DeleteGroupsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.DELETE_GROUPS, 0, 2)


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    names = list(dict.fromkeys(body.groups_names))
    allowed = filter_by_authorized(ctx, AclOperation.DELETE, ResourceType.GROUP, names)
    errors = ctx.group_coordinator.handle_delete_groups([g for g in names if g in allowed])
    errors.update({g: ErrorCode.group_authorization_failed for g in names if g not in allowed})
    return build(
        request.response_type,
        throttle_time=0,
        results=[{"group_id": g, "error_code": errors[g]} for g in names],
    )
