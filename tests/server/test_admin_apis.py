"""Admin APIs against a real embedded broker, driven by confluent-kafka and kafka-python.

CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DeleteRecords,
DescribeCluster and OffsetForLeaderEpoch; raw protocol requests cover the versions and
error cases the admin clients do not reach. One broker serves the whole module; each
test uses its own topics. No fixed sleeps: waits poll a condition under a deadline.
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import TopicPartition as KTopicPartition
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader

import sluice
from sluice.base import TopicPartition as SluiceTP
from sluice.config import TOPIC_CONFIGS
from sluice.log import Log
from sluice.protocol import ErrorCode, encode_request
from sluice.protocol.apis import load_request_schema, response_header_version, response_type
from sluice.replication.partition import Partition
from sluice.server.apis.offset_for_leader_epoch import end_offset_for, epoch_entries
from support.waiting import wait_until

TIMEOUT_S = 15.0
SEGMENT_BYTES = 8 * 1024 * 1024  # set explicitly: a STATIC_BROKER_CONFIG synonym

DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}-{time.monotonic_ns() % 1_000_000}"


def result(future: Future[Any]) -> Any:
    return future.result(timeout=TIMEOUT_S)


def kafka_error(future: Future[Any]) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        result(future)
    error: KafkaError = info.value.args[0]
    return error


# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"log.segment.bytes": SEGMENT_BYTES}


@pytest.fixture(scope="module")
def admin(broker: sluice.EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


@pytest.fixture(scope="module")
def kadmin(broker: sluice.EmbeddedBroker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=15000)
    yield client
    client.close()


def create_topic(admin: AdminClient, partitions: int = 1, prefix: str = "t") -> str:
    name = unique(prefix)
    result(admin.create_topics([NewTopic(name, partitions)])[name])
    return name


def partition_count(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions)


def produce(broker: sluice.EmbeddedBroker, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    errors: list[KafkaError] = []
    for i in range(count):
        producer.produce(
            topic, value=b"v%d" % i, partition=partition,
            on_delivery=lambda err, _msg: errors.append(err) if err else None,
        )  # fmt: skip
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []


def describe_topic(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource("topic", topic)
    configs: dict[str, ConfigEntry] = result(admin.describe_configs([resource])[resource])
    return configs


def raw_call(broker: sluice.EmbeddedBroker, body: Any) -> Any:
    """Send one request on a fresh connection and decode the response."""
    api_key, version = int(body.__api_key__), int(body.__version__)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(encode_request(1, body))

        def recv_exact(n: int) -> bytes:
            chunks = b""
            while len(chunks) < n:
                chunk = sock.recv(n - len(chunks))
                assert chunk, "connection closed by the broker"
                chunks += chunk
            return chunks

        (size,) = struct.unpack(">i", recv_exact(4))
        payload = recv_exact(size)
    header_cls: Any = (
        ResponseHeaderV1 if response_header_version(api_key, version) == 1 else ResponseHeaderV0
    )
    header, offset = entity_reader(header_cls)(payload, 0)
    assert header.correlation_id == 1
    response, used = entity_reader(response_type(api_key, version))(payload, offset)
    assert offset + used == len(payload)
    return response


def request(api_key: int, version: int, **values: Any) -> Any:
    """A kio request of any version, built like the handlers build responses."""
    from sluice.server.messages import build

    return build(load_request_schema(api_key, version), **values)


# -- CreatePartitions ---------------------------------------------------------------------


def test_create_partitions_confluent(broker: sluice.EmbeddedBroker, admin: AdminClient) -> None:
    topic = create_topic(admin, 1)
    result(admin.create_partitions([NewPartitions(topic, 3)])[topic])
    assert partition_count(admin, topic) == 3
    produce(broker, topic, 2, partition=2)  # the new partitions take writes

    fs = admin.create_partitions([NewPartitions(topic, 5)], validate_only=True)
    result(fs[topic])
    assert partition_count(admin, topic) == 3  # validate_only changed nothing

    error = kafka_error(admin.create_partitions([NewPartitions(topic, 3)])[topic])
    assert error.code() == KafkaError.INVALID_PARTITIONS
    assert "already has 3 partitions" in error.str()
    error = kafka_error(admin.create_partitions([NewPartitions(topic, 2)])[topic])
    assert error.code() == KafkaError.INVALID_PARTITIONS

    missing = unique("missing")
    error = kafka_error(admin.create_partitions([NewPartitions(missing, 2)])[missing])
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    manual = NewPartitions(topic, 4, replica_assignment=[[broker.broker.broker_id + 1]])
    error = kafka_error(admin.create_partitions([manual])[topic])
    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "no such broker is registered" in error.str()
    assert partition_count(admin, topic) == 3


def test_create_partitions_kafka_python(admin: AdminClient, kadmin: KafkaAdminClient) -> None:
    topic = create_topic(admin, 2)
    response = kadmin.create_partitions({topic: 4})
    assert [(r.name, r.error_code) for r in response.results] == [(topic, 0)]
    assert wait_until(lambda: partition_count(admin, topic) == 4, TIMEOUT_S, "4 partitions")

    response = kadmin.create_partitions({topic: 3}, raise_errors=False)
    assert [r.error_code for r in response.results] == [ErrorCode.invalid_partitions.value]
    assert "higher than" in response.results[0].error_message
    response = kadmin.create_partitions({topic: 6}, validate_only=True)
    assert [r.error_code for r in response.results] == [0]
    assert partition_count(admin, topic) == 4


def test_create_topic_with_manual_assignment_kafka_python(
    broker: sluice.EmbeddedBroker, admin: AdminClient, kadmin: KafkaAdminClient
) -> None:
    from kafka.admin import NewTopic as KNewTopic

    me = broker.broker.broker_id
    name = unique("manual")
    response = kadmin.create_topics([KNewTopic(name, -1, -1, {0: [me], 1: [me]})])
    assert [(t["name"], t["error_code"]) for t in response["topics"]] == [(name, 0)]
    assert partition_count(admin, name) == 2
    bad = {
        "unknown": {0: [me + 7]},
        "gap": {0: [me], 2: [me]},
        "duplicate": {0: [me, me]},
    }
    for what, assignment in bad.items():
        response = kadmin.create_topics(
            [KNewTopic(unique(what), -1, -1, assignment)], raise_errors=False
        )
        assert [t["error_code"] for t in response["topics"]] == [
            ErrorCode.invalid_replica_assignment.value
        ], what
    both = kadmin.create_topics([KNewTopic(unique("both"), 2, -1, {0: [me]})], raise_errors=False)
    assert [t["error_code"] for t in both["topics"]] == [ErrorCode.invalid_request.value]


# -- DescribeConfigs ----------------------------------------------------------------------


def test_describe_topic_configs_confluent(admin: AdminClient) -> None:
    topic = create_topic(admin)
    configs = describe_topic(admin, topic)
    assert sorted(configs) == sorted(TOPIC_CONFIGS)

    retention = configs["retention.ms"]
    assert retention.value == "604800000"
    assert retention.source == ConfigSource.DEFAULT_CONFIG.value
    assert not retention.is_read_only and not retention.is_sensitive
    assert configs["cleanup.policy"].value == "delete"
    assert configs["preallocate"].value == "false"  # booleans as Kafka prints them
    assert configs["flush.ms"].value == str(2**63 - 1)

    # log.segment.bytes is set on the broker: its value and source carry to the topic.
    segment = configs["segment.bytes"]
    assert segment.value == str(SEGMENT_BYTES)
    assert segment.source == ConfigSource.STATIC_BROKER_CONFIG.value
    synonyms = {name: (s.value, s.source) for name, s in segment.synonyms.items()}
    assert synonyms["log.segment.bytes"][0] in (str(SEGMENT_BYTES), str(1 << 30))

    missing = unique("missing")
    resource = ConfigResource("topic", missing)
    error = kafka_error(admin.describe_configs([resource])[resource])
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_broker_configs_confluent(admin: AdminClient) -> None:
    resource = ConfigResource("broker", "0")
    configs = result(admin.describe_configs([resource])[resource])
    segment = configs["log.segment.bytes"]
    assert segment.value == str(SEGMENT_BYTES)
    assert segment.source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert not segment.is_read_only  # Kafka changes it at run time (cluster-wide)
    assert configs["log.dirs"].is_read_only
    partitions = configs["num.partitions"]
    assert (partitions.value, partitions.source) == ("1", ConfigSource.DEFAULT_CONFIG.value)
    assert configs["auto.create.topics.enable"].value == "true"
    assert configs["log.retention.hours"].value == "168"
    assert configs["log.retention.ms"].value is None  # unset, as in Kafka


def test_describe_configs_kafka_python(admin: AdminClient, kadmin: KafkaAdminClient) -> None:
    topic = create_topic(admin)
    everything = kadmin.describe_configs(
        [KConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
    )["topic"][topic]
    assert everything["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    assert everything["retention.ms"]["config_type"] == "LONG"
    assert everything["cleanup.policy"]["config_type"] == "LIST"
    assert everything["preallocate"]["config_type"] == "BOOLEAN"
    assert everything["min.cleanable.dirty.ratio"]["config_type"] == "DOUBLE"
    # Only modified (here: none) by default; keys filter the result.
    assert kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic)]) == {
        "topic": {topic: {}}
    }
    only = kadmin.describe_configs(
        [KConfigResource(ConfigResourceType.TOPIC, topic, ["segment.bytes", "retention.ms"])],
        include_synonyms=True,
        config_filter="all",
    )["topic"][topic]
    assert sorted(only) == ["retention.ms", "segment.bytes"]
    assert only["segment.bytes"]["synonyms"][0] == {
        "name": "log.segment.bytes", "value": str(SEGMENT_BYTES), "source": "STATIC_BROKER_CONFIG",
    }  # fmt: skip
    broker_configs = kadmin.describe_configs(
        [KConfigResource(ConfigResourceType.BROKER, "0")], config_filter="static"
    )["broker"]["0"]
    assert broker_configs["log.segment.bytes"]["value"] == str(SEGMENT_BYTES)
    assert "num.partitions" not in broker_configs  # a default, not static


def test_describe_configs_raw_versions(broker: sluice.EmbeddedBroker, admin: AdminClient) -> None:
    topic = create_topic(admin)
    resources = [
        {"resource_type": 2, "resource_name": topic, "configuration_keys": ["segment.bytes"]},
        {"resource_type": 4, "resource_name": "", "configuration_keys": None},
        {"resource_type": 99, "resource_name": "x", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "7", "configuration_keys": None},
        {"resource_type": 2, "resource_name": "bad/name", "configuration_keys": None},
    ]
    for version in (1, 2, 3, 4):
        body = request(32, version, resources=resources, include_synonyms=True,
                       include_documentation=True)  # fmt: skip
        topic_result, default_result, bad, other_broker, bad_name = raw_call(broker, body).results
        assert topic_result.error_code == ErrorCode.none
        (entry,) = topic_result.configs
        assert (entry.name, entry.value, entry.config_source) == (
            "segment.bytes", str(SEGMENT_BYTES), STATIC_BROKER_CONFIG,
        )  # fmt: skip
        assert [(s.name, s.source) for s in entry.synonyms] == [
            ("log.segment.bytes", STATIC_BROKER_CONFIG), ("log.segment.bytes", DEFAULT_CONFIG),
        ]  # fmt: skip
        if version >= 3:
            assert entry.config_type == 3  # INT
            assert entry.documentation
        # The cluster-wide default resource: no dynamic defaults in Sluice.
        assert (default_result.error_code, default_result.configs) == (ErrorCode.none, ())
        assert bad.error_code == ErrorCode.invalid_request
        assert other_broker.error_code == ErrorCode.invalid_request
        assert "Unexpected broker id" in other_broker.error_message
        assert bad_name.error_code == ErrorCode.invalid_topic_exception


# -- AlterConfigs (legacy) ----------------------------------------------------------------


def test_alter_configs_confluent(broker: sluice.EmbeddedBroker, admin: AdminClient) -> None:
    topic = create_topic(admin)
    resource = ConfigResource(
        "topic", topic, set_config={"retention.ms": "3600000", "max.message.bytes": "1000"}
    )
    result(admin.alter_configs([resource])[resource])
    configs = describe_topic(admin, topic)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["max.message.bytes"].value == "1000"

    # The new limit applies to the log at once.
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    errors: list[KafkaError] = []
    producer.produce(topic, value=b"x" * 5000, on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]

    # AlterConfigs replaces all overrides: retention.ms falls back to the default.
    resource = ConfigResource("topic", topic, set_config={"cleanup.policy": "compact"})
    result(admin.alter_configs([resource])[resource])
    configs = describe_topic(admin, topic)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["max.message.bytes"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    bad = ConfigResource("topic", topic, set_config={"retention.ms": "soon"})
    error = kafka_error(admin.alter_configs([bad])[bad])
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "retention.ms" in error.str()
    unknown = ConfigResource("topic", topic, set_config={"no.such.config": "1"})
    error = kafka_error(admin.alter_configs([unknown])[unknown])
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "no.such.config" in error.str()

    dry = ConfigResource("topic", topic, set_config={"retention.ms": "1234"})
    result(admin.alter_configs([dry], validate_only=True)[dry])
    assert describe_topic(admin, topic)["retention.ms"].value == "604800000"

    missing = ConfigResource("topic", unique("missing"), set_config={"retention.ms": "1"})
    error = kafka_error(admin.alter_configs([missing])[missing])
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_single_topic_config_matches_the_full_set(
    broker: sluice.EmbeddedBroker, admin: AdminClient
) -> None:
    """The topic admin's topic_config(key), which the produce path asks per request,
    agrees with topic_configs() for every key, with and without overrides."""
    topic = create_topic(admin)
    inner = broker.broker.topic_admin
    for key in TOPIC_CONFIGS:
        assert inner.topic_config(topic, key) == inner.topic_configs(topic)[key], key
    resource = ConfigResource(
        "topic", topic, set_config={"min.insync.replicas": "1", "retention.ms": "1234"}
    )
    result(admin.alter_configs([resource])[resource])
    overridden = inner.topic_configs(topic)
    assert overridden["retention.ms"] == 1234
    for key in TOPIC_CONFIGS:
        assert inner.topic_config(topic, key) == overridden[key], key


def test_alter_configs_kafka_python(admin: AdminClient, kadmin: KafkaAdminClient) -> None:
    topic = create_topic(admin)
    resource = KConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "7200000"})
    assert kadmin.alter_configs([resource], incremental=False) == {"topic": {topic: "OK"}}
    modified = kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic)])
    entry = modified["topic"][topic]["retention.ms"]
    assert (entry["value"], entry["config_source"]) == ("7200000", "DYNAMIC_TOPIC_CONFIG")

    bad = KConfigResource(ConfigResourceType.TOPIC, topic, {"segment.bytes": "1"})  # min 14
    outcome = kadmin.alter_configs([bad], incremental=False)["topic"][topic]
    assert "InvalidConfigurationError" in outcome and "segment.bytes" in outcome

    broker_resource = KConfigResource(ConfigResourceType.BROKER, "0", {"num.partitions": "3"})
    outcome = kadmin.alter_configs([broker_resource], incremental=False, raise_on_unknown=False)
    assert "InvalidRequestError" in outcome["broker"]["0"]


# -- IncrementalAlterConfigs --------------------------------------------------------------


def incremental(admin: AdminClient, topic: str, *entries: ConfigEntry, **kw: Any) -> Future[Any]:
    resource = ConfigResource("topic", topic, incremental_configs=list(entries))
    future: Future[Any] = admin.incremental_alter_configs([resource], **kw)[resource]
    return future


def test_incremental_alter_configs_confluent(admin: AdminClient) -> None:
    topic = create_topic(admin)
    set_op, delete_op = AlterConfigOpType.SET, AlterConfigOpType.DELETE
    append_op, subtract_op = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT
    result(incremental(admin, topic,
        ConfigEntry("retention.ms", "60000", incremental_operation=set_op),
        ConfigEntry("segment.ms", "120000", incremental_operation=set_op)))  # fmt: skip
    result(incremental(admin, topic,
        ConfigEntry("cleanup.policy", "compact", incremental_operation=append_op)))  # fmt: skip
    configs = describe_topic(admin, topic)
    assert configs["retention.ms"].value == "60000"  # kept by the second request
    assert configs["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "delete,compact"  # appended to the default

    result(incremental(admin, topic,
        ConfigEntry("cleanup.policy", "delete", incremental_operation=subtract_op),
        ConfigEntry("retention.ms", None, incremental_operation=delete_op)))  # fmt: skip
    configs = describe_topic(admin, topic)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["segment.ms"].value == "120000"

    error = kafka_error(incremental(admin, topic,
        ConfigEntry("retention.ms", "5", incremental_operation=append_op)))  # fmt: skip
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "retention.ms" in error.str()
    error = kafka_error(incremental(admin, topic,
        ConfigEntry("min.insync.replicas", "0", incremental_operation=set_op)))  # fmt: skip
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "min.insync.replicas" in error.str()

    dry = ConfigEntry("retention.ms", "1", incremental_operation=set_op)
    result(incremental(admin, topic, dry, validate_only=True))
    assert describe_topic(admin, topic)["retention.ms"].value == "604800000"

    resource = ConfigResource("broker", "0", incremental_configs=[
        ConfigEntry("log.dirs", "/elsewhere", incremental_operation=set_op)])  # fmt: skip
    error = kafka_error(admin.incremental_alter_configs([resource])[resource])
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(log.dirs)" in error.str()


def test_incremental_alter_configs_kafka_python(
    admin: AdminClient, kadmin: KafkaAdminClient
) -> None:
    topic = create_topic(admin)
    resource = KConfigResource(
        ConfigResourceType.TOPIC, topic,
        {"retention.bytes": "1048576", "cleanup.policy": ("APPEND", "compact")},
    )  # fmt: skip
    assert kadmin.alter_configs([resource]) == {"topic": {topic: "OK"}}
    modified = kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic)])
    assert {k: v["value"] for k, v in modified["topic"][topic].items()} == {
        "retention.bytes": "1048576",
        "cleanup.policy": "delete,compact",
    }
    kadmin.reset_configs([KConfigResource(ConfigResourceType.TOPIC, topic, ["retention.bytes"])])
    modified = kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic)])
    assert list(modified["topic"][topic]) == ["cleanup.policy"]


def test_alter_configs_raw_errors(broker: sluice.EmbeddedBroker, admin: AdminClient) -> None:
    topic = create_topic(admin)
    duplicate = {"resource_type": 2, "resource_name": topic,
                 "configs": [{"name": "retention.ms", "value": "1000"}]}  # fmt: skip
    response = raw_call(broker, request(33, 2, resources=[duplicate, duplicate]))
    assert [r.error_code for r in response.responses] == [ErrorCode.invalid_request] * 2
    null_value = {"resource_type": 2, "resource_name": topic,
                  "configs": [{"name": "retention.ms", "value": None}]}  # fmt: skip
    response = raw_call(broker, request(33, 0, resources=[null_value]))
    assert response.responses[0].error_code == ErrorCode.invalid_request

    ops = {"resource_type": 2, "resource_name": topic, "configs": [
        {"name": "retention.ms", "config_operation": 0, "value": "1000"},
        {"name": "retention.ms", "config_operation": 1, "value": None},
    ]}  # fmt: skip
    response = raw_call(broker, request(44, 1, resources=[ops]))
    assert response.responses[0].error_code == ErrorCode.invalid_request
    assert "duplicate" in response.responses[0].error_message
    group = {"resource_type": 32, "resource_name": "g", "configs": []}
    response = raw_call(broker, request(44, 0, resources=[group]))
    assert response.responses[0].error_code == ErrorCode.invalid_request


# -- DeleteRecords ------------------------------------------------------------------------


def test_delete_records_confluent(broker: sluice.EmbeddedBroker, admin: AdminClient) -> None:
    topic = create_topic(admin, 2)
    produce(broker, topic, 10, partition=0)
    produce(broker, topic, 3, partition=1)

    fs = admin.delete_records([TopicPartition(topic, 0, 4)])
    deleted = result(fs[TopicPartition(topic, 0)])
    assert deleted.low_watermark == 4
    earliest = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})
    assert result(earliest[TopicPartition(topic, 0)]).offset == 4
    latest = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()})
    assert result(latest[TopicPartition(topic, 0)]).offset == 10

    # Offset -1: everything up to the high watermark.
    fs = admin.delete_records([TopicPartition(topic, 1, -1)])
    assert result(fs[TopicPartition(topic, 1)]).low_watermark == 3
    # Beyond the high watermark.
    fs = admin.delete_records([TopicPartition(topic, 0, 11)])
    assert kafka_error(fs[TopicPartition(topic, 0)]).code() == KafkaError.OFFSET_OUT_OF_RANGE

    # Fetching from 0 is now out of range: auto.offset.reset=error reports it...
    base = {"bootstrap.servers": broker.bootstrap_servers, "group.id": unique("g"),
            "enable.auto.commit": False}  # fmt: skip
    consumer = Consumer({**base, "auto.offset.reset": "error"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = wait_until(lambda: consumer.poll(0.1), TIMEOUT_S, "an offset reset error")
        assert message.error() is not None
        assert message.error().code() == KafkaError._AUTO_OFFSET_RESET
    finally:
        consumer.close()
    # ... and earliest resets to the new log start offset.
    consumer = Consumer({**base, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = wait_until(lambda: consumer.poll(0.1), TIMEOUT_S, "a message after the reset")
        assert message.error() is None
        assert (message.offset(), message.value()) == (4, b"v4")
    finally:
        consumer.close()


def test_delete_records_kafka_python(
    broker: sluice.EmbeddedBroker, admin: AdminClient, kadmin: KafkaAdminClient
) -> None:
    topic = create_topic(admin)
    produce(broker, topic, 8)
    tp = KTopicPartition(topic, 0)
    outcome = kadmin.delete_records({tp: 5})
    assert outcome[tp]["low_watermark"] == 5
    assert outcome[tp]["error_code"] == 0

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=int(TIMEOUT_S * 1000),
    )
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        first = next(iter(consumer))
        assert (first.offset, first.value) == (5, b"v5")
    finally:
        consumer.close()


def test_delete_records_raw(broker: sluice.EmbeddedBroker, admin: AdminClient) -> None:
    topic = create_topic(admin)
    produce(broker, topic, 5)
    missing = unique("missing")
    for version in (0, 1, 2):
        body = request(21, version, timeout=5000, topics=[
            {"name": topic, "partitions": [
                {"partition_index": 0, "offset": version + 1},
                {"partition_index": 3, "offset": 1},
            ]},
            {"name": missing, "partitions": [{"partition_index": 0, "offset": 1}]},
        ])  # fmt: skip
        answers = {
            (t.name, p.partition_index): (p.error_code, p.low_watermark)
            for t in raw_call(broker, body).topics
            for p in t.partitions
        }
        assert answers == {
            (topic, 0): (ErrorCode.none, version + 1),
            (topic, 3): (ErrorCode.unknown_topic_or_partition, -1),
            (missing, 0): (ErrorCode.unknown_topic_or_partition, -1),
        }
    # Below the log start offset: nothing to do, the low watermark stays.
    body = request(21, 2, timeout=5000, topics=[
        {"name": topic, "partitions": [{"partition_index": 0, "offset": 1}]}])  # fmt: skip
    (answer,) = raw_call(broker, body).topics[0].partitions
    assert (answer.error_code, answer.low_watermark) == (ErrorCode.none, 3)
    body = request(21, 2, timeout=5000, topics=[
        {"name": topic, "partitions": [{"partition_index": 0, "offset": -2}]}])  # fmt: skip
    (answer,) = raw_call(broker, body).topics[0].partitions
    assert answer.error_code == ErrorCode.offset_out_of_range


# -- DescribeCluster ----------------------------------------------------------------------


def test_describe_cluster(
    broker: sluice.EmbeddedBroker, admin: AdminClient, kadmin: KafkaAdminClient
) -> None:
    cluster_id = broker.broker.cluster_id
    advertised = broker.broker.advertised[0]
    host, port = advertised.host, advertised.port

    described = kadmin.describe_cluster()  # the DescribeCluster API
    assert described["cluster_id"] == cluster_id
    assert described["controller_id"] == 0
    assert described["brokers"] == [{"broker_id": 0, "host": host, "port": port, "rack": None}]
    assert set(described["authorized_operations"]) >= {"DESCRIBE", "ALTER", "DESCRIBE_CONFIGS"}

    # librdkafka answers describe_cluster from Metadata; it must agree.
    info = result(admin.describe_cluster())
    assert info.cluster_id == cluster_id
    assert info.controller.id == 0
    assert [(n.id, n.host, n.port) for n in info.nodes] == [(0, host, port)]

    for version in (0, 1):
        raw = raw_call(broker, request(60, version, include_cluster_authorized_operations=False))
        assert (raw.error_code, raw.cluster_id, raw.controller_id) == (
            ErrorCode.none, cluster_id, 0,
        )  # fmt: skip
        assert raw.cluster_authorized_operations == -2147483648
    raw = raw_call(broker, request(60, 1, include_cluster_authorized_operations=False,
                                   endpoint_type=2))  # fmt: skip
    assert raw.error_code == ErrorCode.mismatched_endpoint_type


# -- OffsetForLeaderEpoch -----------------------------------------------------------------


def leader_epoch_request(version: int, topic: str, *partitions: tuple[int, int, int]) -> Any:
    return request(23, version, replica_id=-1, topics=[{"topic": topic, "partitions": [
        {"partition": p, "current_leader_epoch": current, "leader_epoch": epoch}
        for p, current, epoch in partitions
    ]}])  # fmt: skip


def test_offset_for_leader_epoch_raw(broker: sluice.EmbeddedBroker, admin: AdminClient) -> None:
    topic = create_topic(admin, 2)
    produce(broker, topic, 6)
    for version in (2, 3, 4):
        body = leader_epoch_request(
            version, topic,
            (0, 0, 0),     # the current epoch: the log end offset
            (1, -1, 0),    # an empty partition, no current-epoch check
            (0, 0, 1),     # an epoch newer than any: undefined
            (0, 1, 0),     # a current epoch from the future: UNKNOWN_LEADER_EPOCH
            (0, -1, -1),   # undefined epoch
            (7, -1, 0),    # no such partition
        )  # fmt: skip
        (result_topic,) = raw_call(broker, body).topics
        answers = [(p.error_code, p.leader_epoch, p.end_offset) for p in result_topic.partitions]
        assert answers == [
            (ErrorCode.none, 0, 6),
            (ErrorCode.none, 0, 0),
            (ErrorCode.none, -1, -1),
            (ErrorCode.unknown_leader_epoch, -1, -1),
            (ErrorCode.none, -1, -1),
            (ErrorCode.unknown_topic_or_partition, -1, -1),
        ]


def test_offset_for_leader_epoch_librdkafka_validation(
    broker: sluice.EmbeddedBroker, admin: AdminClient
) -> None:
    """librdkafka validates a position carrying a leader epoch with OffsetForLeaderEpoch."""
    topic = create_topic(admin)
    produce(broker, topic, 10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": unique("g"),
                         "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, 5, leader_epoch=0)])
        message = wait_until(lambda: consumer.poll(0.1), TIMEOUT_S, "a message")
        assert message.error() is None
        assert (message.offset(), message.leader_epoch()) == (5, 0)
    finally:
        consumer.close()


def _batch(count: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    for i in range(count):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None, value=b"x", headers=[])
    return bytes(builder.build())


def test_offset_for_leader_epoch_older_epochs(tmp_path: Path) -> None:
    """Epochs recorded in the batches answer for older epochs, as Kafka's epoch cache."""
    log = Log(tmp_path / "t-0")
    try:
        for epoch, count in ((0, 3), (0, 2), (2, 4), (5, 1)):  # epochs 0: 0-4, 2: 5-8, 5: 9
            log.append_as_leader(_batch(count), epoch)
        partition = Partition(SluiceTP("t", 0), log, 0, [0], leader_id=0, leader_epoch=7)
        assert epoch_entries(partition) == [(0, 0), (2, 5), (5, 9), (7, 10)]
        assert end_offset_for(partition, 7) == (7, 10)  # current epoch: the LEO
        assert end_offset_for(partition, 8) == (-1, -1)  # newer than any
        assert end_offset_for(partition, 0) == (0, 5)
        assert end_offset_for(partition, 1) == (0, 5)  # no epoch 1: the one before it
        assert end_offset_for(partition, 2) == (2, 9)
        assert end_offset_for(partition, 6) == (5, 10)
        assert end_offset_for(partition, -1) == (-1, -1)

        log.delete_records_before(6)  # epoch 0 is gone, epoch 2 now starts at 6
        assert epoch_entries(partition)[0] == (2, 6)
        assert end_offset_for(partition, 0) == (0, 6)  # older than any left: requested one
        assert end_offset_for(partition, 2) == (2, 9)

        same = Partition(SluiceTP("t", 0), log, 0, [0], leader_id=0, leader_epoch=5)
        assert end_offset_for(same, 5) == (5, 10)  # the last written epoch is current
    finally:
        log.close()


# -- ApiVersions --------------------------------------------------------------------------


def test_admin_apis_are_advertised(broker: sluice.EmbeddedBroker) -> None:
    body = request(18, 3, client_software_name="t", client_software_version="1")
    advertised = {
        k.api_key: (k.min_version, k.max_version) for k in raw_call(broker, body).api_keys
    }
    for api_key in (21, 23, 32, 33, 37, 44, 60):
        assert api_key in advertised, api_key
