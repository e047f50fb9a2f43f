"""DescribeClientQuotas (48): the stored quotas of the entities a filter matches.

Each filter component names an entity type (``user``, ``client-id``) and matches an
exact name (0), the default (1) or any named entity (2); ``strict`` leaves out entities
with parts the filter does not mention. A bad filter is answered as Kafka answers it:
INVALID_REQUEST for a duplicate or empty type, a bad match type or IP mixed with user /
client-id, UNSUPPORTED_VERSION for an unknown type. Sluice stores no IP quotas, so an
``ip`` filter matches nothing.

Versions 0-1 (v1 is v0, flexible).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.quota import FilterComponent, InvalidRequest, UnsupportedEntityType
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, authorize_cluster
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.describe_client_quotas.v0.request as v0
    import kio.schema.describe_client_quotas.v1.request as v1

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.DescribeClientQuotasRequest | v1.DescribeClientQuotasRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, needs_coordinators=False)


async def _describe(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    quotas = ctx.quotas
    assert quotas is not None, "the broker sets the client quotas"
    if not authorize_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):  # as Kafka
        code = ErrorCode.cluster_authorization_failed
        return build(request.response_type, throttle_time=0, error_code=code,
                     error_message=None, entries=None)  # fmt: skip
    components = [FilterComponent(c.entity_type, int(c.match_type), c.match)
                  for c in body.components]  # fmt: skip
    try:
        found = await quotas.describe(components, bool(body.strict))
    except (InvalidRequest, UnsupportedEntityType) as exc:
        code = (
            ErrorCode.invalid_request if isinstance(exc, InvalidRequest)
            else ErrorCode.unsupported_version
        )  # fmt: skip
        return build(request.response_type, throttle_time=0, error_code=code,
                     error_message=str(exc), entries=None)  # fmt: skip
    entries = [
        {
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.components()],
            "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
        }
        for entity, values in found.items()
    ]
    return build(request.response_type, throttle_time=0, error_code=ErrorCode.none,
                 error_message=None, entries=entries)  # fmt: skip


def handle(ctx: RequestContext, request: Request) -> Any:
    return _describe(ctx, request)
