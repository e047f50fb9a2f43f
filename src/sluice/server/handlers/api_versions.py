"""ApiVersions (18): the APIs and versions this broker implements."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import Request, api_versions_response

if TYPE_CHECKING:
    from sluice.server.broker import Broker


def handle(broker: Broker, request: Request) -> Any:
    return api_versions_response(broker.versions, request.api_version)
