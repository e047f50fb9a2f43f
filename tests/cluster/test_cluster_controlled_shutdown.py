"""Controlled shutdown under load: SIGTERM a broker that leads partitions while an
idempotent acks=all producer keeps sending. The controller moves its leaders away
first, so the producer sees no failed delivery, nothing acknowledged is lost, and the
stopped broker leads nothing when it exits."""

from __future__ import annotations

import json
import time

from confluent_kafka.admin import AdminClient, NewTopic

from sluice.testing import EmbeddedCluster
from support.cluster import audit, numbered_producer
from support.waiting import wait_until

TOPIC = "shutdown-load"
PARTITIONS = 6


def _leaders(bootstrap: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    topic = admin.list_topics(topic=TOPIC, timeout=5).topics[TOPIC]
    return {p: m.leader for p, m in topic.partitions.items()}


def _zk_leaders(cluster: EmbeddedCluster) -> dict[int, int]:
    """Each partition's leader as the controller wrote it to ZooKeeper."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=cluster.zookeeper_connect)
    client.start(15)
    try:
        path = f"/brokers/topics/{TOPIC}/partitions"
        return {
            int(p): json.loads(client.get(f"{path}/{p}/state")[0])["leader"]
            for p in client.get_children(path)
        }
    finally:
        client.stop()
        client.close()


def test_sigterm_moves_leaders_away_before_stopping(cluster3: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    configs = {"min.insync.replicas": "2"}
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config=configs)])[TOPIC].result(15)
    leaders = wait_until(
        lambda: (m := _leaders(cluster3.bootstrap_servers)) and len(m) == PARTITIONS
        and all(v >= 0 for v in m.values()) and m,
        30, "leaders for every partition",
    )  # fmt: skip
    victim = max(set(leaders.values()), key=lambda b: list(leaders.values()).count(b))
    assert victim in leaders.values()

    history, producer = numbered_producer(cluster3.bootstrap_servers, TOPIC, PARTITIONS, 400)
    wait_until(lambda: history.acked_count >= 300, 30, "a first 300 acknowledged records")
    started = time.monotonic()
    cluster3.stop_broker(victim)
    took = time.monotonic() - started
    # The controller wrote the new leaders before it answered the shutdown: settled now.
    after = _zk_leaders(cluster3)
    assert len(after) == PARTITIONS and victim not in after.values(), after
    assert all(leader >= 0 for leader in after.values()), after
    # The survivors learn them from the controller's UpdateMetadata, which may still be
    # on its way (or, when the victim was the controller, come from the next one).
    survivors = ",".join(cluster3.bootstrap_of(b) for b in cluster3.broker_ids if b != victim)
    wait_until(
        lambda: (m := _leaders(survivors)) and sorted(m.items()) == sorted(after.items()),
        30, "the survivors' metadata naming the new leaders",
    )  # fmt: skip
    assert "controlled shutdown of broker" in cluster3.log_tail(victim, 200)

    before = history.acked_count
    wait_until(lambda: history.acked_count >= before + 300, 60, "records after the shutdown")
    assert producer.stop() == 0
    assert history.failures == [], history.failures[:10]

    result = audit(history, survivors, TOPIC, PARTITIONS)
    print(f"controlled shutdown took {took:.2f}s; sent {len(history.sent)}, "
          f"acknowledged {result.acked}, anomalies {len(result.anomalies)}")  # fmt: skip
    assert result.ok, result.anomalies[:10]
