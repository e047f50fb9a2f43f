"""The advertised version table, and ApiVersions responses built from it."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from kio.serial import entity_reader

from sluice.protocol import (
    ApiKey,
    ApiVersionRange,
    ErrorCode,
    VersionTable,
    api_versions_fallback_response,
    api_versions_response,
    encode_response,
    is_valid_client_software,
    kio_version_range,
)
from sluice.server.apis import registry

SERVED = registry().versions  # what a broker accepts and advertises


K = ApiKey

# What the brief requires at least, as (min, max) that must lie within the table.
REQUIRED = {
    K.API_VERSIONS: (0, 3),
    K.METADATA: (0, 12),
    K.PRODUCE: (3, 9),
    K.FETCH: (4, 12),
    K.LIST_OFFSETS: (1, 7),
    K.CREATE_TOPICS: (2, 7),
    K.DELETE_TOPICS: (1, 6),
    K.CREATE_PARTITIONS: (0, 3),
    K.DESCRIBE_CONFIGS: (1, 4),
    K.ALTER_CONFIGS: (0, 2),
    K.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    K.DELETE_RECORDS: (0, 2),
    K.DESCRIBE_CLUSTER: (0, 1),
    K.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    K.FIND_COORDINATOR: (0, 4),
}
ALSO_SERVED = [
    K.JOIN_GROUP, K.SYNC_GROUP, K.HEARTBEAT, K.LEAVE_GROUP, K.OFFSET_COMMIT, K.OFFSET_FETCH,
    K.DESCRIBE_GROUPS, K.LIST_GROUPS, K.DELETE_GROUPS, K.INIT_PRODUCER_ID,
]  # fmt: skip

# Highest version each client sends per API, from their sources (docs/protocol.md).
# librdkafka: master after v2.15.0 (confluent-kafka 2.16 ships librdkafka 2.16.0).
LIBRDKAFKA = {
    K.PRODUCE: 10, K.FETCH: 16, K.LIST_OFFSETS: 7, K.METADATA: 13, K.OFFSET_COMMIT: 9,
    K.OFFSET_FETCH: 9, K.FIND_COORDINATOR: 2, K.JOIN_GROUP: 5, K.HEARTBEAT: 3,
    K.LEAVE_GROUP: 1, K.SYNC_GROUP: 3, K.DESCRIBE_GROUPS: 5, K.LIST_GROUPS: 5,
    K.SASL_HANDSHAKE: 1, K.API_VERSIONS: 3, K.CREATE_TOPICS: 4, K.DELETE_TOPICS: 4,
    K.DELETE_RECORDS: 2, K.INIT_PRODUCER_ID: 4, K.OFFSET_FOR_LEADER_EPOCH: 2,
    K.ADD_PARTITIONS_TO_TXN: 0, K.ADD_OFFSETS_TO_TXN: 0, K.END_TXN: 1,
    K.TXN_OFFSET_COMMIT: 3, K.DESCRIBE_CONFIGS: 1, K.ALTER_CONFIGS: 2,
    K.SASL_AUTHENTICATE: 1, K.CREATE_PARTITIONS: 2, K.DELETE_GROUPS: 2,
    K.INCREMENTAL_ALTER_CONFIGS: 1, K.OFFSET_DELETE: 0,
}  # fmt: skip
KAFKA_PYTHON = {
    K.PRODUCE: 9, K.FETCH: 12, K.LIST_OFFSETS: 11, K.METADATA: 13, K.OFFSET_COMMIT: 8,
    K.OFFSET_FETCH: 8, K.FIND_COORDINATOR: 6, K.JOIN_GROUP: 7, K.HEARTBEAT: 4,
    K.LEAVE_GROUP: 5, K.SYNC_GROUP: 5, K.DESCRIBE_GROUPS: 6, K.LIST_GROUPS: 5,
    K.SASL_HANDSHAKE: 1, K.API_VERSIONS: 4, K.CREATE_TOPICS: 7, K.DELETE_TOPICS: 6,
    K.DELETE_RECORDS: 2, K.INIT_PRODUCER_ID: 4, K.OFFSET_FOR_LEADER_EPOCH: 4,
    K.ADD_PARTITIONS_TO_TXN: 3, K.ADD_OFFSETS_TO_TXN: 3, K.END_TXN: 3,
    K.TXN_OFFSET_COMMIT: 3, K.DESCRIBE_CONFIGS: 4, K.ALTER_CONFIGS: 2,
    K.SASL_AUTHENTICATE: 2, K.CREATE_PARTITIONS: 3, K.DELETE_GROUPS: 2,
    K.INCREMENTAL_ALTER_CONFIGS: 1, K.OFFSET_DELETE: 0, K.DESCRIBE_CLUSTER: 2,
}  # fmt: skip
AIOKAFKA = {
    K.PRODUCE: 7, K.FETCH: 11, K.LIST_OFFSETS: 3, K.METADATA: 5, K.OFFSET_COMMIT: 3,
    K.OFFSET_FETCH: 3, K.FIND_COORDINATOR: 1, K.JOIN_GROUP: 5, K.HEARTBEAT: 1,
    K.LEAVE_GROUP: 1, K.SYNC_GROUP: 3, K.DESCRIBE_GROUPS: 3, K.LIST_GROUPS: 1,
    K.SASL_HANDSHAKE: 1, K.API_VERSIONS: 2, K.CREATE_TOPICS: 3, K.DELETE_TOPICS: 3,
    K.DELETE_RECORDS: 2, K.INIT_PRODUCER_ID: 0, K.ADD_PARTITIONS_TO_TXN: 0,
    K.ADD_OFFSETS_TO_TXN: 0, K.END_TXN: 0, K.TXN_OFFSET_COMMIT: 0,
    K.DESCRIBE_CONFIGS: 2, K.ALTER_CONFIGS: 1, K.SASL_AUTHENTICATE: 1,
    K.CREATE_PARTITIONS: 1, K.DELETE_GROUPS: 1,
}  # fmt: skip


def test_every_entry_is_within_kio() -> None:
    for key, entry in SERVED.items():
        low, high = kio_version_range(key)  # type: ignore[misc]
        assert low <= entry.min_version <= entry.max_version <= high


@pytest.mark.parametrize(("api_key", "span"), REQUIRED.items())
def test_required_ranges_are_accepted(api_key: int, span: tuple[int, int]) -> None:
    entry = SERVED[api_key]
    assert entry.min_version <= span[0] and span[1] <= entry.max_version


def test_group_and_producer_id_apis_are_listed() -> None:
    assert set(ALSO_SERVED) <= set(SERVED)


def test_sasl_is_advertised() -> None:
    # as Kafka does on every listener (a PLAINTEXT one answers ILLEGAL_SASL_STATE)
    assert (SERVED[K.SASL_HANDSHAKE].min_version, SERVED[K.SASL_HANDSHAKE].max_version) == (0, 1)
    assert (SERVED[K.SASL_AUTHENTICATE].min_version, SERVED[K.SASL_AUTHENTICATE].max_version) == (
        0,
        2,
    )


def test_produce_advertises_v0_but_accepts_from_v3() -> None:
    produce = SERVED[ApiKey.PRODUCE]
    assert produce.advertised_min == 0
    assert not produce.accepts(2) and produce.accepts(3)
    assert (0, 0, produce.max_version) in SERVED.advertised()


@pytest.mark.parametrize(
    ("client", "table"),
    [("librdkafka", LIBRDKAFKA), ("kafka-python", KAFKA_PYTHON), ("aiokafka", AIOKAFKA)],
)
def test_clients_negotiate_an_accepted_version(client: str, table: dict[int, int]) -> None:
    advertised = {key: (low, high) for key, low, high in SERVED.advertised()}
    for api_key, client_max in table.items():
        if api_key not in advertised:
            continue  # e.g. DescribeCluster for aiokafka: the client does without it
        chosen = min(client_max, advertised[api_key][1])  # all three pick the highest
        assert SERVED.accepts(api_key, chosen), (client, ApiKey(api_key), chosen)


def _overlaps(table: VersionTable, api_key: int, low: int, high: int) -> bool:
    entry = {key: (lo, hi) for key, lo, hi in table.advertised()}.get(api_key)
    return entry is not None and low <= entry[1] and entry[0] <= high


def test_old_librdkafka_feature_detection_enables_everything_kafka_enables() -> None:
    # librdkafka < 2.11.1 (Debian's kcat links 2.0.2) enables a feature only if the
    # broker's range overlaps these exact client ranges (v2.0.2 rdkafka_feature.c).
    table = SERVED
    features = {
        "MsgVer2": [(K.PRODUCE, 3, 3), (K.FETCH, 4, 4)],
        "ApiVersion": [(K.API_VERSIONS, 0, 0)],
        "BrokerGroupCoordinator": [(K.FIND_COORDINATOR, 0, 0)],
        "BrokerBalancedConsumer": [
            (K.FIND_COORDINATOR, 0, 0), (K.OFFSET_COMMIT, 1, 2), (K.OFFSET_FETCH, 1, 1),
            (K.JOIN_GROUP, 0, 0), (K.SYNC_GROUP, 0, 0), (K.HEARTBEAT, 0, 0),
            (K.LEAVE_GROUP, 0, 0),
        ],
        "SaslGssapi": [(K.JOIN_GROUP, 0, 0)],
        "LZ4": [(K.FIND_COORDINATOR, 0, 0)],
        "OffsetTime": [(K.LIST_OFFSETS, 1, 1)],
        "IdempotentProducer": [(K.INIT_PRODUCER_ID, 0, 0)],
        "ZSTD": [(K.PRODUCE, 7, 7), (K.FETCH, 10, 10)],
        # Not a feature but the same check: gzip/snappy/lz4 need Produce 0..0.
        "compression": [(K.PRODUCE, 0, 0)],
    }  # fmt: skip
    for name, needs in features.items():
        assert all(_overlaps(table, *need) for need in needs), name
    # MsgVer1 and ThrottleTime need Fetch v1-2, gone since Kafka 4.0 as here;
    # SaslHandshake and SaslAuthReq need the SASL APIs, served as Kafka serves them.
    assert not _overlaps(table, K.FETCH, 1, 2)
    assert _overlaps(table, K.SASL_HANDSHAKE, 0, 1)
    assert _overlaps(table, K.SASL_AUTHENTICATE, 0, 0)


def test_restrict_and_without() -> None:
    served = SERVED.restrict([K.API_VERSIONS, K.METADATA, 12345])
    assert list(served) == [K.METADATA, K.API_VERSIONS]
    assert served.accepts(K.METADATA, 12) and not served.accepts(K.PRODUCE, 9)
    assert K.FETCH not in SERVED.without(K.FETCH)
    assert SERVED[K.FETCH] == ApiVersionRange(K.FETCH, 4, 17)  # unchanged
    assert "METADATA=0-12" in repr(served)


@pytest.mark.parametrize(
    "entry",
    [
        (K.PRODUCE, 2, 9),  # kio cannot decode Produce v2
        (K.FETCH, 4, 19),
        (K.METADATA, 5, 4),
        (7, 0, 3),  # ControlledShutdown: removed, unknown to kio
        (K.PRODUCE, 3, 9, 4),  # advertised minimum above the accepted one
    ],
)
def test_invalid_entries(entry: tuple[int, ...]) -> None:
    with pytest.raises(ValueError):
        ApiVersionRange(*entry)


def test_duplicate_keys() -> None:
    with pytest.raises(ValueError):
        VersionTable([ApiVersionRange(18, 0, 3), ApiVersionRange(18, 0, 4)])


def decode_response(data: bytes, version: int) -> Any:
    module = importlib.import_module(f"kio.schema.api_versions.v{version}.response")
    body, size = entity_reader(module.ApiVersionsResponse)(data, 8)
    assert 8 + size == len(data)
    return body


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_response_lists_the_table(version: int) -> None:
    table = SERVED.restrict([K.API_VERSIONS, K.METADATA, K.PRODUCE])
    response = api_versions_response(table, version, throttle_time_ms=25)
    assert response.__version__ == version
    body = decode_response(encode_response(1, response), version)
    assert body.error_code is ErrorCode.none
    assert [(e.api_key, e.min_version, e.max_version) for e in body.api_keys] == [
        (0, 0, 11),
        (3, 0, 12),
        (18, 0, 4),
    ]
    if version >= 1:
        assert body.throttle_time.total_seconds() == 0.025


def test_fallback_is_v0_with_unsupported_version() -> None:
    response = api_versions_fallback_response(SERVED)
    assert response.__version__ == 0
    data = encode_response(3, response)
    assert len(data) == 4 + 4 + 2 + 4 + 6 * len(SERVED)
    body = decode_response(data, 0)
    assert body.error_code is ErrorCode.unsupported_version
    assert int(body.error_code) == 35


@pytest.mark.parametrize(
    ("name", "version", "valid"),
    [
        ("librdkafka", "2.0.2", True),
        ("apache-kafka-java", "4.1.0", True),
        ("kafka-python", "3.0.12", True),
        ("a", "1", True),
        ("", "1", False),
        ("-bad", "1", False),
        ("bad-", "1", False),
        ("spaces not ok", "1", False),
        ("ok", "1.0 beta", False),
    ],
)
def test_client_software_names(name: str, version: str, valid: bool) -> None:
    assert is_valid_client_software(name, version) is valid
