"""DescribeAcls (29): the ACL bindings a filter matches, grouped by resource pattern.

As Kafka: SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED without
DESCRIBE on the CLUSTER, INVALID_REQUEST for a filter with an UNKNOWN element. The
pattern type filter ``MATCH`` returns every pattern that applies to the named resource.

Versions 1-3 (v0 was removed in Kafka 4.0; v1 added pattern types, v2 is flexible).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.security.acl import (
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAclError,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import authorize_cluster
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.describe_acls.v1.request as v1
    import kio.schema.describe_acls.v2.request as v2
    import kio.schema.describe_acls.v3.request as v3

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v1.DescribeAclsRequest | v2.DescribeAclsRequest | v3.DescribeAclsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.DESCRIBE_ACLS, 1, 3, needs_coordinators=False)


def binding_filter(item: Any) -> AclBindingFilter:
    """The filter of a DescribeAcls request or a DeleteAcls filter (same field names)."""
    return AclBindingFilter(
        ResourcePatternFilter(
            ResourceType(ResourceType.from_code(item.resource_type_filter)),
            item.resource_name_filter,
            PatternType(PatternType.from_code(item.pattern_type_filter)),
        ),
        AccessControlEntryFilter(
            item.principal_filter,
            item.host_filter,
            AclOperation(AclOperation.from_code(item.operation)),
            AclPermissionType(AclPermissionType.from_code(item.permission_type)),
        ),
    )


def _resources(bindings: list[AclBinding]) -> list[dict[str, Any]]:
    by_pattern: dict[ResourcePattern, list[dict[str, Any]]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, []).append(
            {"principal": b.entry.principal, "host": b.entry.host,
             "operation": int(b.entry.operation), "permission_type": int(b.entry.permission_type)}
        )  # fmt: skip
    return [
        {"resource_type": int(p.resource_type), "resource_name": p.name,
         "pattern_type": int(p.pattern_type), "acls": acls}
        for p, acls in by_pattern.items()
    ]  # fmt: skip


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)

    def answer(code: ErrorCode, message: str | None, resources: list[dict[str, Any]]) -> Any:
        return build(
            request.response_type, throttle_time=0, error_code=code, error_message=message,
            resources=resources,
        )  # fmt: skip

    authorizer = ctx.authorizer
    if authorizer is None:
        return answer(ErrorCode.security_disabled, "No Authorizer is configured on the broker", [])
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return answer(ErrorCode.cluster_authorization_failed, None, [])
    filter_ = binding_filter(body)
    try:
        filter_.validate()
    except InvalidAclError as exc:
        return answer(ErrorCode.invalid_request, str(exc), [])
    return answer(ErrorCode.none, None, _resources(authorizer.acls(filter_)))
