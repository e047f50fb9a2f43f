"""JoinGroup (11): join a classic group and wait for the rebalance to complete.

Versions 0-9. The minimum stays at 0: librdkafka before 2.11.1 enables consumer groups
only if the range holds v0.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize
from sluice.server.messages import build, field, ms

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.join_group.v0.request as v0
    import kio.schema.join_group.v1.request as v1
    import kio.schema.join_group.v2.request as v2
    import kio.schema.join_group.v3.request as v3
    import kio.schema.join_group.v4.request as v4
    import kio.schema.join_group.v5.request as v5
    import kio.schema.join_group.v6.request as v6
    import kio.schema.join_group.v7.request as v7
    import kio.schema.join_group.v8.request as v8
    import kio.schema.join_group.v9.request as v9

    from sluice.coordinator.group import JoinGroupResult
    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.JoinGroupRequest
        | v1.JoinGroupRequest
        | v2.JoinGroupRequest
        | v3.JoinGroupRequest
        | v4.JoinGroupRequest
        | v5.JoinGroupRequest
        | v6.JoinGroupRequest
        | v7.JoinGroupRequest
        | v8.JoinGroupRequest
        | v9.JoinGroupRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.JOIN_GROUP, 0, 9)


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

    body = API.body(request)
    version = request.api_version
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return build(
            request.response_type, throttle_time=0,
            error_code=ErrorCode.group_authorization_failed, generation_id=-1,
            protocol_type=None, protocol_name=None if version >= 7 else "", leader="",
            member_id=body.member_id, members=[],
        )  # fmt: skip
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
