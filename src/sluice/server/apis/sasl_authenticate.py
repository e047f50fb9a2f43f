"""SaslAuthenticate (36), v0-v2: one SASL token of the client's exchange, and the
server's challenge (v1+: with the session's lifetime, KIP-368).

Before a connection on a SASL listener is authenticated, and while it re-authenticates,
its authenticator (:mod:`sluice.security.sasl.authenticator`) answers these: the
mechanism's challenge, SASL_AUTHENTICATION_FAILED with Kafka's message on failure (the
connection then closes after ``connection.failed.authentication.delay.ms``), and
``session_lifetime_ms`` once authenticated.

One that reaches this handler - after authentication, or on a listener without SASL —
is answered ILLEGAL_SASL_STATE, as Kafka's ``KafkaApis`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.sasl_authenticate.v0.request as v0
    import kio.schema.sasl_authenticate.v1.request as v1
    import kio.schema.sasl_authenticate.v2.request as v2

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.SaslAuthenticateRequest | v1.SaslAuthenticateRequest | v2.SaslAuthenticateRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.SASL_AUTHENTICATE, 0, 2, needs_coordinators=False)


def handle(ctx: RequestContext, request: Request) -> Any:
    API.body(request)
    return build(
        request.response_type, error_code=ErrorCode.illegal_sasl_state,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"", session_lifetime=0,
    )  # fmt: skip
