"""Catalogue of the Kafka APIs kio ships: keys, version ranges, flexibility, schemas.

kio 0.6.5 is generated from Apache Kafka 4.1's JSON message specs, so it knows the
APIs and versions a Kafka 4.1 broker knows (versions Kafka 4.0 removed, such as
Produce v0-2 and Fetch v0-3, are absent). Schema modules are imported lazily, one
(API, version) at a time, because importing all of them takes about two seconds.
"""

from __future__ import annotations

import enum
from functools import cache
from typing import Final

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType
from kio.static.protocol import RequestPayload, ResponsePayload

__all__ = [
    "FIRST_FLEXIBLE_VERSIONS",
    "ApiKey",
    "InterBrokerApiKey",
    "first_flexible_version",
    "is_flexible",
    "kio_first_flexible_version",
    "kio_version_range",
    "request_header_version",
    "request_type",
    "response_header_version",
    "response_type",
]


class ApiKey(enum.IntEnum):
    """Kafka API keys, named as in Kafka's ``ApiKeys`` enum (all keys kio knows)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


class InterBrokerApiKey(enum.IntEnum):
    """The ZooKeeper-mode controller's APIs, gone from Kafka 4's schemas and so from kio:
    Sluice's cluster mode encodes them by hand (``sluice.server.inter_broker``)."""

    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7


def kio_version_range(api_key: int) -> tuple[int, int] | None:
    """The (min, max) request versions kio can decode for ``api_key``, or None."""
    return _KIO_RANGES.get(api_key)


def _kio_ranges() -> dict[int, tuple[int, int]]:
    ranges: dict[int, tuple[int, int]] = {}
    for key, name in api_key_map.items():
        versions = [
            version
            for version, entities in schema_name_map[name].items()
            if EntityType.request in entities and EntityType.response in entities
        ]
        if versions:
            ranges[key] = (min(versions), max(versions))
    return ranges


_KIO_RANGES: Final = _kio_ranges()


@cache
def request_type(api_key: int, api_version: int) -> type[RequestPayload]:
    """kio's request dataclass for (api_key, api_version).

    :raises KeyError: if kio has no such schema.
    """
    _check_in_range(api_key, api_version)
    return load_request_schema(api_key, api_version)


@cache
def response_type(api_key: int, api_version: int) -> type[ResponsePayload]:
    """kio's response dataclass for (api_key, api_version).

    :raises KeyError: if kio has no such schema.
    """
    _check_in_range(api_key, api_version)
    return load_response_schema(api_key, api_version)


def _check_in_range(api_key: int, api_version: int) -> None:
    span = kio_version_range(api_key)
    if span is None or not span[0] <= api_version <= span[1]:
        raise KeyError(f"kio has no schema for API key {api_key} version {api_version}")


# API key -> the first flexible version, Kafka 4.1's "flexibleVersions" as kio 0.6.5's
# schemas have them (None: never flexible). Finding it in kio imports a few schema
# modules per API, 10-20 ms on the first request of each API: a broker's first answer
# would wait for that. tests/protocol/test_protocol_headers.py checks it against kio.
FIRST_FLEXIBLE_VERSIONS: Final[dict[int, int | None]] = {
    0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3,
    17: None, 18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 23: 4, 24: 3, 25: 3, 26: 3, 27: 1, 28: 3,
    29: 2, 30: 2, 31: 2, 32: 4, 33: 2, 34: 2, 35: 2, 36: 2, 37: 2, 38: 2, 39: 2, 40: 2,
    41: 2, 42: 2, 43: 2, 44: 1, 45: 0, 46: 0, 47: None, 48: 1, 49: 1, 50: 0, 51: 0, 52: 0,
    53: 1, 54: 1, 55: 0, 56: 2, 57: 0, 58: 0, 59: 0, 60: 0, 61: 0, 62: 0, 63: 0, 64: 0,
    65: 0, 66: 0, 67: 0, 68: 0, 69: 0, 70: 0, 71: 0, 72: 0, 73: 0, 74: 0, 75: 0, 76: 1,
    77: 1, 78: 1, 79: 1, 80: 0, 81: 0, 82: 0, 83: 0, 84: 0, 85: 0, 86: 0, 87: 0, 88: 0,
    89: 0, 90: 0, 91: 0, 92: 0,
}  # fmt: skip


@cache
def first_flexible_version(api_key: int) -> int | None:
    """The first flexible (KIP-482) version of ``api_key`` kio knows, or None.

    Kafka's flexible ranges are always open-ended ("N+"), so every later version,
    including ones newer than kio knows, is flexible too.
    """
    if api_key in FIRST_FLEXIBLE_VERSIONS:
        return FIRST_FLEXIBLE_VERSIONS[api_key]
    return kio_first_flexible_version(api_key)


def kio_first_flexible_version(api_key: int) -> int | None:
    """:func:`first_flexible_version` found in kio's schemas (importing some of them)."""
    span = kio_version_range(api_key)
    if span is None:
        return None
    low, high = span
    if not request_type(api_key, high).__flexible__:
        return None
    while low < high:  # binary search: flexibility is monotonic in the version
        mid = (low + high) // 2
        if request_type(api_key, mid).__flexible__:
            high = mid
        else:
            low = mid + 1
    return low


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether (api_key, api_version) uses the flexible encoding (compact types, tags).

    Versions below kio's minimum are judged by the minimum version (a guess that
    only matters for logging: such requests are rejected).
    """
    first = first_flexible_version(api_key)
    return first is not None and api_version >= first


@cache
def request_header_version(api_key: int, api_version: int) -> int:
    """The request header version Kafka uses: 2 for flexible versions, else 1.

    Request header v0 (no client id) was only used by ControlledShutdown v0
    (API key 7), which Kafka 4.0 removed; it is returned for that case alone.
    """
    if api_key == 7 and api_version == 0:
        return 0
    return 2 if is_flexible(api_key, api_version) else 1


@cache
def response_header_version(api_key: int, api_version: int) -> int:
    """The response header version Kafka uses: 1 for flexible versions, else 0.

    ApiVersions responses always use v0, whatever the version, so that a client can
    read the error code even when the broker did not understand its request.
    """
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0
