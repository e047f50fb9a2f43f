"""DescribeGroups (15): state, protocol and members of groups.

Versions 0-5: v6 answers GROUP_ID_NOT_FOUND for an unknown group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize, authorized_operations
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.describe_groups.v0.request as v0
    import kio.schema.describe_groups.v1.request as v1
    import kio.schema.describe_groups.v2.request as v2
    import kio.schema.describe_groups.v3.request as v3
    import kio.schema.describe_groups.v4.request as v4
    import kio.schema.describe_groups.v5.request as v5

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.DescribeGroupsRequest
        | v1.DescribeGroupsRequest
        | v2.DescribeGroupsRequest
        | v3.DescribeGroupsRequest
        | v4.DescribeGroupsRequest
        | v5.DescribeGroupsRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 5)

NOT_REQUESTED = -(2**31)


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    include_ops = bool(field(body, "include_authorized_operations", False))
    groups = []
    for group_id in body.groups:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append({"error_code": ErrorCode.group_authorization_failed,
                           "group_id": group_id, "group_state": "", "protocol_type": "",
                           "protocol_data": "", "members": [],
                           "authorized_operations": NOT_REQUESTED})  # fmt: skip
            continue
        error, summary = ctx.group_coordinator.handle_describe_group(group_id)
        groups.append(
            {
                "error_code": error,
                "group_id": group_id,
                "group_state": summary.state,
                "protocol_type": summary.protocol_type,
                "protocol_data": summary.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in summary.members
                ],
                "authorized_operations": authorized_operations(
                    ctx, ResourceType.GROUP, group_id, asked=include_ops
                ),
            }
        )
    return build(request.response_type, throttle_time=0, groups=groups)
