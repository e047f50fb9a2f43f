"""DeleteGroups (42): delete empty groups and their committed offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, Request
from sluice.protocol.requests import body_of
from sluice.server.messages import build

if TYPE_CHECKING:
    from sluice.server.request_context import RequestContext


def handle(ctx: RequestContext, request: Request) -> Any:
    body = body_of(request, ApiKey.DELETE_GROUPS)
    names = list(dict.fromkeys(body.groups_names))
    errors = ctx.group_coordinator.handle_delete_groups(names)
    return build(
        request.response_type,
        throttle_time=0,
        results=[{"group_id": g, "error_code": errors[g]} for g in names],
    )
