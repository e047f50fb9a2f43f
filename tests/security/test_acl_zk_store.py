"""ACLs in a coordination store laid out as Kafka's ZooKeeper mode, and two brokers'
authorizers following each other's changes through the notifications."""

from __future__ import annotations

import json
import queue
from collections.abc import Callable

from sluice.metastore import DataTree, InProcessStore
from sluice.security import KafkaPrincipal
from sluice.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from sluice.security.acl_store import ZkAclStore, decode_change
from sluice.security.authorizer import AclAuthorizer

ALICE = KafkaPrincipal("User", "alice")


def _broker(tree: DataTree) -> tuple[AclAuthorizer, queue.Queue[Callable[[], None]]]:
    store = ZkAclStore(InProcessStore(tree))
    authorizer = AclAuthorizer(store)
    authorizer.load()
    work: queue.Queue[Callable[[], None]] = queue.Queue()
    store.watch(authorizer.apply_change, authorizer.reload, work.put)
    return authorizer, work


def _run_one(work: queue.Queue[Callable[[], None]]) -> None:
    work.get(timeout=5)()


def test_acls_are_written_as_kafka_writes_them() -> None:
    tree = DataTree()
    a, _ = _broker(tree)
    a.create_acls([
        AclBinding(ResourcePattern(ResourceType.TOPIC, "orders"),
                   AccessControlEntry("User:alice", "*", AclOperation.READ,
                                      AclPermissionType.ALLOW)),
        AclBinding(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-", PatternType.PREFIXED),
                   AccessControlEntry("User:bob", "10.0.0.1", AclOperation.CLUSTER_ACTION,
                                      AclPermissionType.DENY)),
    ])  # fmt: skip
    zk = InProcessStore(tree)
    literal = json.loads(zk.get("/kafka-acl/Topic/orders")[0])
    assert literal == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
    ]}  # fmt: skip
    prefixed = json.loads(zk.get("/kafka-acl-extended/prefixed/TransactionalId/tx-")[0])
    assert prefixed["acls"][0]["operation"] == "ClusterAction"
    assert prefixed["acls"][0]["permissionType"] == "Deny"
    [literal_change] = zk.get_children("/kafka-acl-changes")
    assert literal_change.startswith("acl_changes_")
    assert zk.get(f"/kafka-acl-changes/{literal_change}")[0] == b"TOPIC:orders"
    [extended] = zk.get_children("/kafka-acl-extended-changes")
    event = json.loads(zk.get(f"/kafka-acl-extended-changes/{extended}")[0])
    assert event == {"version": 1, "resourceType": "TRANSACTIONAL_ID", "name": "tx-",
                     "patternType": "PREFIXED"}  # fmt: skip
    # the older spellings Kafka 2.x wrote are read too
    assert decode_change("/kafka-acl-changes", b"Topic:orders") == ResourcePattern(
        ResourceType.TOPIC, "orders"
    )
    # deleting the last ACL of a resource deletes its znode
    a.delete_acls([AclBindingFilter()])
    assert zk.exists("/kafka-acl/Topic/orders") is None


def test_a_broker_follows_another_brokers_changes() -> None:
    tree = DataTree()
    first, _ = _broker(tree)
    second, work = _broker(tree)
    read = AclBinding(
        ResourcePattern(ResourceType.TOPIC, "orders"),
        AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
    )
    assert not second.authorize(ALICE, "h", AclOperation.READ, ResourceType.TOPIC, "orders")
    first.create_acls([read])
    _run_one(work)  # the notification's watch fired: the second re-reads the resource
    assert second.authorize(ALICE, "h", AclOperation.READ, ResourceType.TOPIC, "orders")
    first.delete_acls([AclBindingFilter()])
    _run_one(work)
    assert not second.authorize(ALICE, "h", AclOperation.READ, ResourceType.TOPIC, "orders")
    # a third broker starting now loads what is there
    first.create_acls([read])
    third, _ = _broker(tree)
    assert third.acls(AclBindingFilter()) == [read]


def test_a_new_session_reloads_everything() -> None:
    """After a ZooKeeper session expiry the watches are gone: the store re-arms them and
    the authorizer reads every ACL again, missing nothing changed meanwhile."""
    tree = DataTree()
    first, _ = _broker(tree)
    zk = InProcessStore(tree)
    store = ZkAclStore(zk)
    second = AclAuthorizer(store)
    second.load()
    work: queue.Queue[Callable[[], None]] = queue.Queue()
    store.watch(second.apply_change, second.reload, work.put)
    zk.expire_session()
    read = AclBinding(
        ResourcePattern(ResourceType.GROUP, "g"),
        AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
    )
    first.create_acls([read])
    while not second.authorize(ALICE, "h", AclOperation.READ, ResourceType.GROUP, "g"):
        _run_one(work)  # the re-arm and reload after the new session
    first.delete_acls([AclBindingFilter()])
    while second.authorize(ALICE, "h", AclOperation.READ, ResourceType.GROUP, "g"):
        _run_one(work)  # the re-armed watch fired (each wait is bounded)
