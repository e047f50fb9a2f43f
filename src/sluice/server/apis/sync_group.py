"""SyncGroup (14): the leader hands in the assignment; every member gets its own.

Versions 0-5. The minimum stays at 0: librdkafka before 2.11.1 enables consumer groups
only if the range holds v0.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.sync_group.v0.request as v0
    import kio.schema.sync_group.v1.request as v1
    import kio.schema.sync_group.v2.request as v2
    import kio.schema.sync_group.v3.request as v3
    import kio.schema.sync_group.v4.request as v4
    import kio.schema.sync_group.v5.request as v5

    from sluice.coordinator.group import SyncGroupResult
    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.SyncGroupRequest
        | v1.SyncGroupRequest
        | v2.SyncGroupRequest
        | v3.SyncGroupRequest
        | v4.SyncGroupRequest
        | v5.SyncGroupRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.SYNC_GROUP, 0, 5)


def handle(ctx: RequestContext, request: Request) -> Any:
    from sluice.server.group_runtime import deferred

    body = API.body(request)
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return build(
            request.response_type, throttle_time=0,
            error_code=ErrorCode.group_authorization_failed, protocol_type=None,
            protocol_name=None, assignment=b"",
        )  # fmt: skip
    callback: Callable[[SyncGroupResult], None]
    result: Awaitable[SyncGroupResult]
    callback, result = deferred()
    ctx.group_coordinator.handle_sync_group(
        body.group_id,
        int(body.generation_id),
        body.member_id,
        field(body, "protocol_type"),
        field(body, "protocol_name"),
        field(body, "group_instance_id"),
        {a.member_id: a.assignment for a in body.assignments},
        callback,
    )

    async def respond() -> Any:
        r = await result
        return build(
            request.response_type,
            throttle_time=0,
            error_code=r.error,
            protocol_type=r.protocol_type,
            protocol_name=r.protocol_name,
            assignment=r.assignment,
        )

    return respond()
