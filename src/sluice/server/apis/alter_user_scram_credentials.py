"""AlterUserScramCredentials (51), v0: create, replace or delete users' SCRAM credentials.

The client sends, per user and mechanism, the salt, the iteration count and the salted
password (``Hi(password, salt, i)``: the password itself never travels); the broker
derives Kafka's StoredKey and ServerKey from it and keeps the credential
(``ctx.scram_credentials``: a file in the data directory on a single node, ZooKeeper's
``/config/users/<user>`` with a ``/config/changes`` notification in a cluster, which
every broker's cache follows). Kafka's checks answer per user: UNACCEPTABLE_CREDENTIAL
(empty name, iterations outside 4096..16384), UNSUPPORTED_SASL_MECHANISM, DUPLICATE_RESOURCE
(one credential altered twice), RESOURCE_NOT_FOUND (deleting one that does not exist).
Unlike Kafka's ZooKeeper mode, which answers NOT_CONTROLLER on any broker but the
controller, any broker takes the request: ZooKeeper holds the credentials either way.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.security.sasl.credential_store import (
    AlterResult,
    Deletion,
    Upsertion,
    plan_alterations,
)
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, authorize_cluster
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.alter_user_scram_credentials.v0.request as v0

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.AlterUserScramCredentialsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, needs_coordinators=False)

log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    store = ctx.scram_credentials
    upsertions = [
        Upsertion(u.name, int(u.mechanism), int(u.iterations), u.salt, u.salted_password)
        for u in body.upsertions
    ]
    deletions = [Deletion(d.name, int(d.mechanism)) for d in body.deletions]
    if not authorize_cluster(ctx, AclOperation.ALTER):  # as Kafka: every user refused
        denied = ErrorCode.cluster_authorization_failed
        users = dict.fromkeys([u.name for u in upsertions] + [d.name for d in deletions])
        return _response(request, [AlterResult(user, denied) for user in users])
    failed, changes = plan_alterations(upsertions, deletions, store.cache)
    if not changes:
        return _response(request, failed)

    async def persist() -> Any:
        results = list(failed)
        try:
            await asyncio.get_running_loop().run_in_executor(None, store.persist, changes)
        except Exception as exc:
            log.error("SCRAM credentials of %s not stored: %r", sorted(changes), exc)
            results += [
                AlterResult(user, ErrorCode.unknown_server_error, f"not stored: {exc}")
                for user in changes
            ]
        else:
            log.info("SCRAM credentials altered for %s", ", ".join(sorted(changes)))
            results += [AlterResult(user, ErrorCode.none) for user in changes]
        return _response(request, results)

    return persist()


def _response(request: Request, results: list[AlterResult]) -> Any:
    return build(
        request.response_type, throttle_time=0,
        results=[
            {"user": r.user, "error_code": r.error_code, "error_message": r.error_message}
            for r in results
        ],
    )  # fmt: skip
