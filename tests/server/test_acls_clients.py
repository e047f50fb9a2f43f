"""ACL matrices per API against a broker with Kafka's AclAuthorizer, driven by
confluent-kafka and kafka-python as ``User:ANONYMOUS`` (PLAINTEXT): each operation is
refused with Kafka's error code until the ACL Kafka documents for it is granted.

The ACLs are set in process (``EmbeddedBroker.broker.authorizer``) except where the
ACL APIs themselves are under test; each test starts with none.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AclBinding as CAclBinding,
)
from confluent_kafka.admin import (
    AclBindingFilter as CAclBindingFilter,
)
from confluent_kafka.admin import (
    AclOperation as CAclOperation,
)
from confluent_kafka.admin import (
    AclPermissionType as CAclPermissionType,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from confluent_kafka.admin import (
    ResourcePatternType as CPatternType,
)
from confluent_kafka.admin import (
    ResourceType as CResourceType,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import errors as kerrors
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
)
from kafka.admin import ResourcePattern as KResourcePattern
from kafka.admin import ResourcePatternFilter as KResourcePatternFilter
from kafka.admin import ResourceType as KResourceType

import sluice
from sluice.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from sluice.security.authorizer import AclAuthorizer

TIMEOUT_S = 15.0
ANON = "User:ANONYMOUS"
Op, RT = AclOperation, ResourceType


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "offsets.topic.num.partitions": 2,
        "transaction.state.log.num.partitions": 2,
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
    }


def _authorizer(broker: sluice.EmbeddedBroker) -> AclAuthorizer:
    assert broker.broker is not None and broker.broker.authorizer is not None
    return broker.broker.authorizer


@pytest.fixture(autouse=True)
def no_acls(broker: sluice.EmbeddedBroker) -> Iterator[None]:
    _authorizer(broker).delete_acls([AclBindingFilter()])
    yield
    _authorizer(broker).delete_acls([AclBindingFilter()])


def grant(
    broker: sluice.EmbeddedBroker,
    rtype: ResourceType,
    name: str,
    *ops: AclOperation,
    pattern: PatternType = PatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    principal: str = ANON,
) -> None:
    bindings = [
        AclBinding(ResourcePattern(rtype, name, pattern),
                   AccessControlEntry(principal, "*", op, permission))
        for op in ops
    ]  # fmt: skip
    assert _authorizer(broker).create_acls(bindings) == [None] * len(bindings)


def make_topic(broker: sluice.EmbeddedBroker, partitions: int = 1) -> str:
    name = f"acl-{uuid.uuid4().hex[:8]}"
    assert broker.broker is not None
    broker.call(broker.broker.topic_admin.create_topic, name, partitions, 1, {})
    return name


def ck_produce(broker: sluice.EmbeddedBroker, topic: str, **config: Any) -> KafkaError | None:
    """One record through confluent-kafka; the delivery error or None."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "message.timeout.ms": 5000, **config})  # fmt: skip
    outcome: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(TIMEOUT_S)
    assert len(outcome) == 1
    return outcome[0]


# -- produce ----------------------------------------------------------------------------------


def test_produce_needs_write_on_the_topic(broker: sluice.EmbeddedBroker) -> None:
    topic = make_topic(broker)
    err = ck_produce(broker, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, RT.TOPIC, topic, Op.DESCRIBE)  # metadata alone is not enough
    err = ck_produce(broker, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, RT.TOPIC, topic, Op.WRITE)
    assert ck_produce(broker, topic) is None
    # idempotent: InitProducerId is allowed by WRITE on some topic (KIP-679)
    assert ck_produce(broker, topic, **{"enable.idempotence": True}) is None


def test_kafka_python_produce_needs_write(broker: sluice.EmbeddedBroker) -> None:
    topic = make_topic(broker)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_block_ms=5000,
                             retries=0)  # fmt: skip
    try:
        with pytest.raises(kerrors.TopicAuthorizationFailedError):
            producer.send(topic, b"v").get(TIMEOUT_S)
        grant(broker, RT.TOPIC, topic, Op.WRITE)
        assert producer.send(topic, b"v").get(TIMEOUT_S).offset == 0
    finally:
        producer.close(timeout=5)


