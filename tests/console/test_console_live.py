"""The console's JSON API against a live broker whose topics, records and groups were
made with confluent-kafka and kafka-python, checked against what those clients (and
Sluice's admin client, as `sluice consumer-groups --describe` reports lag) see."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka import KafkaAdminClient, KafkaProducer

import sluice
from sluice.client import Admin
from support.console import ConsoleHttp, console_state
from support.waiting import wait_until


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"console.port": 0, "offsets.topic.num.partitions": 2}


@pytest.fixture(scope="module")
def state(broker: sluice.EmbeddedBroker) -> Iterator[None]:
    with console_state(broker.bootstrap_servers):
        yield


def _decode(field: dict[str, Any] | None) -> bytes | None:
    return None if field is None else base64.b64decode(field["base64"])


def test_cluster_topics_and_partitions(broker: sluice.EmbeddedBroker, state: Any) -> None:
    api = ConsoleHttp(broker)
    cluster = api.get("/api/cluster")
    assert cluster["brokers"] == [{"id": 0, "host": "127.0.0.1", "port": broker.port,
                                   "rack": None}]  # fmt: skip
    assert cluster["controller_id"] == 0 and cluster["cluster_id"] == broker.broker.cluster_id
    assert cluster["version"] == sluice.__version__

    topics = {t["name"]: t for t in api.get("/api/topics")["topics"]}
    assert topics["orders"]["partitions"] == 3 and topics["orders"]["replication_factor"] == 1
    assert topics["orders"]["size_bytes"] > 30 * 10
    assert "__consumer_offsets" not in topics
    internal = {t["name"] for t in api.get("/api/topics?internal=true")["topics"]}
    assert "__consumer_offsets" in internal

    orders = api.get("/api/topics/orders")
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in orders["partitions"]] \
        == [(p, 0, [0], [0]) for p in range(3)]  # fmt: skip
    assert [(p["start_offset"], p["end_offset"]) for p in orders["partitions"]] == [(0, 10)] * 3
    assert {c["name"]: c["value"] for c in orders["configs"]}["cleanup.policy"] == "delete"


def test_records_newest_first_with_keys_values_and_headers(
    broker: sluice.EmbeddedBroker, state: Any
) -> None:
    api = ConsoleHttp(broker)
    page = api.get("/api/topics/orders/partitions/1/records?limit=4")
    assert (page["start_offset"], page["end_offset"]) == (0, 10)
    records = page["records"]
    assert [r["offset"] for r in records] == [6, 7, 8, 9]
    assert [_decode(r["key"]) for r in records] == [b"k19", b"k22", b"k25", b"k28"]
    assert [json.loads(_decode(r["value"]) or b"") for r in records] == [
        {"n": 19},
        {"n": 22},
        {"n": 25},
        {"n": 28},
    ]
    assert records[0]["headers"] == [
        {
            "key": "source",
            "value": {"base64": base64.b64encode(b"test").decode(), "size": 4, "truncated": False},
        }
    ]
    binary = api.get("/api/topics/events/partitions/0/records")["records"]
    assert [_decode(r["value"]) for r in binary] == [bytes([0, 1, 2, i]) for i in range(5)]
    assert all(r["key"] is None for r in binary)
    status, body = api.request("GET", "/api/topics/events/partitions/7/records")
    assert (status, body["code"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")


def test_groups_members_and_lag(broker: sluice.EmbeddedBroker, state: Any) -> None:
    api = ConsoleHttp(broker)
    groups = {g["group_id"]: g for g in api.get("/api/groups")["groups"]}
    assert groups["billing"]["state"] == "Empty" and groups["billing"]["members"] == 0
    assert groups["live"]["state"] == "Stable" and groups["live"]["members"] == 1

    billing = api.get("/api/groups/billing")
    assert [(o["topic"], o["partition"], o["committed"], o["end_offset"], o["lag"])
            for o in billing["offsets"]] == [("orders", p, 4, 10, 6) for p in range(3)]  # fmt: skip
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        lag = admin.group_lag("billing")  # what `sluice consumer-groups --describe` shows
    assert {(o["topic"], o["partition"]): o["lag"] for o in billing["offsets"]} == {
        (tp.topic, tp.partition): n for tp, n in lag.items()
    }
    live = api.get("/api/groups/live")
    assert live["state"] == "Stable" and live["protocol_type"] == "consumer"
    assert [m["assignment"] for m in live["members"]] == [[{"topic": "events", "partition": 0}]]
    assert api.request("GET", "/api/groups/nobody")[0] == 404


def test_reset_offsets_of_an_empty_group_only(broker: sluice.EmbeddedBroker, state: Any) -> None:
    api = ConsoleHttp(broker)
    status, body = api.request("POST", "/api/groups/billing/offsets", {"to": "earliest"})
    assert status == 200
    assert body["offsets"] == [{"topic": "orders", "partition": p, "offset": 0} for p in range(3)]
    check = ConfluentConsumer({"bootstrap.servers": broker.bootstrap_servers,
                               "group.id": "billing"})  # fmt: skip
    try:
        committed = check.committed([ConfluentTopicPartition("orders", p) for p in range(3)], 30)
        assert [c.offset for c in committed] == [0, 0, 0]
    finally:
        check.close()
    status, body = api.request("POST", "/api/groups/billing/offsets",
                               {"to": "offset", "offset": 7, "topic": "orders"})  # fmt: skip
    assert status == 200 and {o["offset"] for o in body["offsets"]} == {7}
    assert [o["lag"] for o in api.get("/api/groups/billing")["offsets"]] == [3, 3, 3]
    status, body = api.request("POST", "/api/groups/billing/offsets",
                               {"to": "offset", "offset": 999})  # fmt: skip
    assert {o["offset"] for o in body["offsets"]} == {10}  # clamped to the end
    status, body = api.request("POST", "/api/groups/live/offsets", {"to": "latest"})
    assert (status, body["code"]) == (409, "NON_EMPTY_GROUP")


def test_create_alter_and_delete_a_topic(broker: sluice.EmbeddedBroker, state: Any) -> None:
    api = ConsoleHttp(broker)
    new = {"name": "made-here", "partitions": 2, "configs": {"retention.ms": "60000"}}
    status, body = api.request("POST", "/api/topics", new)
    assert (status, body) == (201, {"name": "made-here", "partitions": 2})
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
    assert len(metadata.topics["made-here"].partitions) == 2
    status, body = api.request("POST", "/api/topics", {"name": "made-here"})
    assert (status, body["code"]) == (409, "TOPIC_ALREADY_EXISTS")
    status, body = api.request("POST", "/api/topics", {"name": "bad name!"})
    assert (status, body["code"]) == (400, "INVALID_TOPIC_EXCEPTION")

    change = {"set": {"cleanup.policy": "compact"}, "delete": ["retention.ms"]}
    status, body = api.request("POST", "/api/topics/made-here/configs", change)
    assert status == 200
    python_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        from kafka.admin import ConfigResource as KafkaConfigResource
        from kafka.admin import ConfigResourceType

        resource = KafkaConfigResource(ConfigResourceType.TOPIC, "made-here")
        entries = python_admin.describe_configs([resource], config_filter="all")["topic"][
            "made-here"
        ]
        assert entries["cleanup.policy"]["value"] == "compact"
        assert entries["retention.ms"]["value"] == "604800000"  # the override removed
    finally:
        python_admin.close()
    status, body = api.request("POST", "/api/topics/made-here/configs", {"set": {"nope": "1"}})
    assert status == 400 and body["code"] == "INVALID_CONFIG"

    assert api.request("DELETE", "/api/topics/made-here")[0] == 200
    confluent = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    wait_until(lambda: "made-here" not in confluent.list_topics(timeout=10).topics, 30,
               "the topic gone")  # fmt: skip
    assert api.request("DELETE", "/api/topics/made-here")[1]["code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    described = confluent.describe_configs([ConfigResource("topic", "orders")])
    assert next(iter(described.values())).result(10)["cleanup.policy"].value == "delete"


def test_bad_input_gets_4xx_and_the_broker_keeps_serving(
    broker: sluice.EmbeddedBroker, state: Any
) -> None:
    api = ConsoleHttp(broker)
    assert api.request("POST", "/api/topics", raw=b"{" + b" " * (128 * 1024))[0] == 413
    assert api.request("POST", "/api/topics", raw=b"{oops")[1]["code"] == "BAD_REQUEST"
    assert api.request("POST", "/api/topics", {"name": "x"},
                       headers={"Content-Type": "text/plain"})[0] == 415  # fmt: skip
    status, body = api.request("POST", "/api/topics", {"name": "x"},
                               headers={"Origin": "http://evil.example"})  # fmt: skip
    assert (status, body["code"]) == (403, "CROSS_ORIGIN")
    assert api.request("GET", "/api/topics/missing")[0] == 404
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    producer.send("events", b"still serving", partition=0).get(timeout=30)
    producer.close()
    newest = api.get("/api/topics/events/partitions/0/records?limit=1")["records"]
    assert _decode(newest[0]["value"]) == b"still serving"
