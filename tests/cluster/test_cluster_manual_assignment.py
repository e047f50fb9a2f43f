"""Manual replica assignment and CreateTopics answered once leaders exist, on a 3-broker
cluster on a real ZooKeeper, with confluent-kafka, kafka-python and raw requests.

The assignment goes to the topic's ZooKeeper znode and the controller creates each
replica where it is assigned; the broker that received the request answers only once its
own metadata has a leader for every new partition (Kafka's DelayedCreatePartitions), so
a Metadata request to it right after the answer finds them."""

from __future__ import annotations

import datetime
import itertools
import socket
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient
from kafka.admin import NewPartitions as KNewPartitions
from kio.serial import entity_reader

from sluice.protocol import ErrorCode, encode_request
from sluice.protocol.apis import load_request_schema, response_type
from sluice.server.messages import build
from sluice.testing import EmbeddedCluster
from support.waiting import wait_until

TIMEOUT_S = 20.0
_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}-{time.monotonic_ns() % 1_000_000}"


def layout(
    cluster: EmbeddedCluster, broker_id: int, topic: str
) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, replicas) in ``broker_id``'s Metadata answer now."""
    body = cluster.raw_metadata(broker_id, [topic])
    (t,) = body.topics
    return {int(p.partition_index): (int(p.leader_id), [int(r) for r in p.replica_nodes])
            for p in t.partitions}  # fmt: skip


def hosts(cluster: EmbeddedCluster, topic: str, partition: int) -> set[int]:
    """The brokers with a log directory for the partition."""
    return {
        b for b in cluster.broker_ids
        if (cluster.data_dir / f"data-{b}" / f"{topic}-{partition}").is_dir()
    }  # fmt: skip


def raw_call(cluster: EmbeddedCluster, broker_id: int, api_key: int, version: int,
             **values: Any) -> Any:  # fmt: skip
    """One request (a version with a v0 response header) to ``broker_id`` alone."""
    body = build(load_request_schema(api_key, version), **values)
    port = cluster.ports[broker_id]
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        sock.sendall(encode_request(7, body))
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = sock.recv(65536)
            assert chunk, "the broker closed the connection"
            data += chunk
    response, _ = entity_reader(response_type(api_key, version))(data[4:], 4)  # past the id
    return response


def raw_create_topic(
    cluster: EmbeddedCluster, broker_id: int, name: str, assignment: dict[int, list[int]],
    timeout_ms: int,
) -> Any:  # fmt: skip
    """A CreateTopics v4 request to ``broker_id`` alone; the topic's result."""
    response = raw_call(
        cluster, broker_id, 19, 4,
        topics=[{"name": name, "num_partitions": -1, "replication_factor": -1,
                 "assignments": [{"partition_index": p, "broker_ids": r}
                                 for p, r in assignment.items()],
                 "configs": []}],
        timeout=datetime.timedelta(milliseconds=timeout_ms), validate_only=False,
    )  # fmt: skip
    (result,) = response.topics
    return result


def raw_create_partitions(
    cluster: EmbeddedCluster, broker_id: int, name: str, count: int, new: list[list[int]]
) -> Any:
    """A CreatePartitions v1 request to ``broker_id`` alone; the topic's result."""
    response = raw_call(
        cluster, broker_id, 37, 1,
        topics=[{"name": name, "count": count,
                 "assignments": [{"broker_ids": r} for r in new]}],
        timeout=datetime.timedelta(milliseconds=15000), validate_only=False,
    )  # fmt: skip
    (result,) = response.results
    return result


