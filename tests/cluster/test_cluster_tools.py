"""The partition tools on a 3-broker cluster with ZooKeeper: ``sluice leader-election``
brings a displaced preferred leader back, as confluent-kafka and kafka-python then see."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from sluice.cli import main
from sluice.testing import EmbeddedCluster
from support.waiting import wait_until


def _state(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr), as confluent-kafka reads them."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    t = admin.list_topics(topic=topic, timeout=5).topics[topic]
    return {p: (m.leader, list(m.replicas), list(m.isrs)) for p, m in t.partitions.items()}


def _settled(bootstrap: str, topic: str, partitions: int) -> bool:
    state = _state(bootstrap, topic)
    return len(state) == partitions and all(
        leader == replicas[0] and len(isr) == len(replicas)
        for leader, replicas, isr in state.values()
    )


def _displace_leader_of_0(cluster: EmbeddedCluster, topic: str) -> int:
    """Kill partition 0's (preferred) leader, wait for a failover, restart it and wait
    until it is back in the ISR, not leading. Returns its id."""
    leader = _state(cluster.bootstrap_servers, topic)[0][0]
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
def cluster3_manual(cluster_prerequisites: None) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(
        brokers=3,
        broker_ids=[1, 2, 3],
        overrides={"auto.leader.rebalance.enable": False},
        zookeeper=True,
    ) as cluster:
        yield cluster


def _tool(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_leader_election_restores_the_preferred_leader(
    cluster3_manual: EmbeddedCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cluster = cluster3_manual
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("elect", 2, 3)])["elect"].result(15)
    wait_until(lambda: _settled(bootstrap, "elect", 2), 30, "every replica in the ISR")
    preferred = _displace_leader_of_0(cluster, "elect")
    assert _state(bootstrap, "elect")[0][0] != preferred

    file = tmp_path / "elect.json"
    file.write_text(
        json.dumps({"partitions": [{"topic": "elect", "partition": p} for p in (0, 1)]})
    )
    tool = ("leader-election", "--bootstrap-server", bootstrap)
    code, out, err = _tool(
        capsys, *tool, "--election-type", "preferred", "--path-to-json-file", str(file)
    )
    assert (code, err) == (0, ""), err
    assert out == [
        "Successfully completed leader election (PREFERRED) for partitions elect-0",
        "Valid replica already elected for partitions elect-1",
    ]
    wait_until(lambda: _state(bootstrap, "elect")[0][0] == preferred, 15, "the new leader seen")

    from kafka import KafkaAdminClient

    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        described = kadmin.describe_topics(["elect"])[0]
        leaders = {
            p["partition_index"]: (p["leader_id"], p["replica_nodes"][0])
            for p in described["partitions"]
        }
    finally:
        kadmin.close()
    assert all(leader == first for leader, first in leaders.values()), leaders

    # Nothing left to do, for one partition and for all of them.
    code, out, _ = _tool(
        capsys, *tool, "--election-type", "PREFERRED", "--topic", "elect", "--partition", "0"
    )
    assert (code, out) == (0, ["Valid replica already elected for partitions elect-0"])
    code, out, _ = _tool(capsys, *tool, "--election-type", "preferred", "--all-topic-partitions")
    assert code == 0 and len(out) == 1
    assert out[0].startswith("Valid replica already elected for partitions ")
    assert {"elect-0", "elect-1"} <= set(out[0].split("partitions ", 1)[1].split(", "))
    # An unknown partition fails that partition, with Kafka's exception name; exit 1.
    code, out, err = _tool(
        capsys, *tool, "--election-type", "unclean", "--topic", "nope", "--partition", "0"
    )
    assert code == 1
    assert len(out) == 1 and out[0].startswith(
        "Error completing leader election (UNCLEAN) for partition: nope-0: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"
    )
    assert err == "sluice leader-election: error: 1 replica(s) could not be elected\n"


def _replicas(bootstrap: str, topic: str) -> dict[int, list[int]]:
    return {p: replicas for p, (_, replicas, _) in _state(bootstrap, topic).items()}


@pytest.fixture
def cluster3_long_sessions(cluster_prerequisites: None) -> Iterator[EmbeddedCluster]:
    """A SIGSTOPped broker stays registered (and so a valid replica target) for 60 s."""
    with EmbeddedCluster(
        brokers=3,
        broker_ids=[1, 2, 3],
        overrides={"zookeeper.session.timeout.ms": 60_000},
        zookeeper=True,
    ) as cluster:
        yield cluster


def test_reassign_partitions_generate_execute_verify_cancel(
    cluster3_long_sessions: EmbeddedCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from kafka import KafkaAdminClient

    cluster = cluster3_long_sessions
    controller = cluster.controller_id
    paused, other = (b for b in cluster.broker_ids if b != controller)
    # Clients talk to the controller and `other` only: `paused` gets SIGSTOPped below.
    bootstrap = ",".join(cluster.bootstrap_of(b) for b in (controller, other))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic("move", 2, replica_assignment=[[controller, other], [other, controller]])
    admin.create_topics([topic])["move"].result(15)
    wait_until(lambda: _settled(bootstrap, "move", 2), 30, "every replica in the ISR")
    tool = ("reassign-partitions", "--bootstrap-server", bootstrap)

    topics_file = tmp_path / "topics.json"
    topics_file.write_text('{"topics": [{"topic": "move"}], "version": 1}')
    code, out, err = _tool(
        capsys, *tool, "--generate", "--topics-to-move-json-file", str(topics_file),
        "--broker-list", ",".join(map(str, cluster.broker_ids)),
    )  # fmt: skip
    assert (code, err) == (0, ""), err
    assert out[0] == "Current partition replica assignment"
    assert json.loads(out[1]) == {"version": 1, "partitions": [
        {"topic": "move", "partition": 0, "replicas": [controller, other],
         "log_dirs": ["any", "any"]},
        {"topic": "move", "partition": 1, "replicas": [other, controller],
         "log_dirs": ["any", "any"]},
    ]}  # fmt: skip
    assert out[2:4] == ["", "Proposed partition reassignment configuration"]
    proposed = json.loads(out[4])["partitions"]
    assert [(p["topic"], p["partition"]) for p in proposed] == [("move", 0), ("move", 1)]
    for p in proposed:
        assert len(set(p["replicas"])) == 2 and set(p["replicas"]) <= set(cluster.broker_ids)

    # Execute: partition 0 moves from [controller, other] to [other, paused].
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "move", "partition": 0, "replicas": [other, paused]}]}))  # fmt: skip
    code, out, err = _tool(capsys, *tool, "--execute", "--reassignment-json-file", str(plan))
    assert (code, err) == (0, ""), err
    rollback = {"version": 1, "partitions": [{"topic": "move", "partition": 0,
                "replicas": [controller, other], "log_dirs": ["any", "any"]}]}  # fmt: skip
    assert out[:2] == ["Current partition replica assignment", ""]
    assert json.loads(out[2]) == rollback
    assert out[3:] == [
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Successfully started partition reassignment for move-0",
    ]
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        wait_until(lambda: kadmin.list_partition_reassignments() == {}, 60, "the move done")
        wait_until(lambda: _replicas(bootstrap, "move")[0] == [other, paused], 30, "replicas")
        code, out, _ = _tool(capsys, *tool, "--verify", "--reassignment-json-file", str(plan))
        assert (code, out) == (0, [
            "Status of partition reassignment:",
            "Reassignment of partition move-0 is completed.",
            "Clearing broker-level throttles on brokers 1,2,3",
            "Clearing topic-level throttles on topic move",
        ])  # fmt: skip

        # A reassignment that cannot finish while its new replica's broker is stopped.
        back = tmp_path / "back.json"
        back.write_text(json.dumps(rollback))
        wait_until(lambda: _settled(bootstrap, "move", 2), 30, "every replica in the ISR")
        cluster.pause(paused)
        try:
            stuck = tmp_path / "stuck.json"
            stuck.write_text(json.dumps({"version": 1, "partitions": [
                {"topic": "move", "partition": 1, "replicas": [other, paused]}]}))  # fmt: skip
            code, out, err = _tool(
                capsys, *tool, "--execute", "--reassignment-json-file", str(stuck)
            )
            assert code == 0, err
            assert out[-1] == "Successfully started partition reassignment for move-1"
            assert list(kadmin.list_partition_reassignments()) != []
            code, out, _ = _tool(capsys, *tool, "--list")
            assert out == [
                "Current partition reassignments:",
                f"move-1: replicas: {other},{paused},{controller}. adding: {paused}. "
                f"removing: {controller}.",
            ]
            code, out, _ = _tool(capsys, *tool, "--verify", "--reassignment-json-file", str(stuck))
            assert out[1] == "Reassignment of partition move-1 is still in progress."
            code, out, err = _tool(
                capsys, *tool, "--execute", "--reassignment-json-file", str(back)
            )
            assert (code, out) == (1, [])
            assert "Cannot execute because there is an existing partition assignment" in err
            # --preserve-throttles: clearing throttles would ask the paused broker too.
            cancel = (*tool, "--cancel", "--preserve-throttles")
            code, out, err = _tool(capsys, *cancel, "--reassignment-json-file", str(stuck))
            assert (code, err) == (0, ""), err
            assert out == ["Successfully cancelled partition reassignment for: move-1"]
            wait_until(lambda: kadmin.list_partition_reassignments() == {}, 30, "cancelled")
            assert _replicas(bootstrap, "move")[1] == [other, controller]
            code, out, _ = _tool(capsys, *cancel, "--reassignment-json-file", str(stuck))
            assert out == ["None of the specified partition reassignments are active."]
            code, out, _ = _tool(capsys, *tool, "--list")
            assert out == ["No partition reassignments found."]
        finally:
            cluster.resume(paused)
    finally:
        kadmin.close()
