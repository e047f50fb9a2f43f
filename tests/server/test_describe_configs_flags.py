"""DescribeConfigs reports read-only, sensitive, type and documentation flags
(sluice.config_metadata), seen through confluent-kafka, kafka-python, aiokafka and a raw
request on one broker."""

from __future__ import annotations

import asyncio
import socket
import struct

from confluent_kafka.admin import AdminClient, ConfigResource
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_reader

import sluice
from sluice.config import BROKER_CONFIGS
from sluice.protocol import encode_request
from sluice.protocol.apis import load_request_schema, response_type
from sluice.server.messages import build

TIMEOUT_S = 15.0

# What this broker changes while it runs (sluice.server.dynamic_broker_config), and keys
# that Kafka changes at run time but Sluice does not (listeners, fetcher threads).
DYNAMIC = ("log.retention.ms", "log.segment.bytes", "max.connections", "message.max.bytes",
           "log.cleaner.backoff.ms")  # fmt: skip
STATIC = ("log.dirs", "broker.id", "log.retention.hours", "num.partitions",
          "zookeeper.connect", "max.broker.partitions", "advertised.listeners", "listeners",
          "num.replica.fetchers")  # fmt: skip


def broker_resource(broker: sluice.EmbeddedBroker) -> str:
    return str(broker.broker.broker_id)


def test_confluent_sees_read_only_flags(broker: sluice.EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource("broker", broker_resource(broker))
    configs = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    for name in DYNAMIC:
        assert not configs[name].is_read_only, name
    for name in STATIC:
        assert configs[name].is_read_only, name
    secrets = {n for n, e in configs.items() if e.is_sensitive}  # passwords, never shown
    assert secrets == {n for n, d in BROKER_CONFIGS.items() if d.type == "password"}
    assert all(configs[name].value is None for name in secrets)
    assert configs["advertised.listeners"].value is None  # unset, as in Kafka
    assert configs["listeners"].value.startswith("PLAINTEXT://127.0.0.1:")


def test_kafka_python_sees_types_and_dynamic_keys(broker: sluice.EmbeddedBroker) -> None:
    kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers,
                              request_timeout_ms=15000)  # fmt: skip
    try:
        resource = KConfigResource(ConfigResourceType.BROKER, broker_resource(broker))
        everything = kadmin.describe_configs([resource], config_filter="all")["broker"][
            broker_resource(broker)
        ]
        assert everything["listeners"]["config_type"] == "STRING"
        assert everything["offsets.topic.replication.factor"]["config_type"] == "SHORT"
        assert everything["log.cleanup.policy"]["config_type"] == "LIST"
        assert everything["advertised.listeners"]["read_only"] is True
        dynamic = kadmin.describe_configs([resource], config_filter="dynamic")["broker"][
            broker_resource(broker)
        ]
        assert set(DYNAMIC) <= set(dynamic)
        assert not set(STATIC) & set(dynamic)
    finally:
        kadmin.close()


def test_aiokafka_sees_read_only_flags(broker: sluice.EmbeddedBroker) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource as AConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType as AType

    async def run() -> dict[str, bool]:
        client = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await client.start()
        try:
            resource = AConfigResource(AType.BROKER, broker_resource(broker))
            (response,) = await client.describe_configs([resource])
            (result,) = response.resources
            return {entry[0]: bool(entry[2]) for entry in result[4]}
        finally:
            await client.close()

    read_only = asyncio.run(asyncio.wait_for(run(), TIMEOUT_S))
    assert [read_only[n] for n in DYNAMIC] == [False] * len(DYNAMIC)
    assert [read_only[n] for n in STATIC] == [True] * len(STATIC)


def test_every_key_is_documented_and_typed(broker: sluice.EmbeddedBroker) -> None:
    body = build(
        load_request_schema(32, 4),
        resources=[{"resource_type": 4, "resource_name": broker_resource(broker),
                    "configuration_keys": None}],
        include_synonyms=True, include_documentation=True,
    )  # fmt: skip
    with socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(encode_request(1, body))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        payload = sock.recv(size, socket.MSG_WAITALL)
    _header, offset = entity_reader(ResponseHeader)(payload, 0)
    response, _ = entity_reader(response_type(32, 4))(payload, offset)
    (result,) = response.results
    entries = {entry.name: entry for entry in result.configs}
    assert set(entries) == set(BROKER_CONFIGS)
    for name, entry in entries.items():
        assert entry.documentation, name
        assert entry.config_type != 0, name
        if name in DYNAMIC + STATIC:
            assert entry.read_only is (name in STATIC), name
        assert entry.is_sensitive is (BROKER_CONFIGS[name].type == "password"), name
        if entry.is_sensitive:
            assert entry.value is None, name
