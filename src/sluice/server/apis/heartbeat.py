"""Heartbeat (12): a member is alive; tells it when the group rebalances.

Versions 0-4. The minimum stays at 0: librdkafka before 2.11.1 enables consumer groups
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

    import kio.schema.heartbeat.v0.request as v0
    import kio.schema.heartbeat.v1.request as v1
    import kio.schema.heartbeat.v2.request as v2
    import kio.schema.heartbeat.v3.request as v3
    import kio.schema.heartbeat.v4.request as v4

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.HeartbeatRequest
        | v1.HeartbeatRequest
        | v2.HeartbeatRequest
        | v3.HeartbeatRequest
        | v4.HeartbeatRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.HEARTBEAT, 0, 4)


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return build(
            request.response_type, throttle_time=0, error_code=ErrorCode.group_authorization_failed
        )
    error = ctx.group_coordinator.handle_heartbeat(
        body.group_id, body.member_id, field(body, "group_instance_id"), int(body.generation_id)
    )
    return build(request.response_type, throttle_time=0, error_code=error)
