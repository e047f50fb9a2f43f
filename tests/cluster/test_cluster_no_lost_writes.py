"""The no-lost-writes test: 3 brokers, replication factor 3, min.insync.replicas=2, an
idempotent acks=all confluent-kafka producer sending numbered records to 6 partitions
while the test kill -9s the leader of a partition (every third cycle the controller),
waits for a new leader and for the producer to make progress, restarts the broker and
waits for it to rejoin every ISR — 10 cycles. Afterwards every partition is read from
offset 0: every acknowledged record is present exactly once and in send order."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from sluice.testing import EmbeddedCluster
from support.cluster import audit, numbered_producer
from support.waiting import wait_until

TOPIC = "no-lost-writes"
PARTITIONS = 6
CYCLES = 10


def _partitions(bootstrap: str) -> dict[int, tuple[int, list[int]]]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    topic = admin.list_topics(topic=TOPIC, timeout=5).topics[TOPIC]
    return {p: (m.leader, list(m.isrs)) for p, m in topic.partitions.items()}


def test_no_acknowledged_write_is_lost_across_kill_9(cluster3: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    configs = {"min.insync.replicas": "2"}
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config=configs)])[TOPIC].result(15)

    def fully_replicated() -> bool:
        state = _partitions(cluster3.bootstrap_servers)
        return len(state) == PARTITIONS and all(
            leader >= 0 and len(isr) == 3 for leader, isr in state.values()
        )

    wait_until(fully_replicated, 30, "every partition with a leader and 3 in-sync replicas")
    history, producer = numbered_producer(cluster3.bootstrap_servers, TOPIC, PARTITIONS, 300)
    killed: list[str] = []
    try:
        for cycle in range(CYCLES):
            floor = history.acked_count
            wait_until(lambda f=floor: history.acked_count >= f + 100, 60, "producer progress")
            if cycle % 3 == 2:
                victim, why = cluster3.controller_id, "controller"
            else:
                victim, why = _partitions(cluster3.bootstrap_servers)[cycle % PARTITIONS][0], (
                    f"leader of partition {cycle % PARTITIONS}"
                )  # fmt: skip
            assert victim >= 0
            killed.append(f"{victim} ({why})")
            cluster3.kill_broker(victim)
            survivors = ",".join(
                cluster3.bootstrap_of(b) for b in cluster3.broker_ids if b != victim
            )
            wait_until(
                lambda v=victim, s=survivors: [
                    leader not in (-1, v) for leader, _ in _partitions(s).values()
                ] == [True] * PARTITIONS,
                60, f"new leaders after killing broker {victim}",
            )  # fmt: skip
            floor = history.acked_count
            wait_until(lambda f=floor: history.acked_count >= f + 100, 60, "progress without it")
            cluster3.restart_broker(victim)
            wait_until(fully_replicated, 90, f"broker {victim} back in every ISR")
        floor = history.acked_count
        wait_until(lambda: history.acked_count >= floor + 100, 60, "progress at the end")
    finally:
        remaining = producer.stop()
    assert remaining == 0, f"{remaining} sends never completed"

    result = audit(history, cluster3.bootstrap_servers, TOPIC, PARTITIONS)
    print(
        f"\nno-lost-writes: killed {', '.join(killed)}; sent {len(history.sent)}, acknowledged "
        f"{result.acked}, failed {len(history.failures)}, lost {result.count('lost')}, "
        f"duplicated {result.count('duplicated')}, reordered {result.count('reordered')}"
    )
    assert result.ok, result.anomalies[:10]
