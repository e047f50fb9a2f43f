"""ApiVersions (18): the APIs and versions this broker implements.

The answer lists the broker's version table (``ctx.versions``: every API module's spec).
A request of a version above v4 never gets here (KIP-511): the decoder answers it with
ApiVersions v0, UNSUPPORTED_VERSION and the advertised APIs, and the client retries
with the broker's maximum.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, Request, api_versions_response
from sluice.server.apis import ApiSpec

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.api_versions.v0.request as v0
    import kio.schema.api_versions.v1.request as v1
    import kio.schema.api_versions.v2.request as v2
    import kio.schema.api_versions.v3.request as v3
    import kio.schema.api_versions.v4.request as v4

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.ApiVersionsRequest
        | v1.ApiVersionsRequest
        | v2.ApiVersionsRequest
        | v3.ApiVersionsRequest
        | v4.ApiVersionsRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.API_VERSIONS, 0, 4, needs_coordinators=False)


def handle(ctx: RequestContext, request: Request) -> Any:
    return api_versions_response(ctx.versions, request.api_version)
