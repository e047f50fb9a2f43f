"""LeaveGroup (13): members leave a group (v3+: several, possibly by instance id).

Versions 0-5. The minimum stays at 0: librdkafka before 2.11.1 enables consumer groups
only if the range holds v0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.leave_group.v0.request as v0
    import kio.schema.leave_group.v1.request as v1
    import kio.schema.leave_group.v2.request as v2
    import kio.schema.leave_group.v3.request as v3
    import kio.schema.leave_group.v4.request as v4
    import kio.schema.leave_group.v5.request as v5

    from sluice.coordinator.group import MemberIdentity
    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.LeaveGroupRequest
        | v1.LeaveGroupRequest
        | v2.LeaveGroupRequest
        | v3.LeaveGroupRequest
        | v4.LeaveGroupRequest
        | v5.LeaveGroupRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.LEAVE_GROUP, 0, 5)


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return build(
            request.response_type, throttle_time=0,
            error_code=ErrorCode.group_authorization_failed, members=[],
        )  # fmt: skip
    coordinator = ctx.group_coordinator
    if request.api_version < 3:
        group_error, errors = coordinator.handle_leave_group(
            body.group_id, [(field(body, "member_id"), None)]
        )
        error = group_error if group_error != ErrorCode.none or not errors else errors[0]
        return build(request.response_type, throttle_time=0, error_code=error)
    members = field(body, "members")  # v3+
    leaving: list[MemberIdentity] = [(m.member_id, m.group_instance_id) for m in members]
    reasons = {field(m, "reason") for m in members} - {None}
    group_error, errors = coordinator.handle_leave_group(
        body.group_id, leaving, next(iter(reasons)) if len(reasons) == 1 else None
    )
    members = [
        {"member_id": member_id, "group_instance_id": instance_id, "error_code": code}
        for (member_id, instance_id), code in zip(leaving, errors, strict=False)
    ]
    return build(request.response_type, throttle_time=0, error_code=group_error, members=members)
