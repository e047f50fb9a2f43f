"""Topic administration on a 3-broker cluster: config changes reach every broker through
ZooKeeper (/config/topics plus a /config/changes notification) and take effect there;
deleting a topic removes its data on every broker."""

from __future__ import annotations

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from sluice.testing import EmbeddedCluster
from support.waiting import wait_until


def _config_on(cluster: EmbeddedCluster, broker_id: int, topic: str, key: str) -> str | None:
    """The topic config ``key`` as broker ``broker_id`` alone describes it."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(broker_id), "log_level": 0})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(10)
    return entries[key].value if key in entries else None


def test_config_changes_reach_every_broker(cluster3: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_of(1)})
    admin.create_topics([NewTopic("cfg", 1, 3)])["cfg"].result(15)
    wait_until(
        lambda: all(_config_on(cluster3, b, "cfg", "min.insync.replicas") == "1"
                    for b in (1, 2, 3)),
        30, "the topic on every broker",
    )  # fmt: skip

    resource = ConfigResource(
        ConfigResource.Type.TOPIC, "cfg",
        set_config={"min.insync.replicas": "3", "retention.ms": "3600000"},
    )  # fmt: skip
    admin.alter_configs([resource])[resource].result(15)
    for broker_id in (1, 2, 3):
        wait_until(
            lambda b=broker_id: _config_on(cluster3, b, "cfg", "min.insync.replicas") == "3"
            and _config_on(cluster3, b, "cfg", "retention.ms") == "3600000",
            30, f"the new config on broker {broker_id}",
        )  # fmt: skip

    # kafka-python's incremental change, sent to another broker.
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KResource
    from kafka.admin import ConfigResourceType

    kadmin = KafkaAdminClient(bootstrap_servers=cluster3.bootstrap_of(3))
    try:
        kadmin.alter_configs(
            [KResource(ConfigResourceType.TOPIC, "cfg", configs={"retention.ms": "7200000"})],
            incremental=True,
        )
    finally:
        kadmin.close()
    for broker_id in (1, 2, 3):
        wait_until(
            lambda b=broker_id: _config_on(cluster3, b, "cfg", "retention.ms") == "7200000",
            30, f"the incremental change on broker {broker_id}",
        )  # fmt: skip

    # The leader enforces the new min.insync.replicas=3 once a replica is gone.
    leader = admin.list_topics("cfg", timeout=5).topics["cfg"].partitions[0].leader
    follower = next(b for b in (1, 2, 3) if b != leader)
    cluster3.kill_broker(follower)
    errors: list[KafkaError] = []
    producer = Producer(
        {"bootstrap.servers": cluster3.bootstrap_of(leader), "acks": "all", "retries": 0,
         "log_level": 0}
    )  # fmt: skip

    def refused() -> bool:
        producer.produce("cfg", b"x", on_delivery=lambda err, _m: errors.append(err))
        producer.flush(10)
        return (
            bool(errors)
            and errors[-1] is not None
            and (errors[-1].code() == KafkaError.NOT_ENOUGH_REPLICAS)
        )

    wait_until(refused, 45, "NOT_ENOUGH_REPLICAS after the ISR shrank below 3")


def test_topic_deletion_removes_data_on_every_broker(cluster3: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    admin.create_topics([NewTopic("doomed", 2, 3)])["doomed"].result(15)
    producer = Producer(
        {"bootstrap.servers": cluster3.bootstrap_servers, "acks": "all", "log_level": 0}
    )
    for i in range(100):
        producer.produce("doomed", str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    dirs = [cluster3.data_dir / f"data-{b}" / f"doomed-{p}" for b in (1, 2, 3) for p in (0, 1)]
    wait_until(lambda: all(d.is_dir() for d in dirs), 30, "replicas on every broker")

    admin.delete_topics(["doomed"])["doomed"].result(15)
    wait_until(lambda: not any(d.exists() for d in dirs), 30, "the data gone on every broker")
    wait_until(lambda: "doomed" not in admin.list_topics(timeout=5).topics, 30, "the topic gone")
