"""DeleteAcls (31): remove the ACL bindings each filter matches, and say which.

As Kafka: SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED without
ALTER on the CLUSTER, INVALID_REQUEST for every filter when one has an UNKNOWN element. A
binding several filters match is reported under the first. The store (a single node's
file, a cluster's ZooKeeper) is written off the event loop before the answer.

Versions 1-3 (v0 was removed in Kafka 4.0; v1 added pattern types, v2 is flexible).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.security.acl import AclBinding, AclOperation, InvalidAclError
from sluice.server.apis import ApiSpec
from sluice.server.apis.describe_acls import binding_filter
from sluice.server.auth_helper import authorize_cluster
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.delete_acls.v1.request as v1
    import kio.schema.delete_acls.v2.request as v2
    import kio.schema.delete_acls.v3.request as v3

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v1.DeleteAclsRequest | v2.DeleteAclsRequest | v3.DeleteAclsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.DELETE_ACLS, 1, 3, needs_coordinators=False)


def _matching(binding: AclBinding, error: Exception | None) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none if error is None else ErrorCode.unknown_server_error,
        "error_message": None if error is None else str(error),
        "resource_type": int(binding.pattern.resource_type),
        "resource_name": binding.pattern.name,
        "pattern_type": int(binding.pattern.pattern_type),
        "principal": binding.entry.principal,
        "host": binding.entry.host,
        "operation": int(binding.entry.operation),
        "permission_type": int(binding.entry.permission_type),
    }


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    response_type = request.response_type

    def answer(results: list[dict[str, Any]]) -> Any:
        return build(response_type, throttle_time=0, filter_results=results)

    def failed(code: ErrorCode, message: str | None) -> Any:
        return answer(
            [{"error_code": code, "error_message": message, "matching_acls": []}
             for _ in body.filters]
        )  # fmt: skip

    authorizer = ctx.authorizer
    if authorizer is None:
        return failed(ErrorCode.security_disabled, "No Authorizer is configured on the broker")
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return failed(ErrorCode.cluster_authorization_failed, None)
    filters = [binding_filter(f) for f in body.filters]
    try:
        for f in filters:
            f.validate()
    except InvalidAclError as exc:
        return failed(ErrorCode.invalid_request, str(exc))

    async def delete() -> Any:
        loop = asyncio.get_running_loop()
        results = await loop.run_in_executor(None, authorizer.delete_acls, filters)
        return answer(
            [{"error_code": ErrorCode.none, "error_message": None,
              "matching_acls": [_matching(b, e) for b, e in deleted]}
             for deleted in results]
        )  # fmt: skip

    return delete()