def test_confluent_assignments_honoured_and_led_at_once(cluster3: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    controller = cluster3.controller_id
    name = unique("assigned")
    plan = [[1, 2], [2, 3], [3, 1]]
    topic = NewTopic(name, 3, replica_assignment=plan)
    admin.create_topics([topic], operation_timeout=15)[name].result(timeout=TIMEOUT_S)
    # librdkafka sends CreateTopics to the controller: its metadata has every leader now.
    assert layout(cluster3, controller, name) == {p: (r[0], r) for p, r in enumerate(plan)}
    for p, replicas in enumerate(plan):
        wait_until(lambda p=p, r=replicas: hosts(cluster3, name, p) == set(r), TIMEOUT_S,
                   f"partition {p} on {replicas}")  # fmt: skip

    grow = NewPartitions(name, 5, replica_assignment=[[3, 2], [1, 3]])
    admin.create_partitions([grow], operation_timeout=15)[name].result(timeout=TIMEOUT_S)
    got = layout(cluster3, controller, name)
    assert (got[3], got[4]) == ((3, [3, 2]), (1, [1, 3]))
    wait_until(lambda: hosts(cluster3, name, 3) == {2, 3}, TIMEOUT_S, "partition 3 on 3, 2")

    refused = NewPartitions(name, 6, replica_assignment=[[1, 9]])
    with pytest.raises(KafkaException) as info:
        admin.create_partitions([refused])[name].result(timeout=TIMEOUT_S)
    error = info.value.args[0]
    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "includes broker 9, but no such broker is registered" in error.str()
    inconsistent = NewPartitions(name, 6, replica_assignment=[[1, 2, 3]])
    with pytest.raises(KafkaException) as info:
        admin.create_partitions([inconsistent])[name].result(timeout=TIMEOUT_S)
    assert "not consistent with previous partitions, which have 2" in info.value.args[0].str()
    assert len(layout(cluster3, controller, name)) == 5


def test_kafka_python_create_partitions_with_assignments(cluster3: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    name = unique("kp-assigned")
    admin.create_topics([NewTopic(name, 1, 3)])[name].result(timeout=TIMEOUT_S)
    kadmin = KafkaAdminClient(bootstrap_servers=cluster3.bootstrap_servers,
                              request_timeout_ms=20000)  # fmt: skip
    try:
        response = kadmin.create_partitions({name: KNewPartitions(3, [[2, 3, 1], [3, 1, 2]])})
        assert [(r.name, r.error_code) for r in response.results] == [(name, 0)]
        got = layout(cluster3, cluster3.controller_id, name)
        assert (got[1], got[2]) == ((2, [2, 3, 1]), (3, [3, 1, 2]))
        response = kadmin.create_partitions(
            {name: KNewPartitions(4, [[2, 2, 1]])}, raise_errors=False
        )
        (result,) = response.results
        assert result.error_code == ErrorCode.invalid_replica_assignment.value
        assert result.error_message == (
            "The manual partition assignment includes the broker 2 more than once."
        )
    finally:
        kadmin.close()


def test_any_broker_answers_create_topics_once_its_metadata_has_the_leaders(
    cluster3: EmbeddedCluster,
) -> None:
    """librdkafka's 0107 asks the broker that created a topic for its metadata at once."""
    controller = cluster3.controller_id
    others = [b for b in cluster3.broker_ids if b != controller]
    for round_ in range(4):
        receiver = others[round_ % len(others)]
        name = unique("led")
        plan = {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [receiver, controller]}
        result = raw_create_topic(cluster3, receiver, name, plan, timeout_ms=15000)
        assert result.error_code == ErrorCode.none
        got = layout(cluster3, receiver, name)
        assert got == {p: (r[0], r) for p, r in plan.items()}, f"round {round_}"


def test_create_topics_times_out_while_no_leader_is_elected(cluster3: EmbeddedCluster) -> None:
    """With the controller stopped (SIGSTOP, well inside the ZooKeeper session), the topic
    is written but no leader comes: REQUEST_TIMED_OUT at the request's timeout, and the
    topic is led once the controller runs again."""
    controller = cluster3.controller_id
    receiver = next(b for b in cluster3.broker_ids if b != controller)
    name = unique("late")
    cluster3.pause(controller)
    try:
        started = time.monotonic()
        result = raw_create_topic(cluster3, receiver, name, {0: [receiver]}, timeout_ms=1500)
        waited = time.monotonic() - started
    finally:
        cluster3.resume(controller)
    assert (result.error_code, result.error_message) == (ErrorCode.request_timed_out, None)
    assert waited >= 1.4
    wait_until(lambda: layout(cluster3, receiver, name) == {0: (receiver, [receiver])},
               TIMEOUT_S, "the topic led once the controller runs")  # fmt: skip


def test_each_broker_reports_kafkas_config_flags(cluster3: EmbeddedCluster) -> None:
    """DescribeConfigs of each member's BROKER resource (answered by that broker) carries
    the read-only flags (what Sluice changes at run time) and Kafka's types, with
    confluent-kafka and kafka-python."""
    from confluent_kafka.admin import ConfigResource
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType

    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    kadmin = KafkaAdminClient(bootstrap_servers=cluster3.bootstrap_servers,
                              request_timeout_ms=20000)  # fmt: skip
    try:
        for broker_id in cluster3.broker_ids:
            resource = ConfigResource("broker", str(broker_id))
            configs = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
            assert configs["advertised.listeners"].value == (
                f"PLAINTEXT://127.0.0.1:{cluster3.ports[broker_id]}"
            )
            assert configs["advertised.listeners"].is_read_only  # not changed at run time
            assert configs["zookeeper.connect"].is_read_only
            dynamic = kadmin.describe_configs(
                [KConfigResource(ConfigResourceType.BROKER, str(broker_id))],
                config_filter="dynamic",
            )["broker"][str(broker_id)]
            assert {"log.retention.ms", "max.connections"} <= set(dynamic)
            assert dynamic["log.retention.ms"]["config_type"] == "LONG"
            assert not {"broker.id", "listeners", "advertised.listeners"} & set(dynamic)
    finally:
        kadmin.close()


def test_partitions_added_through_brokers_that_host_none_of_them(
    cluster3: EmbeddedCluster,
) -> None:
    """Each broker counts the topic's partitions from ZooKeeper, not from the replicas it
    hosts: partitions added elsewhere are counted."""
    name = unique("grown")
    assert raw_create_topic(cluster3, 1, name, {0: [1], 1: [2]}, 15000).error_code == 0
    result = raw_create_partitions(cluster3, 2, name, 3, [[3]])  # on 3, through 2
    assert (result.error_code, result.error_message) == (ErrorCode.none, None)
    result = raw_create_partitions(cluster3, 1, name, 5, [[2], [3]])  # through 1
    assert (result.error_code, result.error_message) == (ErrorCode.none, None)
    assert layout(cluster3, 1, name) == {0: (1, [1]), 1: (2, [2]), 2: (3, [3]), 3: (2, [2]),
                                         4: (3, [3])}  # fmt: skip
    result = raw_create_partitions(cluster3, 1, name, 7, [[2]])
    assert (result.error_code, result.error_message) == (
        ErrorCode.invalid_replica_assignment,
        "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
    )
