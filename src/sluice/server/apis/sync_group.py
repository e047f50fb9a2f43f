"""SyncGroup (14): the leader hands in the assignment; every member gets its own."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, Request
from sluice.protocol.requests import body_of
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from sluice.coordinator.group import SyncGroupResult
    from sluice.server.request_context import RequestContext


def handle(ctx: RequestContext, request: Request) -> Any:
    from sluice.server.group_runtime import deferred

    body = body_of(request, ApiKey.SYNC_GROUP)
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
