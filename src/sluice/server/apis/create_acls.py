"""CreateAcls (30): add ACL bindings to the authorizer.

As Kafka: SECURITY_DISABLED when the broker has no authorizer, CLUSTER_AUTHORIZATION_FAILED
without ALTER on the CLUSTER, and per binding INVALID_REQUEST for one Kafka refuses (an
empty resource name, a CLUSTER resource not named ``kafka-cluster``, an ANY or UNKNOWN
element, a principal that is no ``Type:name``). The bindings are written to the ACL store
(a single node's file, a cluster's ZooKeeper) off the event loop before the answer.

Versions 1-3 (v0 was removed in Kafka 4.0; v1 added PREFIXED patterns, v2 is flexible).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    InvalidAclError,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import authorize_cluster
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.create_acls.v1.request as v1
    import kio.schema.create_acls.v2.request as v2
    import kio.schema.create_acls.v3.request as v3

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v1.CreateAclsRequest | v2.CreateAclsRequest | v3.CreateAclsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.CREATE_ACLS, 1, 3, needs_coordinators=False)


def _binding(creation: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType(ResourceType.from_code(creation.resource_type)),
            creation.resource_name,
            PatternType(PatternType.from_code(creation.resource_pattern_type)),
        ),
        AccessControlEntry(
            creation.principal,
            creation.host,
            AclOperation(AclOperation.from_code(creation.operation)),
            AclPermissionType(AclPermissionType.from_code(creation.permission_type)),
        ),
    )


def _result(error: Exception | None) -> dict[str, Any]:
    if error is None:
        return {"error_code": ErrorCode.none, "error_message": None}
    if isinstance(error, InvalidAclError):
        return {"error_code": ErrorCode.invalid_request, "error_message": str(error)}
    return {"error_code": ErrorCode.unknown_server_error, "error_message": str(error)}


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    response_type = request.response_type

    def answer(results: list[dict[str, Any]]) -> Any:
        return build(response_type, throttle_time=0, results=results)

    authorizer = ctx.authorizer
    if authorizer is None:
        message = "No Authorizer is configured on the broker"
        return answer(
            [{"error_code": ErrorCode.security_disabled, "error_message": message}
             for _ in body.creations]
        )  # fmt: skip
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return answer(
            [{"error_code": ErrorCode.cluster_authorization_failed, "error_message": None}
             for _ in body.creations]
        )  # fmt: skip
    bindings = [_binding(c) for c in body.creations]

    async def create() -> Any:
        loop = asyncio.get_running_loop()
        errors = await loop.run_in_executor(None, authorizer.create_acls, bindings)
        return answer([_result(e) for e in errors])

    return create()
