"""The cluster tests' reading helpers against a broker whose first Metadata answer shows
a partition without a leader, as a broker answers right after an election until the
controller's UpdateMetadata reaches it. A client that asked such a broker first is what
made test_unclean_election_off_keeps_the_partition_offline fail now and then: its reader
got "Local: Unknown partition" for 60 s after every broker named the new leader."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CTP

import sluice
from sluice.base import TopicPartition
from sluice.controller.requests import UpdateMetadataPartitionState
from sluice.server.apis import metadata
from sluice.server.messages import field
from support.cluster import read_partitions, watermarks

TOPIC = "late"
RECORDS = 30


class NoLeader:
    """Wraps the Metadata handler: while ``left`` is not 0 (-1: until set to 0), the
    answers that cover TOPIC show its partition 0 without a leader (leader -1,
    LEADER_NOT_AVAILABLE), each counting ``left`` down; the others are true. ``asked``
    counts the Metadata requests that covered TOPIC."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.left = 0
        self.asked = 0

    def __call__(self, ctx: Any, request: Any) -> Any:
        requested = field(request.body, "topics")
        names = None if requested is None else {field(t, "name") for t in requested}
        if names is not None and TOPIC not in names:
            return self.handle(ctx, request)
        self.asked += 1
        cache = ctx.metadata_cache
        if self.left == 0 or not cache.contains_partition(TopicPartition(TOPIC, 0)):
            return self.handle(ctx, request)
        if self.left > 0:
            self.left -= 1
        topic_id, partitions = cache.topic_id(TOPIC), cache.partitions(TOPIC)
        cache.put_topic(TOPIC, topic_id, _states(partitions, leaderless=0))
        try:
            return self.handle(ctx, request)
        finally:
            cache.put_topic(TOPIC, topic_id, _states(partitions))


def _states(partitions: list[Any], leaderless: int | None = None) -> list[Any]:
    """The metadata cache's partition states of TOPIC, partition ``leaderless`` without
    a leader."""
    return [
        UpdateMetadataPartitionState(
            TopicPartition(TOPIC, p.partition),
            0,
            -1 if p.partition == leaderless else p.leader,
            p.leader_epoch,
            p.isr,
            0,
            p.replicas,
        )
        for p in partitions
    ]


@pytest.fixture
def late_leader(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, NoLeader]]:
    """A broker with RECORDS records in TOPIC, its Metadata handler wrapped."""
    hook = NoLeader(metadata.handle)
    monkeypatch.setattr(metadata, "handle", hook)  # the broker binds it when it starts
    with sluice.EmbeddedBroker() as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
        for i in range(RECORDS):
            producer.produce(TOPIC, f"r{i}".encode())
        assert producer.flush(30) == 0
        del producer  # no metadata refresh of its own from here on
        yield broker.bootstrap_servers, hook


def test_a_client_told_no_leader_stops_asking(late_leader: tuple[str, NoLeader]) -> None:
    """The flaky state: the client whose first answer showed no leader fails every later
    watermark query, though every answer names the leader now."""
    bootstrap, hook = late_leader
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "log_level": 0})
    try:
        hook.left = -1
        with pytest.raises(KafkaException) as caught:
            consumer.get_watermark_offsets(CTP(TOPIC, 0), timeout=5)
        assert caught.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
        hook.left = 0  # from now on every answer names the leader
        for _ in range(3):
            with pytest.raises(KafkaException) as caught:
                consumer.get_watermark_offsets(CTP(TOPIC, 0), timeout=5)
            # If this fails, librdkafka asks again now: one client per try may not be needed.
            assert caught.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
    finally:
        consumer.close()


def test_the_helpers_ask_again_until_the_leader_is_known(
    late_leader: tuple[str, NoLeader],
) -> None:
    bootstrap, hook = late_leader
    hook.left = 1
    assert watermarks(bootstrap, TOPIC, 0) == (0, RECORDS)
    assert hook.left == 0 and hook.asked >= 2  # the first try was told "no leader"
    hook.left, hook.asked = 1, 0
    assert read_partitions(bootstrap, TOPIC, 1)[0] == [f"r{i}".encode() for i in range(RECORDS)]
    assert hook.left == 0 and hook.asked >= 2
