"""The no-lost-writes test: 3 brokers, replication factor 3, min.insync.replicas=2, an
idempotent acks=all confluent-kafka producer sending numbered records to 6 partitions
while the test kill -9s the leader of a partition (every third cycle the controller),
waits for a new leader and for the producer to make progress, restarts the broker and
waits for it to rejoin every ISR — 10 cycles. Afterwards every partition is read from
offset 0: every acknowledged record is present exactly once and in send order.
``test_cluster_secure_no_lost_writes.py`` runs the same on a SASL_SSL cluster with ACLs."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from sluice.testing import EmbeddedCluster
from support.cluster import audit, kill_9_cycles

TOPIC = "no-lost-writes"
PARTITIONS = 6
CYCLES = 10


def test_no_acknowledged_write_is_lost_across_kill_9(cluster3: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    configs = {"min.insync.replicas": "2"}
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config=configs)])[TOPIC].result(15)
    history, killed = kill_9_cycles(cluster3, TOPIC, PARTITIONS, CYCLES)

    result = audit(history, cluster3.bootstrap_servers, TOPIC, PARTITIONS)
    print(
        f"\nno-lost-writes: killed {', '.join(killed)}; sent {len(history.sent)}, acknowledged "
        f"{result.acked}, failed {len(history.failures)}, lost {result.count('lost')}, "
        f"duplicated {result.count('duplicated')}, reordered {result.count('reordered')}"
    )
    assert result.ok, result.anomalies[:10]
