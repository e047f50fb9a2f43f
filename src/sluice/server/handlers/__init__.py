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
        alter_configs,
        api_versions,
        create_partitions,
        create_topics,
        delete_records,
        delete_topics,
        describe_cluster,
        describe_configs,
        fetch,
        incremental_alter_configs,
        list_offsets,
        metadata,
        offset_for_leader_epoch,
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
        ApiKey.DELETE_RECORDS: delete_records.handle,
        ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch.handle,
        ApiKey.DESCRIBE_CONFIGS: describe_configs.handle,
        ApiKey.ALTER_CONFIGS: alter_configs.handle,
        ApiKey.CREATE_PARTITIONS: create_partitions.handle,
        ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs.handle,
        ApiKey.DESCRIBE_CLUSTER: describe_cluster.handle,
    }
