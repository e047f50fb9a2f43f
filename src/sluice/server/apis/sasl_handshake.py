"""SaslHandshake (17), v0-v1: the SASL mechanism a client will authenticate with.

On a SASL_PLAINTEXT or SASL_SSL listener the connection's authenticator
(:mod:`sluice.security.sasl.authenticator`) answers SaslHandshake before the
connection is authenticated, and again when a client that used SaslAuthenticate v1+
re-authenticates (KIP-368): it answers with the listener's enabled mechanisms, and
UNSUPPORTED_SASL_MECHANISM (then closes) for another. After v0 the SASL tokens follow as
raw size-prefixed frames; after v1 they come in SaslAuthenticate requests.

A SaslHandshake that reaches this handler - on a listener without SASL, or on an
authenticated connection that cannot re-authenticate - is answered ILLEGAL_SASL_STATE,
as Kafka's ``KafkaApis`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.sasl_handshake.v0.request as v0
    import kio.schema.sasl_handshake.v1.request as v1

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.SaslHandshakeRequest | v1.SaslHandshakeRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.SASL_HANDSHAKE, 0, 1, needs_coordinators=False)


def handle(ctx: RequestContext, request: Request) -> Any:
    API.body(request)
    return build(request.response_type, error_code=ErrorCode.illegal_sasl_state, mechanisms=[])
