"""Manual replica assignment (KIP-195) on one broker, with confluent-kafka, kafka-python
and aiokafka: CreateTopics and CreatePartitions with ``assignments`` are honoured, bad
ones refused with INVALID_REPLICA_ASSIGNMENT and Kafka's message, and the topic is usable
(Metadata has its leaders) as soon as the creation is answered."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient
from kafka.admin import NewPartitions as KNewPartitions
from kafka.admin import NewTopic as KNewTopic

import sluice
from sluice.protocol import ErrorCode

TIMEOUT_S = 15.0
_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}-{time.monotonic_ns() % 1_000_000}"


@pytest.fixture(scope="module")
def admin(broker: sluice.EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


@pytest.fixture(scope="module")
def kadmin(broker: sluice.EmbeddedBroker) -> Any:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=15000)
    yield client
    client.close()


def led_partitions(broker: sluice.EmbeddedBroker, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, replicas) as the broker's metadata has them right now."""
    cache = broker.broker.metadata_cache
    return {p.partition: (p.leader, list(p.replicas)) for p in cache.partitions(topic)}


def kafka_error(future: Any) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=TIMEOUT_S)
    error: KafkaError = info.value.args[0]
    return error


def test_confluent_create_topic_and_partitions_with_assignments(
    broker: sluice.EmbeddedBroker, admin: AdminClient
) -> None:
    me = broker.broker.broker_id
    name = unique("manual-c")
    topic = NewTopic(name, 2, replica_assignment=[[me], [me]])
    admin.create_topics([topic], operation_timeout=10)[name].result(timeout=TIMEOUT_S)
    assert led_partitions(broker, name) == {0: (me, [me]), 1: (me, [me])}

    grow = NewPartitions(name, 4, replica_assignment=[[me], [me]])
    admin.create_partitions([grow], operation_timeout=10)[name].result(timeout=TIMEOUT_S)
    assert led_partitions(broker, name) == {p: (me, [me]) for p in range(4)}

    error = kafka_error(
        admin.create_partitions([NewPartitions(name, 6, replica_assignment=[[me + 7], [me]])])[name]
    )
    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert f"includes broker {me + 7}, but no such broker is registered" in error.str()
    error = kafka_error(
        admin.create_partitions([NewPartitions(name, 6, replica_assignment=[[me]])])[name]
    )
    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "Attempted to add 2 additional partition(s), but only 1" in error.str()
    bad = unique("manual-bad")
    error = kafka_error(admin.create_topics([NewTopic(bad, 1, replica_assignment=[[me, me]])])[bad])
    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "includes the broker" in error.str() and "more than once" in error.str()
    assert len(led_partitions(broker, name)) == 4
    assert led_partitions(broker, bad) == {}


def test_kafka_python_create_partitions_with_assignments(
    broker: sluice.EmbeddedBroker, kadmin: Any
) -> None:
    me = broker.broker.broker_id
    name = unique("manual-k")
    kadmin.create_topics([KNewTopic(name, 1, 1)])
    assert led_partitions(broker, name) == {0: (me, [me])}
    response = kadmin.create_partitions({name: KNewPartitions(3, [[me], [me]])})
    assert [(r.name, r.error_code) for r in response.results] == [(name, 0)]
    assert led_partitions(broker, name) == {p: (me, [me]) for p in range(3)}
    response = kadmin.create_partitions(
        {name: KNewPartitions(5, [[me], [me, me]])}, raise_errors=False
    )
    (result,) = response.results
    assert result.error_code == ErrorCode.invalid_replica_assignment.value
    assert result.error_message == (
        f"The manual partition assignment includes the broker {me} more than once."
    )


def test_kafka_python_create_topic_with_assignments_errors(
    broker: sluice.EmbeddedBroker, kadmin: Any
) -> None:
    me = broker.broker.broker_id
    cases = [
        (-1, -1, {0: [me], 2: [me]}, ErrorCode.invalid_replica_assignment,
         "partitions should be a consecutive 0-based integer sequence"),
        (2, -1, {0: [me]}, ErrorCode.invalid_request,
         "A manual partition assignment was specified, but numPartitions was not set to -1."),
        (-1, 1, {0: [me]}, ErrorCode.invalid_request,
         "A manual partition assignment was specified, but replication factor was not set "
         "to -1."),
    ]  # fmt: skip
    checked = unique("manual-v")
    response = kadmin.create_topics([KNewTopic(checked, -1, -1, {0: [me], 1: [me]})],
                                    validate_only=True)  # fmt: skip
    assert [(t["name"], t["error_code"]) for t in response["topics"]] == [(checked, 0)]
    assert led_partitions(broker, checked) == {}  # checked only
    for partitions, rf, assignments, code, message in cases:
        name = unique("manual-e")
        response = kadmin.create_topics(
            [KNewTopic(name, partitions, rf, assignments)], raise_errors=False
        )
        got = [(t["name"], t["error_code"], t["error_message"]) for t in response["topics"]]
        assert got == [(name, code.value, message)]
        assert led_partitions(broker, name) == {}


def test_aiokafka_create_partitions_with_assignments(broker: sluice.EmbeddedBroker) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewPartitions as ANewPartitions
    from aiokafka.admin import NewTopic as ANewTopic

    me = broker.broker.broker_id
    name = unique("manual-a")

    async def run() -> None:
        client = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await client.start()
        try:
            await client.create_topics([ANewTopic(name, -1, -1, {0: [me]})])
            assert led_partitions(broker, name) == {0: (me, [me])}
            await client.create_partitions({name: ANewPartitions(2, [[me]])})
            assert led_partitions(broker, name) == {0: (me, [me]), 1: (me, [me])}
        finally:
            await client.close()

    asyncio.run(asyncio.wait_for(run(), TIMEOUT_S))
