"""Log dirs on brokers of a 3-broker cluster (real ZooKeeper): DescribeLogDirs from every
broker through kafka-python, and AlterReplicaLogDirs moving the replicas of a partition
replicated three times between the two log dirs of their brokers — the leader's and a
follower's, a move being local to its broker — while an idempotent confluent-kafka
producer writes with acks=all. Every acknowledged record is read back at its offset.
Then a Fetch v16 to a follower is answered NOT_LEADER_OR_FOLLOWER naming the leader
(KIP-951)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sluice.testing import EmbeddedCluster
from support.cluster import audit, numbered_producer, partition_metadata
from support.waiting import wait_until

TOPIC = "jbod"


def _where(admin: Any, broker: int) -> dict[str, dict[str, Any]]:
    """``broker``'s log dirs holding partition 0 of the topic, with the entries."""
    (found,) = admin.describe_log_dirs(topic_partitions={TOPIC: [0]}, brokers=[broker])
    out = {}
    for d in found["log_dirs"]:
        assert d["error_code"] == 0, d
        for t in d["topics"]:
            for p in t["partitions"]:
                out[d["log_dir"]] = p
    return out


def test_replicas_move_between_log_dirs_under_load(
    tmp_path: Path, cluster_prerequisites: None
) -> None:
    from kafka import KafkaAdminClient

    dirs = {b: (tmp_path / f"b{b}-x", tmp_path / f"b{b}-y") for b in (1, 2, 3)}
    overrides = {b: {"log.dirs": f"{x},{y}"} for b, (x, y) in dirs.items()}
    with EmbeddedCluster(
        brokers=3, broker_ids=[1, 2, 3], data_dir=tmp_path, zookeeper=True,
        broker_overrides=overrides,
    ) as cluster:  # fmt: skip
        bootstrap = cluster.bootstrap_servers
        from confluent_kafka.admin import AdminClient, NewTopic

        creator = AdminClient({"bootstrap.servers": bootstrap})
        creator.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        meta: Any = wait_until(
            lambda: (p := partition_metadata(bootstrap, TOPIC)) and len(p.isrs) == 3 and p,
            30, "an ISR of 3",
        )  # fmt: skip
        leader = int(meta.leader)
        follower = next(b for b in (1, 2, 3) if b != leader)
        history, writer = numbered_producer(bootstrap, TOPIC, 1, rate_per_s=2000)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
        try:
            wait_until(lambda: history.acked_count > 2000, 60, "2000 acknowledged")
            described = admin.describe_log_dirs()
            assert sorted(b["broker"] for b in described) == [1, 2, 3]
            for b in described:
                paths = {d["log_dir"] for d in b["log_dirs"]}
                assert paths == {str(d.absolute()) for d in dirs[b["broker"]]}
            targets = {}
            for broker in (leader, follower):
                (source,) = _where(admin, broker)
                (targets[broker],) = {str(d.absolute()) for d in dirs[broker]} - {source}
            result = admin.alter_replica_log_dirs(
                {(TOPIC, 0, broker): path for broker, path in targets.items()}
            )
            assert {e.__name__ for e in result.values()} == {"NoError"}

            def moved() -> bool:
                for broker, path in targets.items():
                    where = _where(admin, broker)
                    if list(where) != [path] or where[path]["is_future_key"]:
                        return False
                return True

            wait_until(moved, 60, "both replicas moved")
            acked = history.acked_count
            wait_until(lambda: history.acked_count > acked + 1000, 60, "writes after the move")
            third = next(b for b in (1, 2, 3) if b not in targets)
            assert list(_where(admin, third)) != []  # untouched: a move is broker-local
            _a_replica_not_hosted_is_not_available(bootstrap, admin, creator, dirs)
        finally:
            writer.stop()
            admin.close()
        result = audit(history, bootstrap, TOPIC, 1)
        assert result.ok, result.anomalies[:10]
        assert result.acked > 3000
        after = partition_metadata(bootstrap, TOPIC)
        assert after is not None and len(after.isrs) == 3
        _fetch_from_a_follower_names_the_leader(cluster, int(after.leader))


def _a_replica_not_hosted_is_not_available(
    bootstrap: str, admin: Any, creator: Any, dirs: dict[int, tuple[Path, Path]]
) -> None:
    """A broker asked to move a replica it does not host answers REPLICA_NOT_AVAILABLE."""
    from confluent_kafka.admin import NewTopic

    creator.create_topics([NewTopic("single", 1, 1)])["single"].result(30)
    holder: Any = wait_until(
        lambda: (p := partition_metadata(bootstrap, "single"))
        and p.leader > 0 and p,
        30, "a leader for single",
    )  # fmt: skip
    other = next(b for b in (1, 2, 3) if b != int(holder.leader))
    result = admin.alter_replica_log_dirs({("single", 0, other): str(dirs[other][1].absolute())})
    assert [e.__name__ for e in result.values()] == ["ReplicaNotAvailableError"]


def _fetch_from_a_follower_names_the_leader(cluster: EmbeddedCluster, leader: int) -> None:
    """Fetch v16 (KIP-951): a follower answers NOT_LEADER_OR_FOLLOWER with the leader, its
    epoch and its endpoint."""
    from sluice.protocol import ErrorCode
    from sluice.protocol.apis import request_type
    from sluice.server.messages import build
    from support.wire import RawClient

    follower = next(b for b in (1, 2, 3) if b != leader)
    client = RawClient(cluster.bootstrap_of(follower))
    try:
        md: Any = client.request(build(request_type(3, 12), topics=[
            {"topic_id": None, "name": TOPIC}], allow_auto_topic_creation=False,
            include_topic_authorized_operations=False))  # fmt: skip
        (topic,) = md.topics
        (meta,) = topic.partitions
        body: Any = client.request(build(
            request_type(1, 16), max_wait=0, min_bytes=0, max_bytes=1 << 20,
            isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
            topics=[{"topic_id": topic.topic_id, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}],
            forgotten_topics_data=[],
        ))  # fmt: skip
    finally:
        client.close()
    (answer,) = body.responses[0].partitions
    assert answer.error_code == ErrorCode.not_leader_or_follower
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (
        leader, meta.leader_epoch,
    )  # fmt: skip
    assert [n.node_id for n in body.node_endpoints] == [leader]
    host, port = cluster.bootstrap_of(leader).rsplit(":", 1)
    assert (body.node_endpoints[0].host, body.node_endpoints[0].port) == (host, int(port))