def test_auto_creation_needs_create(broker: sluice.EmbeddedBroker) -> None:
    topic = f"acl-auto-{uuid.uuid4().hex[:8]}"
    grant(broker, RT.TOPIC, topic, Op.WRITE)
    err = ck_produce(broker, topic)
    assert err is not None
    assert broker.broker is not None
    assert not broker.broker.metadata_cache.contains_topic(topic)
    grant(broker, RT.TOPIC, topic, Op.CREATE)
    assert ck_produce(broker, topic) is None


# -- consume ----------------------------------------------------------------------------------


def _ck_consume(broker: sluice.EmbeddedBroker, topic: str, group: str) -> list[bytes] | KafkaError:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.subscribe([topic])
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                return msg.error()  # type: ignore[no-any-return]
            consumer.commit(msg, asynchronous=False)
            return [msg.value()]
        raise AssertionError("nothing consumed")
    finally:
        consumer.close()


def test_consume_needs_read_on_group_and_topic(broker: sluice.EmbeddedBroker) -> None:
    topic, group = make_topic(broker), f"g-{uuid.uuid4().hex[:8]}"
    grant(broker, RT.TOPIC, topic, Op.WRITE)
    assert ck_produce(broker, topic) is None
    result = _ck_consume(broker, topic, group)
    assert isinstance(result, KafkaError)
    assert result.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(broker, RT.GROUP, group, Op.READ)
    result = _ck_consume(broker, topic, group)
    assert isinstance(result, KafkaError)
    assert result.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, RT.TOPIC, topic, Op.READ)
    assert _ck_consume(broker, topic, group) == [b"v"]


def test_kafka_python_consume_and_offsets(broker: sluice.EmbeddedBroker) -> None:
    topic, group = make_topic(broker), f"g-{uuid.uuid4().hex[:8]}"
    grant(broker, RT.TOPIC, topic, Op.WRITE, Op.READ)
    assert ck_produce(broker, topic) is None
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=5000)  # fmt: skip
    try:
        with pytest.raises(kerrors.GroupAuthorizationFailedError):
            next(consumer)
    finally:
        consumer.close()
    grant(broker, RT.GROUP, group, Op.READ)
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=10000)  # fmt: skip
    try:
        assert next(consumer).value == b"v"
        consumer.commit()
    finally:
        consumer.close()
    # the committed offsets are visible only with DESCRIBE on the group (READ implies it)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    request = [ConsumerGroupTopicPartitions(group)]
    [listed] = admin.list_consumer_group_offsets(request).values()
    assert [tp.offset for tp in listed.result(TIMEOUT_S).topic_partitions] == [1]
    _authorizer(broker).delete_acls([AclBindingFilter(ResourcePatternFilter(RT.GROUP))])
    [listed] = admin.list_consumer_group_offsets(request).values()
    assert _ck_error(listed) == KafkaError.GROUP_AUTHORIZATION_FAILED


# -- transactions -----------------------------------------------------------------------------


def test_transactions_need_write_on_the_transactional_id(broker: sluice.EmbeddedBroker) -> None:
    topic, txn = make_topic(broker), f"tx-{uuid.uuid4().hex[:8]}"
    grant(broker, RT.TOPIC, topic, Op.WRITE)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": txn})
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(broker, RT.TRANSACTIONAL_ID, txn, Op.WRITE)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": txn})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"in-txn")
    producer.commit_transaction(TIMEOUT_S)


