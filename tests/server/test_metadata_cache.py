"""The MetadataCache on its own (no broker, no sockets): fed as a single node feeds it (the
topic registry and the hosted partitions) and as the controller's UpdateMetadata requests
feed it in a cluster, it answers the same questions the same way."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from sluice.base import TopicPartition
from sluice.controller.model import Broker, EndPoint
from sluice.controller.requests import UpdateMetadataPartitionState
from sluice.replication.metadata_cache import MetadataCache, PartitionMetadata

ID_A = uuid.UUID(int=1)
ID_B = uuid.UUID(int=2)


def _state(
    topic: str, partition: int, leader: int, replicas: tuple[int, ...], epoch: int = 0,
    isr: tuple[int, ...] | None = None,
) -> UpdateMetadataPartitionState:  # fmt: skip
    return UpdateMetadataPartitionState(
        TopicPartition(topic, partition), 0, leader, epoch,
        replicas if isr is None else isr, 0, replicas,
    )  # fmt: skip


def _broker(broker_id: int) -> Broker:
    return Broker(broker_id, (EndPoint(f"h{broker_id}", 9000 + broker_id),))


def test_single_node_feed() -> None:
    cache = MetadataCache(1, "cid")
    cache.register_local_broker(_broker(1), alive=True)
    cache.put_topic("b", ID_B, [_state("b", 0, 1, (1,))])
    cache.put_topic("a", ID_A, [_state("a", 1, 1, (1,), epoch=3), _state("a", 0, -1, (1,), -1, ())])
    assert cache.cluster_id == "cid" and cache.controller_id == 1
    assert cache.alive_brokers() == [_broker(1)]
    assert cache.topic_names() == ["a", "b"]
    assert cache.partitions("a") == [
        PartitionMetadata(0, -1, -1, (1,), (), ()),
        PartitionMetadata(1, 1, 3, (1,), (1,), ()),
    ]
    assert cache.topic_id("a") == ID_A and cache.topic_name(ID_B) == "b"
    assert cache.leader(TopicPartition("a", 1)) == _broker(1)
    assert cache.leader(TopicPartition("a", 0)) is None  # not hosted: no leader
    assert cache.num_partitions("a") == 2 and cache.num_partitions("c") is None
    assert cache.all_partitions() == {TopicPartition("a", 0), TopicPartition("a", 1),
                                      TopicPartition("b", 0)}  # fmt: skip
    cache.remove_topic("a")
    assert cache.topic_names() == ["b"] and cache.topic_name(ID_A) is None
    assert not cache.contains_partition(TopicPartition("a", 1))
    assert cache.partitions("a") == [] and cache.topic_id("a") is None
    recreated = uuid.UUID(int=3)  # the same name, a new id: the old id is unknown
    cache.put_topic("a", recreated, [_state("a", 0, 1, (1,))])
    assert cache.topic_name(recreated) == "a" and cache.topic_name(ID_A) is None


def test_cluster_feed() -> None:
    cache = MetadataCache(1)
    cache.register_local_broker(_broker(1), alive=False)
    controller = [-1]
    cache.set_controller_id_source(lambda: controller[0])
    assert cache.alive_brokers() == [_broker(1)]  # none known yet: this broker alone
    assert cache.controller_id == -1
    states = [_state("t", 0, 2, (2, 3)), _state("t", 1, 3, (3, 1), isr=(3,))]
    assert cache.topics_without_id(states) == {"t"}
    cache.update_metadata([_broker(3), _broker(2), _broker(1)], states, {"t": ID_A})
    controller[0] = 2
    assert cache.controller_id == 2
    assert [b.id for b in cache.alive_brokers()] == [1, 2, 3]
    assert cache.topic_id("t") == ID_A and cache.topics_without_id(states) == set()
    assert cache.partitions("t")[1] == PartitionMetadata(1, 3, 0, (3, 1), (3,), ())
    # Broker 3 dies: its leadership and replicas show offline until the controller moves them.
    cache.update_metadata([_broker(1), _broker(2)], [])
    assert cache.partitions("t")[1] == PartitionMetadata(1, -1, 0, (3, 1), (3,), (3,))
    assert cache.leader(TopicPartition("t", 1)) is None
    assert cache.leader(TopicPartition("t", 0)) == _broker(2)
    # An update without live brokers keeps them; leader -2 deletes the partition.
    cache.update_metadata([], [_state("t", 0, -2, (2, 3))])
    assert [b.id for b in cache.alive_brokers()] == [1, 2]
    assert cache.all_partitions() == {TopicPartition("t", 1)}
    cache.update_metadata([], [_state("t", 1, -2, (3, 1))])
    assert cache.topic_names() == [] and cache.topic_name(ID_A) is None
    cache.set_topic_id("u", ID_B)  # learnt from LeaderAndIsr before UpdateMetadata
    cache.update_metadata([], [_state("u", 0, 1, (1,))], {"u": ID_A})
    assert cache.topic_id("u") == ID_B
    assert cache.topic_name(ID_B) == "u" and cache.topic_name(ID_A) is None


def test_internal_topics() -> None:
    assert MetadataCache.is_internal("__consumer_offsets")
    assert MetadataCache.is_internal("__transaction_state")
    assert not MetadataCache.is_internal("__other")


_TOPICS = st.sampled_from(["a", "b", "c"])
_IDS = st.integers(0, 3)
_STATES = st.builds(
    lambda topic, partition, leader, replicas: _state(topic, partition, leader, tuple(replicas)),
    _TOPICS, st.integers(0, 2), st.sampled_from([-2, -1, 0, 1, 2, 3]),
    st.lists(_IDS, min_size=1, max_size=3, unique=True),
)  # fmt: skip
_UPDATES = st.lists(
    st.tuples(st.lists(_IDS, max_size=4, unique=True), st.lists(_STATES, max_size=6)),
    max_size=8,
)


@given(_UPDATES)
def test_updates_match_a_model(
    updates: list[tuple[list[int], list[UpdateMetadataPartitionState]]],
) -> None:
    """Any sequence of UpdateMetadata requests leaves the cache answering as a plain model:
    the latest state of each partition not deleted since, judged against the latest
    non-empty set of live brokers."""
    cache = MetadataCache(0)
    live: set[int] = set()
    model: dict[TopicPartition, UpdateMetadataPartitionState] = {}
    for brokers, states in updates:
        cache.update_metadata([_broker(b) for b in brokers], states)
        live = set(brokers) or live
        for s in states:
            if s.leader == -2:
                model.pop(s.topic_partition, None)
            else:
                model[s.topic_partition] = s
    assert cache.all_partitions() == set(model)
    assert cache.topic_names() == sorted({tp.topic for tp in model})
    for topic in ("a", "b", "c"):
        expected = [
            PartitionMetadata(
                tp.partition,
                s.leader if s.leader in live else -1,
                s.leader_epoch,
                s.replicas,
                s.isr,
                tuple(r for r in s.replicas if r not in live),
            )
            for tp, s in sorted(model.items())
            if tp.topic == topic
        ]
        assert cache.partitions(topic) == expected
    for tp, s in model.items():
        leader = cache.leader(tp)
        assert (leader.id if leader is not None else None) == (
            s.leader if s.leader in live else None
        )
    assert [b.id for b in cache.alive_brokers()] == sorted(live)
