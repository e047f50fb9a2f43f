"""Request handlers: one module per API, each ``handle(broker, request) -> response``.

A handler turns a decoded request (kio's dataclass for its version) into a
response dataclass of the same version, or an awaitable of one, or None when
the request gets no response (acks=0 produce). State lives in the broker's
replica manager, logs and registries, never here. Adding an API is adding a
module and a line below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.protocol import ApiKey

__all__ = ["build_handlers"]


def build_handlers() -> dict[int, Callable[..., Any]]:
    """API key -> handler function; the broker advertises exactly these APIs."""
    from sluice.server.handlers import (
        api_versions,
        create_topics,
        delete_topics,
        fetch,
        list_offsets,
        metadata,
        produce,
    )

    return {
        ApiKey.API_VERSIONS: api_versions.handle,
        ApiKey.METADATA: metadata.handle,
        ApiKey.PRODUCE: produce.handle,
        ApiKey.FETCH: fetch.handle,
        ApiKey.LIST_OFFSETS: list_offsets.handle,
        ApiKey.CREATE_TOPICS: create_topics.handle,
        ApiKey.DELETE_TOPICS: delete_topics.handle,
    }
