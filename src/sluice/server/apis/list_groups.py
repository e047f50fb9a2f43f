"""ListGroups (16): the groups this coordinator knows (v4+: by state, v5+: by type)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, Request
from sluice.protocol.requests import body_of
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from sluice.server.request_context import RequestContext


def handle(ctx: RequestContext, request: Request) -> Any:
    body = body_of(request, ApiKey.LIST_GROUPS)
    error, groups = ctx.group_coordinator.handle_list_groups(
        field(body, "states_filter", ()), field(body, "types_filter", ())
    )
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