def test_transaction_parts_need_topic_and_group_acls(broker: sluice.EmbeddedBroker) -> None:
    """AddPartitionsToTxn needs WRITE on the topic, TxnOffsetCommit (and AddOffsetsToTxn)
    READ on the group, besides WRITE on the transactional id."""
    topic, txn, group = (
        make_topic(broker),
        f"tx-{uuid.uuid4().hex[:8]}",
        f"g-{uuid.uuid4().hex[:6]}",
    )
    grant(broker, RT.TRANSACTIONAL_ID, txn, Op.WRITE)
    grant(broker, RT.TOPIC, topic, Op.DESCRIBE)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": txn,
                         "message.timeout.ms": 5000})  # fmt: skip
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda e, _m: errors.append(e))
    producer.flush(TIMEOUT_S)
    assert errors and errors[0] is not None  # purged: the transaction failed
    with pytest.raises(KafkaException) as failed:
        producer.commit_transaction(TIMEOUT_S)
    assert failed.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert failed.value.args[0].txn_requires_abort()

    grant(broker, RT.TOPIC, topic, Op.WRITE)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": txn})
    producer.init_transactions(TIMEOUT_S)  # fences the failed one
    producer.begin_transaction()
    producer.produce(topic, b"v")
    producer.flush(TIMEOUT_S)
    metadata = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                         "group.id": group}).consumer_group_metadata()  # fmt: skip
    with pytest.raises(KafkaException) as refused:
        producer.send_offsets_to_transaction([CTopicPartition(topic, 0, 1)], metadata, TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    producer.abort_transaction(TIMEOUT_S)
    grant(broker, RT.GROUP, group, Op.READ)
    producer.begin_transaction()
    producer.produce(topic, b"v")
    producer.send_offsets_to_transaction([CTopicPartition(topic, 0, 1)], metadata, TIMEOUT_S)
    producer.commit_transaction(TIMEOUT_S)


# -- metadata -------------------------------------------------------------------------------


def test_metadata_shows_only_describable_topics(broker: sluice.EmbeddedBroker) -> None:
    seen, hidden = make_topic(broker), make_topic(broker)
    grant(broker, RT.TOPIC, seen, Op.READ)  # READ implies DESCRIBE
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    assert seen in topics and hidden not in topics
    named = admin.list_topics(hidden, timeout=TIMEOUT_S).topics[hidden]
    assert named.error is not None
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert seen in consumer.topics() and hidden not in consumer.topics()
    finally:
        consumer.close()


def test_authorized_operations(broker: sluice.EmbeddedBroker) -> None:
    topic = make_topic(broker)
    grant(broker, RT.TOPIC, topic, Op.READ, Op.ALTER_CONFIGS)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    from confluent_kafka import TopicCollection

    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[
        topic
    ].result(TIMEOUT_S)
    assert set(described.authorized_operations) == {
        CAclOperation.READ, CAclOperation.DESCRIBE, CAclOperation.ALTER_CONFIGS,
        CAclOperation.DESCRIBE_CONFIGS,
    }  # fmt: skip
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
    assert not cluster.authorized_operations  # no DESCRIBE on the cluster
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
    assert set(cluster.authorized_operations) == {CAclOperation.DESCRIBE}


# -- admin ----------------------------------------------------------------------------------


def _ck_error(future: Any) -> int | None:
    try:
        future.result(TIMEOUT_S)
    except KafkaException as exc:
        return int(exc.args[0].code())
    return None


def test_admin_operations_need_their_acls(broker: sluice.EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    name = f"acl-new-{uuid.uuid4().hex[:8]}"
    [created] = admin.create_topics([NewTopic(name, 1, 1)]).values()
    assert _ck_error(created) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, RT.TOPIC, "acl-new-", Op.CREATE, pattern=PatternType.PREFIXED)
    [created] = admin.create_topics([NewTopic(name, 1, 1)]).values()
    assert _ck_error(created) is None
    [grown] = admin.create_partitions([NewPartitions(name, 2)]).values()
    assert _ck_error(grown) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, {"retention.ms": "1"})
    [altered] = admin.alter_configs([resource]).values()
    assert _ck_error(altered) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [described] = admin.describe_configs([ConfigResource("TOPIC", name)]).values()
    assert _ck_error(described) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [broker_configs] = admin.describe_configs([ConfigResource("BROKER", "0")]).values()
    assert _ck_error(broker_configs) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    grant(broker, RT.TOPIC, name, Op.DESCRIBE)  # librdkafka looks the leader up first
    [deleted] = admin.delete_records([CTopicPartition(name, 0, 0)]).values()
    assert _ck_error(deleted) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [gone] = admin.delete_topics([name]).values()
    assert _ck_error(gone) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, RT.TOPIC, name, Op.ALTER, Op.ALTER_CONFIGS, Op.DELETE)
    assert _ck_error(admin.create_partitions([NewPartitions(name, 2)])[name]) is None
    assert _ck_error(admin.alter_configs([resource])[resource]) is None
    assert _ck_error(admin.delete_topics([name])[name]) is None


