"""Deleting a topic drops the groups' committed offsets for it; members show their host."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import sluice


def test_offsets_of_deleted_topic_are_forgotten_and_hosts_reported() -> None:
    with sluice.EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        created = admin.create_topics([NewTopic("doomed", 2, 1), NewTopic("kept", 1, 1)])
        for future in created.values():
            future.result(10)
        producer = Producer({"bootstrap.servers": bs})
        for topic in ("doomed", "kept"):
            producer.produce(topic, b"v", partition=0)
        assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": bs, "group.id": "g", "session.timeout.ms": 6000})
        consumer.subscribe(["doomed", "kept"])
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 3 and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert len(consumer.assignment()) == 3
        offsets = [TopicPartition("doomed", 0, 1), TopicPartition("kept", 0, 1)]
        consumer.commit(offsets=offsets, asynchronous=False)
        group = admin.describe_consumer_groups(["g"])["g"].result(10)
        assert [m.host for m in group.members] == ["/127.0.0.1"]
        consumer.close()

        admin.delete_topics(["doomed"])["doomed"].result(10)
        request = ConsumerGroupTopicPartitions("g")
        listed = admin.list_consumer_group_offsets([request])["g"].result(10)
        committed = {(tp.topic, tp.partition): tp.offset for tp in listed.topic_partitions}
        assert committed == {("kept", 0): 1}
