"""DescribeUserScramCredentials (50), v0: which SCRAM mechanisms each user has a
credential for, and their iteration counts (never the keys).

No users (null or empty) lists every user with a credential, sorted; named users are
answered once each, in request order: RESOURCE_NOT_FOUND for one without a credential
(or an empty name), DUPLICATE_RESOURCE for one named twice — Kafka's messages. Read from
this broker's credential cache, which follows ZooKeeper in a cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.security.sasl.credential_store import describe
from sluice.security.sasl.scram import mechanism_type
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, authorize_cluster
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.describe_user_scram_credentials.v0.request as v0

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.DescribeUserScramCredentialsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, needs_coordinators=False)


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):  # as Kafka
        return build(
            request.response_type, throttle_time=0,
            error_code=ErrorCode.cluster_authorization_failed, error_message=None, results=[],
        )  # fmt: skip
    users = None if body.users is None else [u.name for u in body.users]
    results = describe(ctx.scram_credentials.cache, users)
    return build(
        request.response_type, throttle_time=0, error_code=ErrorCode.none, error_message=None,
        results=[
            {
                "user": r.user, "error_code": r.error_code, "error_message": r.error_message,
                "credential_infos": [
                    {"mechanism": mechanism_type(m), "iterations": i} for m, i in r.credentials
                ],
            }
            for r in results
        ],
    )  # fmt: skip
