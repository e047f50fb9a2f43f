"""Leader elections on a real cluster: the preferred leader comes back after its broker
returns (auto leader rebalance) or when asked (ElectLeaders from confluent-kafka and
kafka-python); with unclean election off a partition whose whole ISR is dead stays
offline, with it on a live out-of-sync replica is elected."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import ElectionType, KafkaError, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, NewTopic

from sluice.testing import EmbeddedCluster
from support.cluster import leaders_by_broker, read_partitions
from support.waiting import wait_until


def _state(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    t = admin.list_topics(topic=topic, timeout=5).topics[topic]
    return {p: (m.leader, list(m.replicas), list(m.isrs)) for p, m in t.partitions.items()}


def _preferred_everywhere(bootstrap: str, topic: str, partitions: int) -> bool:
    state = _state(bootstrap, topic)
    return len(state) == partitions and all(
        leader == replicas[0] and len(isr) == len(replicas)
        for leader, replicas, isr in state.values()
    )


def _agreed_leader(cluster: EmbeddedCluster, topic: str) -> int:
    """Partition 0's leader once every running broker's metadata names the same one (each
    hears of an election from its own UpdateMetadata)."""

    def agreed() -> tuple[int] | None:  # a tuple: broker 0 is a leader too
        leaders = set(leaders_by_broker(cluster, topic).values())
        return (leaders.pop(),) if len(leaders) == 1 and min(leaders) >= 0 else None

    found = wait_until(agreed, 30, f"the brokers agreeing on {topic}-0's leader")
    assert found is not None
    return found[0]


def _displace_preferred_leader(cluster: EmbeddedCluster, topic: str) -> int:
    """Kill the preferred leader of partition 0, wait for failover, restart it and wait
    until it is back in the ISR (not leading). Returns its id."""
    leader = _agreed_leader(cluster, topic)
    cluster.kill_broker(leader)
    others = ",".join(cluster.bootstrap_of(b) for b in cluster.broker_ids if b != leader)
    wait_until(lambda: _state(others, topic)[0][0] not in (-1, leader), 45, "a failover leader")
    cluster.restart_broker(leader)
    wait_until(
        lambda: leader in _state(cluster.bootstrap_servers, topic)[0][2],
        60, f"broker {leader} back in the ISR",
    )  # fmt: skip
    return leader


@pytest.fixture
def cluster3_rebalancing(cluster_prerequisites: None) -> Iterator[EmbeddedCluster]:
    overrides = {"leader.imbalance.check.interval.seconds": 1,
                 "leader.imbalance.per.broker.percentage": 0}  # fmt: skip
    with EmbeddedCluster(
        brokers=3, broker_ids=[1, 2, 3], overrides=overrides, zookeeper=True
    ) as cluster:
        yield cluster


@pytest.fixture
def cluster3_manual(cluster_prerequisites: None) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(
        brokers=3,
        broker_ids=[1, 2, 3],
        overrides={"auto.leader.rebalance.enable": False},
        zookeeper=True,
    ) as cluster:
        yield cluster


def test_auto_rebalance_restores_the_preferred_leader(
    cluster3_rebalancing: EmbeddedCluster,
) -> None:
    cluster = cluster3_rebalancing
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("pref", 3, 3)])["pref"].result(15)
    wait_until(lambda: _preferred_everywhere(cluster.bootstrap_servers, "pref", 3), 30, "ISR")
    _displace_preferred_leader(cluster, "pref")
    wait_until(
        lambda: _preferred_everywhere(cluster.bootstrap_servers, "pref", 3),
        30, "preferred leaders restored by the auto rebalance",
    )  # fmt: skip


def test_elect_leaders_from_both_clients(cluster3_manual: EmbeddedCluster) -> None:
    cluster = cluster3_manual
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("manual", 1, 3)])["manual"].result(15)
    wait_until(lambda: _preferred_everywhere(cluster.bootstrap_servers, "manual", 1), 30, "ISR")

    preferred = _displace_preferred_leader(cluster, "manual")
    assert _state(cluster.bootstrap_servers, "manual")[0][0] != preferred
    # A fresh client: librdkafka does not retry NOT_CONTROLLER when its cached
    # controller id is stale (the killed broker may have been the controller).
    fresh = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    results = fresh.elect_leaders(ElectionType.PREFERRED, [CTP("manual", 0)]).result(30)
    assert results[CTP("manual", 0)] is None  # no error
    wait_until(lambda: _state(cluster.bootstrap_servers, "manual")[0][0] == preferred, 15, "it")

    # The same through kafka-python; then nothing is left to do: ELECTION_NOT_NEEDED.
    from kafka import KafkaAdminClient

    kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers.split(","))
    try:
        preferred = _displace_preferred_leader(cluster, "manual")
        kadmin.elect_leaders(0, {"manual": [0]})
        wait_until(
            lambda: _state(cluster.bootstrap_servers, "manual")[0][0] == preferred,
            15, "the preferred leader elected through kafka-python",
        )  # fmt: skip
        fresh = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
        again = fresh.elect_leaders(ElectionType.PREFERRED, [CTP("manual", 0)])
        outcome = again.result(30)[CTP("manual", 0)]
        assert outcome is not None and outcome.code() == KafkaError.ELECTION_NOT_NEEDED
    finally:
        kadmin.close()


def test_unclean_election_off_keeps_the_partition_offline(cluster3: EmbeddedCluster) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    # kafka-python: librdkafka 2.16 refuses an explicit replica assignment locally.
    kadmin = KafkaAdminClient(bootstrap_servers=cluster3.bootstrap_servers.split(","))
    for name, unclean in (("clean", "false"), ("dirty", "true")):
        configs = {"unclean.leader.election.enable": unclean, "min.insync.replicas": "1"}
        kadmin.create_topics([KNewTopic(name, -1, -1, {0: [1, 2]}, configs)])
    kadmin.close()
    for name in ("clean", "dirty"):
        wait_until(
            lambda n=name: sorted(_state(cluster3.bootstrap_servers, n)[0][2]) == [1, 2],
            30, f"{name}'s ISR [1, 2]",
        )  # fmt: skip

    producer = Producer(
        {"bootstrap.servers": cluster3.bootstrap_servers, "acks": "all", "log_level": 0}
    )
    for i in range(50):
        for name in ("clean", "dirty"):
            producer.produce(name, f"before-{i}".encode())
    assert producer.flush(30) == 0
    cluster3.kill_broker(2)  # the follower: the ISR shrinks to [1]
    others = f"{cluster3.bootstrap_of(1)},{cluster3.bootstrap_of(3)}"
    for name in ("clean", "dirty"):
        wait_until(lambda n=name: _state(others, n)[0][2] == [1], 45, f"{name}'s ISR [1]")
    for i in range(20):
        for name in ("clean", "dirty"):
            producer.produce(name, f"only-on-1-{i}".encode())
    assert producer.flush(30) == 0

    cluster3.kill_broker(1)  # the whole ISR is dead now
    cluster3.restart_broker(2)  # an out-of-sync replica comes back
    survivors = f"{cluster3.bootstrap_of(2)},{cluster3.bootstrap_of(3)}"
    wait_until(lambda: _state(survivors, "dirty")[0][0] == 2, 45, "unclean election of 2")
    assert _state(survivors, "clean")[0][0] == -1, "clean elected an out-of-sync replica"

    cluster3.restart_broker(1)  # the last in-sync replica returns: nothing was lost
    wait_until(
        lambda: set(leaders_by_broker(cluster3, "clean").values()) == {1},
        45, "every broker naming 1 the leader of clean",
    )  # fmt: skip
    clean = read_partitions(cluster3.bootstrap_servers, "clean", 1)[0]
    assert len(clean) == 70
    dirty = read_partitions(cluster3.bootstrap_servers, "dirty", 1)[0]
    assert len(dirty) == 50, "the unclean leader has only what it had replicated"
