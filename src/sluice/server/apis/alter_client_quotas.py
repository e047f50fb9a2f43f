"""AlterClientQuotas (49): set or remove user / client-id quotas.

Each entry names an entity (user, client-id or both; a null name is the default) and
its operations on ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``
and ``controller_mutation_rate``. Entries succeed or fail on their own, with Kafka's
INVALID_REQUEST messages for an empty entity, an empty name, an unknown entity type or
key, and a fraction given to a LONG key; Sluice also refuses values that are not
positive numbers, and IP entities (it has no connection-rate quotas). ``validate_only``
checks without storing. Stored as :mod:`sluice.server.client_quotas` says; the quotas
apply at once on this broker and within a second on the others of a cluster.

Versions 0-1 (v1 is v0, flexible).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.quota import InvalidRequest
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, authorize_cluster
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.alter_client_quotas.v0.request as v0
    import kio.schema.alter_client_quotas.v1.request as v1

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.AlterClientQuotasRequest | v1.AlterClientQuotasRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, needs_coordinators=False)

log = logging.getLogger(__name__)


def _error(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, InvalidRequest):
        return ErrorCode.invalid_request, str(exc)
    log.error("altering client quotas failed", exc_info=exc)
    return ErrorCode.unknown_server_error, f"{type(exc).__name__}: {exc}"


async def _alter(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    quotas = ctx.quotas
    assert quotas is not None, "the broker sets the client quotas"
    entries = [
        (
            [(e.entity_type, e.entity_name) for e in entry.entity],
            [(op.key, float(op.value), bool(op.remove)) for op in entry.ops],
        )
        for entry in body.entries
    ]
    out: list[dict[str, Any]] = []
    if not authorize_cluster(ctx, AclOperation.ALTER_CONFIGS):  # as Kafka: every entry
        denied = ErrorCode.cluster_authorization_failed
        out = [{"error_code": denied, "error_message": None,
                "entity": [{"entity_type": t, "entity_name": n} for t, n in components]}
               for components, _ in entries]  # fmt: skip
        return build(request.response_type, throttle_time=0, entries=out)
    results = await quotas.alter(entries, bool(body.validate_only))
    for components, exc in results:
        code, message = (ErrorCode.none, None) if exc is None else _error(exc)
        out.append(
            {
                "error_code": code,
                "error_message": message,
                "entity": [{"entity_type": t, "entity_name": n} for t, n in components],
            }
        )
    return build(request.response_type, throttle_time=0, entries=out)


def handle(ctx: RequestContext, request: Request) -> Any:
    return _alter(ctx, request)
