"""Sluice advertises, for every API it serves, the version range of one Kafka release:
Apache Kafka 3.9 (a broker in ZooKeeper mode, as Sluice is). The maximum of every API is
3.9's; the minimum is 3.9's, or Kafka 4.0's where 4.0 removed the old versions (KIP-896)
and Sluice does not serve them either. A new API module only needs its key to be in the
table below, so this test checks it too.

The table is what a Kafka 3.9 broker answers to ApiVersions (the ranges kafka-python
3.0.12 records for 3.9 in ``kafka/protocol/broker_version_data.py``, taken from a real
broker's answer, and Kafka's message specs at 3.9); docs/protocol.md prints it."""

from __future__ import annotations

from sluice.protocol import ApiKey
from sluice.server.apis import registry

K = ApiKey

# API key -> (min, max) in Kafka 3.9's ApiVersions answer.
KAFKA_3_9: dict[int, tuple[int, int]] = {
    K.PRODUCE: (0, 11), K.FETCH: (0, 17), K.LIST_OFFSETS: (0, 9), K.METADATA: (0, 12),
    K.OFFSET_COMMIT: (0, 9), K.OFFSET_FETCH: (0, 9), K.FIND_COORDINATOR: (0, 6),
    K.JOIN_GROUP: (0, 9), K.HEARTBEAT: (0, 4), K.LEAVE_GROUP: (0, 5), K.SYNC_GROUP: (0, 5),
    K.DESCRIBE_GROUPS: (0, 5), K.LIST_GROUPS: (0, 5), K.SASL_HANDSHAKE: (0, 1),
    K.API_VERSIONS: (0, 4), K.CREATE_TOPICS: (0, 7), K.DELETE_TOPICS: (0, 6),
    K.DELETE_RECORDS: (0, 2), K.INIT_PRODUCER_ID: (0, 5), K.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    K.ADD_PARTITIONS_TO_TXN: (0, 5), K.ADD_OFFSETS_TO_TXN: (0, 4), K.END_TXN: (0, 4),
    K.WRITE_TXN_MARKERS: (0, 1), K.TXN_OFFSET_COMMIT: (0, 4), K.DESCRIBE_ACLS: (0, 3),
    K.CREATE_ACLS: (0, 3), K.DELETE_ACLS: (0, 3), K.DESCRIBE_CONFIGS: (0, 4),
    K.ALTER_CONFIGS: (0, 2), K.ALTER_REPLICA_LOG_DIRS: (0, 2), K.DESCRIBE_LOG_DIRS: (0, 4),
    K.SASL_AUTHENTICATE: (0, 2), K.CREATE_PARTITIONS: (0, 3),
    K.CREATE_DELEGATION_TOKEN: (0, 3), K.RENEW_DELEGATION_TOKEN: (0, 2),
    K.EXPIRE_DELEGATION_TOKEN: (0, 2), K.DESCRIBE_DELEGATION_TOKEN: (0, 3),
    K.DELETE_GROUPS: (0, 2), K.ELECT_LEADERS: (0, 2), K.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    K.ALTER_PARTITION_REASSIGNMENTS: (0, 0), K.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    K.OFFSET_DELETE: (0, 0), K.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    K.ALTER_CLIENT_QUOTAS: (0, 1), K.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    K.ALTER_USER_SCRAM_CREDENTIALS: (0, 0), K.UPDATE_FEATURES: (0, 1),
    K.DESCRIBE_CLUSTER: (0, 1), K.DESCRIBE_PRODUCERS: (0, 0),
    K.DESCRIBE_TRANSACTIONS: (0, 0), K.LIST_TRANSACTIONS: (0, 1),
    K.ALLOCATE_PRODUCER_IDS: (0, 0), K.CONSUMER_GROUP_HEARTBEAT: (0, 0),
    K.CONSUMER_GROUP_DESCRIBE: (0, 0),
}  # fmt: skip

# The minimums Kafka 4.0 raised (KIP-896: the versions of Kafka 0.x and 1.x removed),
# which Sluice does not serve either (kio has no schema for most of them).
KAFKA_4_0_MINIMUMS: dict[int, int] = {
    K.FETCH: 4, K.LIST_OFFSETS: 1, K.OFFSET_COMMIT: 2, K.OFFSET_FETCH: 1,
    K.JOIN_GROUP: 2, K.CREATE_TOPICS: 2, K.DELETE_TOPICS: 1, K.OFFSET_FOR_LEADER_EPOCH: 2,
    K.WRITE_TXN_MARKERS: 1, K.DESCRIBE_ACLS: 1, K.CREATE_ACLS: 1, K.DELETE_ACLS: 1,
    K.DESCRIBE_CONFIGS: 1, K.ALTER_REPLICA_LOG_DIRS: 1,
    K.DESCRIBE_LOG_DIRS: 1, K.CREATE_DELEGATION_TOKEN: 1, K.RENEW_DELEGATION_TOKEN: 1,
    K.EXPIRE_DELEGATION_TOKEN: 1, K.DESCRIBE_DELEGATION_TOKEN: 1,
}  # fmt: skip


def test_every_advertised_range_is_kafka_3_9s() -> None:
    table = registry().versions
    for key, entry in table.items():
        name = ApiKey(key).name
        assert key in KAFKA_3_9, f"{name} is not an API of Kafka 3.9"
        low, high = KAFKA_3_9[key]
        assert entry.max_version == high, name
        assert entry.advertised_min in (low, KAFKA_4_0_MINIMUMS.get(key, low)), name


def test_kafka_python_infers_kafka_3_9() -> None:
    """kafka-python picks the broker version whose telltale API version the ranges hold."""
    from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

    table = registry().versions
    ranges = {key: (e.advertised_min, e.max_version) for key, e in table.items()}
    assert infer_broker_version_from_api_versions(ranges) == (3, 9)