def test_kafka_python_admin_refusals(broker: sluice.EmbeddedBroker) -> None:
    topic = make_topic(broker)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        result = admin.delete_topics([topic], raise_errors=False)
        [entry] = result["topics"]
        assert entry["error_code"] == kerrors.TopicAuthorizationFailedError.errno
        with pytest.raises(kerrors.TopicAuthorizationFailedError):
            admin.create_topics([kafka_new_topic(f"acl-kp-{uuid.uuid4().hex[:6]}")])
    finally:
        admin.close()


def kafka_new_topic(name: str) -> Any:
    from kafka.admin import NewTopic as KNewTopic

    return KNewTopic(name, 1, 1)


def test_anonymous_attacks_are_refused(broker: sluice.EmbeddedBroker) -> None:
    """Anonymous clients may use their own team's topics (a prefix), and nothing else:
    not another team's topic, not __consumer_offsets, not retention changes."""
    grant(broker, RT.TOPIC, "team-a.", Op.ALL, pattern=PatternType.PREFIXED, principal="User:*")
    grant(broker, RT.GROUP, "team-a.", Op.ALL, pattern=PatternType.PREFIXED, principal="User:*")
    grant(broker, RT.TOPIC, "*", Op.DESCRIBE, principal="User:*")
    assert broker.broker is not None
    theirs = f"team-b.{uuid.uuid4().hex[:6]}"
    broker.call(broker.broker.topic_admin.create_topic, theirs, 1, 1, {})
    ours = f"team-a.{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    assert _ck_error(admin.create_topics([NewTopic(ours, 1, 1)])[ours]) is None
    assert _ck_error(admin.delete_topics([theirs])[theirs]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    offsets = "__consumer_offsets"
    assert _ck_error(admin.delete_topics([offsets])[offsets]) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    retention = ConfigResource(ConfigResource.Type.TOPIC, theirs, {"retention.ms": "1"})
    assert _ck_error(admin.alter_configs([retention])[retention]) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    deleted = admin.delete_records([CTopicPartition(theirs, 0, 0)])
    assert _ck_error(next(iter(deleted.values()))) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert broker.broker.metadata_cache.contains_topic(theirs)
    assert broker.broker.metadata_cache.contains_topic(offsets)
    # another team's group: its offsets cannot be deleted, nor the group
    theirs_group = f"team-b-{uuid.uuid4().hex[:6]}"
    [gone] = admin.delete_consumer_groups([theirs_group]).values()
    assert _ck_error(gone) == KafkaError.GROUP_AUTHORIZATION_FAILED


# -- the ACL APIs -----------------------------------------------------------------------------


def test_acls_through_confluent_kafka(broker: sluice.EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    acl = CAclBinding(CResourceType.TOPIC, "orders", CPatternType.PREFIXED, "User:alice", "*",
                      CAclOperation.WRITE, CAclPermissionType.ALLOW)  # fmt: skip
    everything = CAclBindingFilter(CResourceType.ANY, None, CPatternType.ANY, None, None,
                                   CAclOperation.ANY, CAclPermissionType.ANY)  # fmt: skip
    assert _ck_error(admin.create_acls([acl])[acl]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # (librdkafka drops DescribeAcls' top-level error: kafka-python's test checks it)
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.ALTER)  # ALTER implies DESCRIBE
    assert _ck_error(admin.create_acls([acl])[acl]) is None
    listed = admin.describe_acls(everything).result(TIMEOUT_S)
    assert acl in listed
    matching = CAclBindingFilter(CResourceType.TOPIC, "orders-eu", CPatternType.MATCH, None,
                                 None, CAclOperation.ANY, CAclPermissionType.ANY)  # fmt: skip
    assert admin.describe_acls(matching).result(TIMEOUT_S) == [acl]
    # librdkafka names the CLUSTER resource type BROKER
    bad = CAclBinding(CResourceType.BROKER, "other", CPatternType.LITERAL, "User:alice", "*",
                      CAclOperation.ALTER, CAclPermissionType.ALLOW)  # fmt: skip
    assert _ck_error(admin.create_acls([bad])[bad]) == KafkaError.INVALID_REQUEST
    deleted = admin.delete_acls([matching])[matching].result(TIMEOUT_S)
    assert deleted == [acl]
    assert acl not in admin.describe_acls(everything).result(TIMEOUT_S)


def test_acls_through_kafka_python(broker: sluice.EmbeddedBroker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    everything = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                           KResourcePatternFilter(KResourceType.ANY, None,
                                                  ACLResourcePatternType.ANY))  # fmt: skip
    try:
        with pytest.raises(kerrors.ClusterAuthorizationFailedError):
            admin.describe_acls(everything)
        grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.ALTER)
        acl = ACL("User:bob", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                  KResourcePattern(KResourceType.GROUP, "billing"))  # fmt: skip
        result = admin.create_acls([acl])
        assert result["failed"] == [] and len(result["succeeded"]) == 1
        found, error = admin.describe_acls(
            ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                      KResourcePatternFilter(KResourceType.GROUP, None,
                                             ACLResourcePatternType.ANY))
        )  # fmt: skip
        assert error is kerrors.NoError
        assert [(a.principal, a.resource_pattern.resource_name) for a in found] == [
            ("User:bob", "billing")
        ]
        deleted = admin.delete_acls(
            [ACLFilter("User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
                       KResourcePatternFilter(KResourceType.ANY, None,
                                              ACLResourcePatternType.ANY))]
        )  # fmt: skip
        [(_, matched, filter_error)] = deleted
        assert filter_error is kerrors.NoError
        assert [a.principal for a in matched] == ["User:bob"]
        assert admin.describe_acls(everything)[0] == [] or all(
            a.principal != "User:bob" for a in admin.describe_acls(everything)[0]
        )
    finally:
        admin.close()


