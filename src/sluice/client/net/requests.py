"""Request bodies the clients send, built as kio dataclasses for any version.

:func:`build` (from :mod:`sluice.protocol.build`, shared with the broker's
handlers) fills a kio message class from keyword values, so one call site serves
every version. :data:`CLIENT_VERSIONS` is the range of each API the clients
implement; the network client picks the highest version the broker supports.
"""

from __future__ import annotations

import typing
from typing import Final

from kio.static.protocol import RequestPayload

from sluice.protocol import ApiKey
from sluice.protocol.apis import request_type
from sluice.protocol.build import build

__all__ = [
    "CLIENT_SOFTWARE_NAME",
    "CLIENT_SOFTWARE_VERSION",
    "CLIENT_VERSIONS",
    "api_versions_request",
    "build",
    "init_producer_id_request",
    "metadata_request",
]

CLIENT_SOFTWARE_NAME: Final = "sluice-python"
CLIENT_SOFTWARE_VERSION: Final = "0.1.0"

CLIENT_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    ApiKey.PRODUCE: (3, 11),  # v3+ carries magic v2 batches; v12 needs transactions v2
    ApiKey.FETCH: (0, 12),
    ApiKey.LIST_OFFSETS: (0, 7),
    ApiKey.METADATA: (1, 12),
    ApiKey.OFFSET_COMMIT: (0, 8),
    ApiKey.OFFSET_FETCH: (0, 7),
    ApiKey.FIND_COORDINATOR: (0, 3),
    ApiKey.JOIN_GROUP: (0, 7),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 4),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 5),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.SASL_HANDSHAKE: (1, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ELECT_LEADERS: (1, 2),  # v1 adds the election type
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
}
"""API key -> (min, max) version the Sluice clients implement; the network client
sends each request at the highest version both sides support. (The transaction
client names its versions itself.)"""


def api_versions_request(version: int) -> RequestPayload:
    return typing.cast(
        RequestPayload,
        build(
            request_type(ApiKey.API_VERSIONS, version),
            client_software_name=CLIENT_SOFTWARE_NAME,
            client_software_version=CLIENT_SOFTWARE_VERSION,
        ),
    )


def metadata_request(
    version: int, topics: list[str] | None, allow_auto_topic_creation: bool
) -> RequestPayload:
    """Metadata for ``topics`` (None: all topics)."""
    return typing.cast(
        RequestPayload,
        build(
            request_type(ApiKey.METADATA, version),
            topics=None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            allow_auto_topic_creation=allow_auto_topic_creation,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        ),
    )


def init_producer_id_request(
    version: int, producer_id: int = -1, producer_epoch: int = -1
) -> RequestPayload:
    """InitProducerId for an idempotent (non-transactional) producer."""
    return typing.cast(
        RequestPayload,
        build(
            request_type(ApiKey.INIT_PRODUCER_ID, version),
            transactional_id=None,
            transaction_timeout=2**31 - 1,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        ),
    )
