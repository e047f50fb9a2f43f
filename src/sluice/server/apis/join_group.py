"""JoinGroup (11): join a classic group and wait for the rebalance to complete."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, Request
from sluice.protocol.requests import body_of
from sluice.server.messages import build, field, ms

if TYPE_CHECKING:
    from sluice.coordinator.group import JoinGroupResult
    from sluice.server.request_context import RequestContext


def _response(request: Request, r: JoinGroupResult) -> Any:
    # Before v7 the protocol name is not nullable.
    protocol_name = r.protocol_name if request.api_version >= 7 else (r.protocol_name or "")
    return build(
        request.response_type,
        throttle_time=0,
        error_code=r.error,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        protocol_name=protocol_name,
        leader=r.leader_id,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=[
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata,
            }
            for m in r.members
        ],
    )


def handle(ctx: RequestContext, request: Request) -> Any:
    from sluice.coordinator.group import JoinGroupRequestData
    from sluice.server.group_runtime import deferred

    body = body_of(request, ApiKey.JOIN_GROUP)
    version = request.api_version
    session_timeout_ms = ms(body.session_timeout)
    instance_id = field(body, "group_instance_id")
    data = JoinGroupRequestData(
        group_id=body.group_id,
        member_id=body.member_id,
        group_instance_id=instance_id,
        protocol_type=body.protocol_type,
        protocols=[(p.name, p.metadata) for p in body.protocols],
        session_timeout_ms=session_timeout_ms,
        # v0 has no rebalance timeout: the session timeout serves for both.
        rebalance_timeout_ms=ms(field(body, "rebalance_timeout", session_timeout_ms)),
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
        require_known_member_id=version >= 4 and instance_id is None,
        support_skipping_assignment=version >= 9,
        reason=field(body, "reason"),
    )
    callback: Callable[[JoinGroupResult], None]
    result: Awaitable[JoinGroupResult]
    callback, result = deferred()
    ctx.group_coordinator.handle_join_group(data, callback)

    async def respond() -> Any:
        return _response(request, await result)

    return respond()