def test_acl_apis_without_an_authorizer_say_security_disabled() -> None:
    with sluice.EmbeddedBroker() as plain:
        admin = AdminClient({"bootstrap.servers": plain.bootstrap_servers})
        acl = CAclBinding(CResourceType.TOPIC, "t", CPatternType.LITERAL, "User:alice", "*",
                          CAclOperation.READ, CAclPermissionType.ALLOW)  # fmt: skip
        assert _ck_error(admin.create_acls([acl])[acl]) == KafkaError.SECURITY_DISABLED
        kadmin = KafkaAdminClient(bootstrap_servers=plain.bootstrap_servers)
        try:
            with pytest.raises(kerrors.SecurityDisabledError):
                kadmin.describe_acls(
                    ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                              KResourcePatternFilter(KResourceType.ANY, None,
                                                     ACLResourcePatternType.ANY))
                )  # fmt: skip
        finally:
            kadmin.close()


def test_acls_survive_a_restart(tmp_path: Any) -> None:
    config = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}  # fmt: skip
    binding = AclBinding(ResourcePattern(RT.TOPIC, "kept", PatternType.PREFIXED),
                         AccessControlEntry("User:alice", "*", Op.READ,
                                            AclPermissionType.ALLOW))  # fmt: skip
    with sluice.EmbeddedBroker(config=config, log_dir=tmp_path) as first:
        assert _authorizer(first).create_acls([binding]) == [None]
    with sluice.EmbeddedBroker(config=config, log_dir=tmp_path) as second:
        assert _authorizer(second).acls(AclBindingFilter()) == [binding]


