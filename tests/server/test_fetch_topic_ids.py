"""Fetch v13-17 name topics by id (KIP-516): raw requests to a broker. Records come back
under the topic's id; an unknown id, and the old id of a topic deleted and recreated
while a fetch session held it, are answered UNKNOWN_TOPIC_ID; v15 takes the replica id
from ReplicaState; kafka-python (Fetch 12) and confluent-kafka (librdkafka fetches with
v16 and topic ids) consume the same records."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sluice.protocol import ErrorCode
from sluice.server.messages import build
from sluice.testing import EmbeddedBroker
from support.clients import create_topic, produce
from support.waiting import wait_until
from support.wire import RawClient

pytestmark = pytest.mark.integration


def _fetch(version: int, topic_id: Any, *, session_epoch: int = -1, session_id: int = 0,
           partitions: tuple[int, ...] = (0,), forgotten: tuple[Any, ...] = ()) -> Any:  # fmt: skip
    from sluice.protocol.apis import request_type

    values: dict[str, Any] = {
        "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": session_epoch, "rack_id": "",
        "topics": [{"topic_id": topic_id, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0,
             "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
            for p in partitions
        ]}],
        "forgotten_topics_data": [{"topic_id": t, "partitions": [0]} for t in forgotten],
    }  # fmt: skip
    if version < 15:
        values["replica_id"] = -1
    return build(request_type(1, version), **values)


def _topic_id(client: RawClient, topic: str) -> uuid.UUID:
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.types import TopicName

    body: Any = client.request(
        MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False,
        )
    )  # fmt: skip
    (found,) = body.topics
    assert found.topic_id is not None
    return found.topic_id


@pytest.mark.parametrize("version", [13, 15, 16, 17])
def test_fetch_by_topic_id(version: int) -> None:
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, "by-id", 1)
        produce(bootstrap, "by-id", [b"a", b"b", b"c"], 1)
        client = RawClient(bootstrap)
        try:
            topic_id = _topic_id(client, "by-id")
            unknown = uuid.uuid4()
            body: Any = client.request(_fetch(version, topic_id))
            assert body.error_code == ErrorCode.none
            (topic,) = body.responses
            assert topic.topic_id == topic_id
            (partition,) = topic.partitions
            assert partition.error_code == ErrorCode.none and partition.high_watermark == 3
            assert partition.records and len(partition.records) > 0
            body = client.request(_fetch(version, unknown))
            (topic,) = body.responses
            assert topic.topic_id == unknown
            assert [p.error_code for p in topic.partitions] == [ErrorCode.unknown_topic_id]
        finally:
            client.close()


def test_a_recreated_topic_is_unknown_to_the_session_that_held_its_old_id() -> None:
    from confluent_kafka.admin import AdminClient

    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, "again", 1)
        produce(bootstrap, "again", [b"x"], 1)
        client = RawClient(bootstrap)
        try:
            old = _topic_id(client, "again")
            opened: Any = client.request(_fetch(16, old, session_epoch=0))
            session = opened.session_id
            assert session != 0 and opened.responses[0].topic_id == old
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.delete_topics(["again"])["again"].result(30)
            wait_until(lambda: "again" not in admin.list_topics(timeout=5).topics, 30, "gone")
            create_topic(bootstrap, "again", 1)
            new = _topic_id(client, "again")
            assert new != old
            body: Any = client.request(_incremental(session))
            (topic,) = body.responses
            assert topic.topic_id == old
            assert [p.error_code for p in topic.partitions] == [ErrorCode.unknown_topic_id]
            # The client forgets the old id and asks for the new one in the same session.
            body = client.request(_incremental(session, 2, forgotten=old, added=new))
            assert body.error_code == ErrorCode.none
            assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in body.responses] == [
                (new, [ErrorCode.none])
            ]
        finally:
            client.close()


def _incremental(session_id: int, epoch: int = 1, *, forgotten: Any = None,
                 added: Any = None) -> Any:  # fmt: skip
    """An incremental Fetch v16 of the session: ``added``'s partition 0 asked for from
    offset 0, ``forgotten``'s partition 0 forgotten (topic ids; None: none)."""
    from sluice.protocol.apis import request_type

    topics = (
        []
        if added is None
        else [
            {
                "topic_id": added,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ]
    )
    gone = [] if forgotten is None else [{"topic_id": forgotten, "partitions": [0]}]
    return build(
        request_type(1, 16), max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
        session_id=session_id, session_epoch=epoch, rack_id="", topics=topics,
        forgotten_topics_data=gone,
    )  # fmt: skip


def test_clients_consume_with_and_without_topic_ids() -> None:
    from confluent_kafka import Consumer

    from support.clients import consume_kafka_python

    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, "both", 1)
        values = [b"v%d" % i for i in range(100)]
        produce(bootstrap, "both", values, 1)
        versions: set[int] = set()
        broker.control(1, lambda request: versions.add(request.api_version), keep=True)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ids",
                             "auto.offset.reset": "earliest"})  # fmt: skip
        got: list[bytes] = []
        try:
            consumer.subscribe(["both"])

            def read() -> bool:
                for message in consumer.consume(100, 0.5):
                    if message.error() is None:
                        got.append(message.value())
                return len(got) >= len(values)

            wait_until(read, 30, "confluent-kafka read everything")
        finally:
            consumer.close()
        assert got == values
        assert versions == {16}  # librdkafka 2.16 fetches by topic id
        versions.clear()
        assert [c[1] for c in consume_kafka_python(bootstrap, "both", len(values))] == values
        assert versions == {12}  # kafka-python 3.0 by topic name
