"""ApiVersions (18): the APIs and versions this broker implements."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import Request, api_versions_response

if TYPE_CHECKING:
    from sluice.server.request_context import RequestContext


def handle(ctx: RequestContext, request: Request) -> Any:
    return api_versions_response(ctx.versions, request.api_version)