def test_client_quotas_need_cluster_configs_acls(broker: sluice.EmbeddedBroker) -> None:
    """As Kafka: DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster,
    AlterClientQuotas ALTER_CONFIGS (neither client library has admin calls for them)."""
    from sluice.protocol import ErrorCode
    from sluice.protocol.apis import request_type
    from sluice.server.messages import build
    from support.wire import RawClient

    entity = [{"entity_type": "client-id", "entity_name": "acl-quota"}]
    alter = build(request_type(49, 1), validate_only=False, entries=[{
        "entity": entity, "ops": [{"key": "producer_byte_rate", "value": 1024.0,
                                   "remove": False}],
    }])  # fmt: skip
    describe = build(request_type(48, 1), strict=False, components=[
        {"entity_type": "client-id", "match_type": 0, "match": "acl-quota"}])  # fmt: skip
    client = RawClient(broker.bootstrap_servers)
    try:
        [refused] = client.request(alter).entries
        assert refused.error_code == ErrorCode.cluster_authorization_failed
        assert client.request(describe).error_code == ErrorCode.cluster_authorization_failed
        grant(broker, RT.CLUSTER, "kafka-cluster", Op.ALTER_CONFIGS)  # implies DESCRIBE_CONFIGS
        [done] = client.request(alter).entries
        assert done.error_code == ErrorCode.none
        answer = client.request(describe)
        assert answer.error_code == ErrorCode.none
        [(entry)] = answer.entries
        assert [(v.key, v.value) for v in entry.values] == [("producer_byte_rate", 1024.0)]
    finally:
        client.close()


def test_dynamic_broker_configs_need_cluster_configs_acls(broker: sluice.EmbeddedBroker) -> None:
    """As Kafka: a BROKER resource's IncrementalAlterConfigs needs ALTER_CONFIGS on the
    cluster (confluent-kafka), and DescribeProducers READ on the topic (a raw request)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    from sluice.protocol import ErrorCode
    from sluice.protocol.apis import request_type
    from sluice.server.messages import build
    from support.wire import RawClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def alter(op: AlterConfigOpType) -> int | None:
        entry = ConfigEntry("log.cleaner.backoff.ms", "15000", incremental_operation=op)
        resource = ConfigResource("broker", "0", incremental_configs=[entry])
        return _ck_error(admin.incremental_alter_configs([resource])[resource])

    assert alter(AlterConfigOpType.SET) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    grant(broker, RT.CLUSTER, "kafka-cluster", Op.ALTER_CONFIGS)
    assert alter(AlterConfigOpType.SET) is None
    assert alter(AlterConfigOpType.DELETE) is None

    topic = make_topic(broker)
    describe = build(request_type(61, 0), topics=[{"name": topic, "partition_indexes": [0]}])
    client = RawClient(broker.bootstrap_servers)
    try:
        [[refused]] = [t.partitions for t in client.request(describe).topics]
        assert refused.error_code == ErrorCode.topic_authorization_failed
        grant(broker, RT.TOPIC, topic, Op.READ)
        [[answered]] = [t.partitions for t in client.request(describe).topics]
        assert answered.error_code == ErrorCode.none
    finally:
        client.close()


def test_log_dir_apis_need_cluster_acls(broker: sluice.EmbeddedBroker) -> None:
    """As Kafka: DescribeLogDirs needs DESCRIBE on the cluster, AlterReplicaLogDirs ALTER
    (without it every partition answers CLUSTER_AUTHORIZATION_FAILED and nothing moves)."""
    from sluice.protocol import ErrorCode
    from sluice.protocol.apis import request_type
    from sluice.server.messages import build
    from support.wire import RawClient

    topic = make_topic(broker)
    log_dir = str(broker.broker.log_dirs[0])
    alter = build(request_type(34, 2), dirs=[
        {"path": log_dir, "topics": [{"name": topic, "partitions": [0]}]}])  # fmt: skip
    describe = build(request_type(35, 4), topics=None)
    client = RawClient(broker.bootstrap_servers)
    try:
        assert client.request(describe).error_code == ErrorCode.cluster_authorization_failed
        [[refused]] = [r.partitions for r in client.request(alter).results]
        assert refused.error_code == ErrorCode.cluster_authorization_failed
        grant(broker, RT.CLUSTER, "kafka-cluster", Op.DESCRIBE)
        answer = client.request(describe)
        assert answer.error_code == ErrorCode.none
        [[still_refused]] = [r.partitions for r in client.request(alter).results]
        assert still_refused.error_code == ErrorCode.cluster_authorization_failed
        grant(broker, RT.CLUSTER, "kafka-cluster", Op.ALTER)
        [[moved]] = [r.partitions for r in client.request(alter).results]
        assert moved.error_code == ErrorCode.none  # already in that directory: nothing to do
        assert [r.log_dir for r in answer.results] == [log_dir]
    finally:
        client.close()
