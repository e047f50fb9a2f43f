"""ACLs on a 3-broker cluster with a real ZooKeeper: an ACL created through one broker is
written to /kafka-acl with a /kafka-acl-changes notification, and every other broker's
authorizer follows it (DescribeAcls on each, and a produce refused by the leader)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from sluice.client import Admin
from sluice.protocol import ApiKey
from sluice.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from sluice.testing import EmbeddedCluster
from support.cluster import partition_metadata
from support.waiting import wait_until


@pytest.fixture
def acl_cluster(cluster_prerequisites: None) -> Iterator[EmbeddedCluster]:
    # allow.everyone.if.no.acl.found: the brokers' own (anonymous) replica fetches and
    # the clients may do what no ACL speaks of
    overrides = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                 "allow.everyone.if.no.acl.found": "true"}  # fmt: skip
    with EmbeddedCluster(brokers=3, broker_ids=[1, 2, 3], zookeeper=True,
                         overrides=overrides) as cluster:  # fmt: skip
        yield cluster


def _acls_on(admin: Admin, broker_id: int) -> list[tuple[str, str]]:
    body = admin._client.send(
        broker_id, ApiKey.DESCRIBE_ACLS, resource_type_filter=int(ResourceType.ANY),
        resource_name_filter=None, pattern_type_filter=int(PatternType.ANY),
        principal_filter=None, host_filter=None, operation=int(AclOperation.ANY),
        permission_type=int(AclPermissionType.ANY),
    )  # fmt: skip
    return [(r.resource_name, a.principal) for r in body.resources for a in r.acls]


def test_an_acl_created_on_one_broker_applies_on_the_others(
    acl_cluster: EmbeddedCluster,
) -> None:
    cluster = acl_cluster
    creator = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    creator.create_topics([NewTopic("locked", 1, 3)])["locked"].result(30)
    wait_until(lambda: partition_metadata(cluster.bootstrap_servers, "locked").leader >= 0,
               30, "a leader for locked")  # fmt: skip
    leader = partition_metadata(cluster.bootstrap_servers, "locked").leader
    other = next(b for b in (1, 2, 3) if b != leader)

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "message.timeout.ms": 5000})  # fmt: skip
    outcome: list[KafkaError | None] = []
    producer.produce("locked", b"before", on_delivery=lambda e, _m: outcome.append(e))
    producer.flush(15)
    assert outcome == [None]

    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin._client.refresh_metadata([])
        body = admin._client.send(
            other, ApiKey.CREATE_ACLS,
            creations=[{"resource_type": int(ResourceType.TOPIC), "resource_name": "locked",
                        "resource_pattern_type": int(PatternType.LITERAL),
                        "principal": "User:ANONYMOUS", "host": "*",
                        "operation": int(AclOperation.WRITE),
                        "permission_type": int(AclPermissionType.DENY)}],
        )  # fmt: skip
        assert [int(r.error_code) for r in body.results] == [0]
        created = time.monotonic()
        wait_until(
            lambda: all(_acls_on(admin, b) == [("locked", "User:ANONYMOUS")] for b in (1, 2, 3)),
            5, "the ACL on every broker",
        )  # fmt: skip
        print(f"ACL on all 3 brokers {time.monotonic() - created:.3f} s after CreateAcls")

    # the leader, another broker than the one that took the ACL, refuses the write
    outcome.clear()
    producer.produce("locked", b"after", on_delivery=lambda e, _m: outcome.append(e))
    producer.flush(15)
    assert len(outcome) == 1 and outcome[0] is not None
    assert outcome[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=15)
    try:
        data, _ = zk.get("/kafka-acl/Topic/locked")
        assert b'"operation":"Write"' in data and b'"permissionType":"Deny"' in data
        assert zk.get_children("/kafka-acl-changes")
    finally:
        zk.stop()
        zk.close()


def test_controller_requests_need_cluster_action(acl_cluster: EmbeddedCluster) -> None:
    """As Kafka: LeaderAndIsr, UpdateMetadata, StopReplica and ControlledShutdown need
    CLUSTER_ACTION on the cluster; without it the connection is closed unanswered."""
    from sluice.server.inter_broker import (
        CONTROLLED_SHUTDOWN,
        encode_controlled_shutdown_request,
        raw_request_frame,
    )
    from support.wire import RawClient

    frame = raw_request_frame(
        CONTROLLED_SHUTDOWN, 7, encode_controlled_shutdown_request(99, 12345), "intruder"
    )
    client = RawClient(acl_cluster.bootstrap_of(1))
    try:
        client.send_raw(frame)
        assert client.read_frame() is not None  # no ACL on the cluster: everyone may
    finally:
        client.close()
    with Admin({"bootstrap.servers": acl_cluster.bootstrap_of(1)}) as admin:
        admin.create_acls([
            AclBinding(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME),
                       AccessControlEntry("User:ANONYMOUS", "*", AclOperation.CLUSTER_ACTION,
                                          AclPermissionType.DENY)),
        ])  # fmt: skip
    client = RawClient(acl_cluster.bootstrap_of(1))
    try:
        client.send_raw(frame)
        assert client.read_frame() is None  # closed
    finally:
        client.close()
