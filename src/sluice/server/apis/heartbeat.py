"""Heartbeat (12): a member is alive; tells it when the group rebalances."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, Request
from sluice.protocol.requests import body_of
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from sluice.server.request_context import RequestContext


def handle(ctx: RequestContext, request: Request) -> Any:
    body = body_of(request, ApiKey.HEARTBEAT)
    error = ctx.group_coordinator.handle_heartbeat(
        body.group_id, body.member_id, field(body, "group_instance_id"), int(body.generation_id)
    )
    return build(request.response_type, throttle_time=0, error_code=error)
