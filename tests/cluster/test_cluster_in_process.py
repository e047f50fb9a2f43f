"""The in-process EmbeddedCluster (no ZooKeeper, no subprocesses): brokers on their own
event-loop threads sharing one in-process coordination store. Kill (abrupt), controlled
stop and restart behave as in the ZooKeeper mode; nothing acknowledged is lost."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from sluice.testing import EmbeddedCluster
from support.cluster import audit, numbered_producer, read_partitions
from support.waiting import wait_until

TOPIC = "in-process"
PARTITIONS = 3


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    overrides = {"zookeeper.session.timeout.ms": 2000, "num.replica.fetchers": 2}
    with EmbeddedCluster(brokers=3, zookeeper=False, overrides=overrides) as c:
        yield c


def _state(bootstrap: str) -> dict[int, tuple[int, list[int]]]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    topic = admin.list_topics(topic=TOPIC, timeout=5).topics[TOPIC]
    return {p: (m.leader, list(m.isrs)) for p, m in topic.partitions.items()}


def test_kill_stop_and_restart_in_process(cluster: EmbeddedCluster) -> None:
    assert cluster.tree is not None and not cluster.procs
    with pytest.raises(RuntimeError):
        _ = cluster.zookeeper_connect
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    configs = {"min.insync.replicas": "2"}
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config=configs)])[TOPIC].result(15)

    def replicated() -> bool:
        state = _state(cluster.bootstrap_servers)
        return len(state) == PARTITIONS and all(
            leader >= 0 and len(isr) == 3 for leader, isr in state.values()
        )

    wait_until(replicated, 30, "three in-sync replicas everywhere")
    history, producer = numbered_producer(cluster.bootstrap_servers, TOPIC, PARTITIONS, 300)
    try:
        wait_until(lambda: history.acked_count >= 100, 30, "first acknowledgements")
        victim = _state(cluster.bootstrap_servers)[0][0]
        cluster.kill_broker(victim)
        assert not cluster.is_running(victim)
        others = ",".join(cluster.bootstrap_of(b) for b in cluster.broker_ids if b != victim)
        wait_until(
            lambda: [leader not in (-1, victim) for leader, _ in _state(others).values()]
            == [True] * PARTITIONS,
            30, "new leaders once the killed broker's session expired",
        )  # fmt: skip
        floor = history.acked_count
        wait_until(lambda: history.acked_count >= floor + 100, 30, "progress without it")
        cluster.restart_broker(victim)
        wait_until(replicated, 60, "the restarted broker back in every ISR")

        controller = cluster.controller_id
        cluster.stop_broker(controller)  # controlled shutdown: leaders move first
        others = ",".join(cluster.bootstrap_of(b) for b in cluster.broker_ids if b != controller)
        wait_until(  # the survivors hear of the new leaders from the (next) controller
            lambda: [leader not in (-1, controller) for leader, _ in _state(others).values()]
            == [True] * PARTITIONS,
            30, "new leaders after the controlled stop",
        )  # fmt: skip
        floor = history.acked_count
        wait_until(lambda: history.acked_count >= floor + 100, 30, "progress after the stop")
        cluster.restart_broker(controller)
        wait_until(replicated, 60, "the stopped broker back in every ISR")
    finally:
        remaining = producer.stop()
    assert remaining == 0 and history.failures == []
    result = audit(history, cluster.bootstrap_servers, TOPIC, PARTITIONS)
    assert result.ok, result.anomalies[:10]


def test_idempotent_producers_from_different_brokers_get_distinct_ids(
    cluster: EmbeddedCluster,
) -> None:
    from confluent_kafka import Producer

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("ids", 1, 3)])["ids"].result(15)
    wait_until(lambda: len(_state_of(cluster, "ids")[1]) == 3, 30, "three in-sync replicas")
    failures: list[object] = []
    producers = [
        Producer({"bootstrap.servers": cluster.bootstrap_of(b), "enable.idempotence": True,
                  "acks": "all", "log_level": 0})
        for b in cluster.broker_ids
    ]  # fmt: skip
    for round_ in range(20):  # interleaved on the one partition
        for i, producer in enumerate(producers):
            producer.produce(
                "ids", f"{i}:{round_}".encode(),
                on_delivery=lambda err, _m: err is not None and failures.append(err),
            )  # fmt: skip
            producer.flush(10)
    assert failures == []
    got = read_partitions(cluster.bootstrap_servers, "ids", 1)[0]
    assert sorted(got) == sorted(f"{i}:{r}".encode() for i in range(3) for r in range(20))


def _state_of(cluster: EmbeddedCluster, topic: str) -> tuple[int, list[int]]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    m = admin.list_topics(topic=topic, timeout=5).topics[topic].partitions[0]
    return m.leader, list(m.isrs)


def test_stopping_the_whole_cluster_logs_no_failed_elections(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each broker but the last hands its leaders over; the last has nobody to hand
    them to and does not try (no failed elections, no retried controlled shutdown)."""
    with EmbeddedCluster(brokers=3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
        admin.create_topics([NewTopic("spread", 6, 3)])["spread"].result(30)
        wait_until(
            lambda: all(
                len(p.isrs) == 3
                for p in admin.list_topics("spread", timeout=5).topics["spread"].partitions.values()
            ),
            30, "every replica in sync",
        )  # fmt: skip
        caplog.clear()
        caplog.set_level("INFO", logger="sluice")
    noisy = [r.getMessage() for r in caplog.records if r.levelname in ("WARNING", "ERROR")]
    assert noisy == []
    assert any("no other live broker" in r.getMessage() for r in caplog.records)
