"""``sluice reassign-partitions``: its JSON files, argument checks and throttle values
without a broker, and its replication throttles on an in-process 3-broker cluster, as
confluent-kafka and kafka-python read them (the reassignments themselves, on brokers
with ZooKeeper: tests/cluster/test_cluster_tools.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from sluice.cli import main
from sluice.cli.arguments import ToolError
from sluice.cli.reassign_partitions import (
    follower_throttles,
    format_reassignment_json,
    leader_throttles,
    parse_reassignment_json,
    parse_topics_to_move_json,
    proposed_move_map,
    reassigning_brokers,
)
from sluice.protocol import ApiKey, Request
from sluice.testing import DropConnection, EmbeddedCluster
from support.waiting import wait_until


def test_reassignment_json_round_trips_in_kafkas_format() -> None:
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "b", "partition": 0, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        {"topic": "a", "partition": 2, "replicas": [1, 2]},
    ]})  # fmt: skip
    parsed = parse_reassignment_json(text)
    assert parsed == {("b", 0): [3, 1], ("a", 2): [1, 2]}
    assert format_reassignment_json(parsed) == (
        '{"version":1,"partitions":['
        '{"topic":"a","partition":2,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"b","partition":0,"replicas":[3,1],"log_dirs":["any","any"]}]}'
    )


@pytest.mark.parametrize(
    ("partitions", "message"),
    [
        ([], "Partition reassignment list cannot be empty"),
        (
            [{"topic": "a", "partition": 0, "replicas": [1]}] * 2,
            "contains duplicate topic partitions: a-0",
        ),
        ([{"topic": "a", "partition": 0, "replicas": [1, 1]}], "may not contain duplicate"),
        ([{"topic": "a", "partition": 0, "replicas": []}], "replica list cannot be empty"),
        (
            [{"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}],
            "is different from size of log dirs",
        ),
        (
            [{"topic": "a", "partition": 0, "replicas": [1], "log_dirs": ["/data"]}],
            'log_dirs other than "any" are not supported',
        ),
        ([{"topic": "a", "replicas": [1]}], "the reassignment must read"),
    ],
)
def test_bad_reassignment_files(partitions: list[object], message: str) -> None:
    with pytest.raises(ToolError) as raised:
        parse_reassignment_json(json.dumps({"version": 1, "partitions": partitions}))
    assert message in str(raised.value)


def test_topics_to_move() -> None:
    assert parse_topics_to_move_json('{"topics": [{"topic": "a"}, {"topic": "b"}]}') == ["a", "b"]
    with pytest.raises(ToolError, match="duplicate entries: a"):
        parse_topics_to_move_json('{"topics": [{"topic": "a"}, {"topic": "a"}]}')
    with pytest.raises(ToolError, match="the topics to move must read"):
        parse_topics_to_move_json('{"topic": "a"}')


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "exactly one action"),
        (["--verify", "--cancel"], "exactly one action"),
        (["--execute"], "--execute requires --reassignment-json-file"),
        (["--generate", "--topics-to-move-json-file", "t.json"], "requires --broker-list"),
        (["--generate", "--broker-list", "1,2"], "requires --topics-to-move-json-file"),
        (
            ["--generate", "--topics-to-move-json-file", "t.json", "--broker-list", "1,1"],
            "Broker list contains duplicate entries: 1",
        ),
        (["--list", "--throttle", "100"], "--throttle is only for --execute"),
        (["--verify", "--reassignment-json-file", "r.json", "--throttle", "1"], "only for"),
        (["--execute", "--reassignment-json-file", "r.json", "--throttle", "-1"], "at least 0"),
        (["--execute", "--reassignment-json-file", "r.json", "--throttle", "1.5"], "whole"),
        (["--execute", "--reassignment-json-file", "r.json", "--throttle", "1kB"], "whole"),
        (["--execute", "--reassignment-json-file", "r.json", "--throttle", ""], "whole"),
        (
            [
                "--execute",
                "--reassignment-json-file",
                "r.json",
                "--replica-alter-log-dirs-throttle",
                "1000",
            ],
            "this tool makes none",
        ),
        (["--execute", "--reassignment-json-file", "r.json", "--preserve-throttles"], "only"),
        (["--list", "--additional"], "--additional is only for --execute"),
    ],
)
def test_usage_errors_exit_2_without_connecting(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code = main(["reassign-partitions", "--bootstrap-server", "127.0.0.1:1", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("sluice reassign-partitions: error: ") and message in err


def test_throttles_of_new_moves() -> None:
    """No reassignment in progress: leaders throttle the current replicas, followers the
    added ones; the entries sort as strings, as Kafka's TreeSet does."""
    proposed = {("t", 0): [2, 3], ("t", 10): [2, 1], ("u", 1): [4]}
    current = {("t", 0): [1, 2], ("t", 10): [1, 2], ("u", 1): [5]}
    moves = proposed_move_map({}, proposed, current)
    assert leader_throttles(moves) == {"t": "0:1,0:2,10:1,10:2", "u": "1:5"}
    assert follower_throttles(moves) == {"t": "0:3", "u": "1:4"}
    assert reassigning_brokers(moves) == [1, 2, 3, 4, 5]


def test_throttles_merge_with_reassignments_in_progress() -> None:
    """A partition still moving keeps its sources (replicas but the adding ones); every
    reassignment in progress is throttled too."""
    ongoing = {("t", 0): ([1, 2, 3], [3], [1]), ("v", 2): ([6, 7], [7], [])}
    proposed = {("t", 0): [2, 4]}
    current = {("t", 0): [1, 2, 3]}
    moves = proposed_move_map(ongoing, proposed, current)
    assert leader_throttles(moves) == {"t": "0:1,0:2", "v": "2:6"}
    assert follower_throttles(moves) == {"t": "0:4", "v": "2:7"}
    assert reassigning_brokers(moves) == [1, 2, 4, 6, 7]


@pytest.fixture(scope="module")
def cluster3() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers=3) as cluster:
        yield cluster


class _Starve:
    """Drops the leader's answers to the replica fetches of ``held`` brokers: a
    reassignment adding one of them stays in progress while every broker answers."""

    def __init__(self) -> None:
        self.held: set[int] = set()
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> None:
        body = request.body
        replica = getattr(body, "replica_id", -1)
        state = getattr(body, "replica_state", None)
        if state is not None and getattr(state, "replica_id", -1) >= 0:
            replica = state.replica_id
        with self.lock:
            if replica in self.held:
                raise DropConnection


def _tool(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def _configs(admin: AdminClient, kind: str, name: str) -> dict[str, tuple[str | None, bool]]:
    """name -> (value, set dynamically on this resource), as confluent-kafka reads them."""
    resource = ConfigResource(kind, name)
    entries = admin.describe_configs([resource])[resource].result(timeout=15)
    own = (ConfigSource.DYNAMIC_BROKER_CONFIG.value, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    return {n: (e.value, e.source in own) for n, e in entries.items()}


def _rates(admin: AdminClient, broker: int) -> tuple[str | None, str | None]:
    configs = _configs(admin, "broker", str(broker))
    rates = [configs[f"{side}.replication.throttled.rate"] for side in ("leader", "follower")]
    return (rates[0][0] if rates[0][1] else None, rates[1][0] if rates[1][1] else None)


def _replicas_throttled(admin: AdminClient, topic: str) -> tuple[str | None, str | None]:
    configs = _configs(admin, "topic", topic)
    values = [configs[f"{side}.replication.throttled.replicas"] for side in ("leader", "follower")]
    return (values[0][0] if values[0][1] else None, values[1][0] if values[1][1] else None)


@pytest.mark.integration  # an in-process cluster on loopback sockets
def test_throttles_set_updated_and_cleared(
    cluster3: EmbeddedCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType

    cluster = cluster3
    b0, b1, b2 = cluster.broker_ids
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("thr", 1, replica_assignment=[[b0, b1]])])["thr"].result(15)

    def settled(replicas: list[int]) -> bool:
        t = admin.list_topics(topic="thr", timeout=5).topics["thr"].partitions[0]
        return t.leader == b0 and list(t.replicas) == replicas and list(t.isrs) == replicas

    wait_until(lambda: settled([b0, b1]), 30, "both replicas in the ISR")
    starve = _Starve()
    control = cluster.control(b0, ApiKey.FETCH, starve, keep=True)
    tool = ("reassign-partitions", "--bootstrap-server", bootstrap)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "thr", "partition": 0, "replicas": [b0, b2]}]}))  # fmt: skip
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        # --execute --throttle: b2 cannot catch up, so the reassignment stays in progress.
        with starve.lock:
            starve.held = {b2}
        code, out, err = _tool(capsys, *tool, "--execute", "--reassignment-json-file",
                               str(plan), "--throttle", "1000000")  # fmt: skip
        assert (code, err) == (0, ""), err
        assert out[3:] == [
            "",
            "Save this to use as the --reassignment-json-file option during rollback",
            "Warning: You must run --verify periodically, until the reassignment completes, "
            "to ensure the throttle is removed.",
            "The inter-broker throttle limit was set to 1000000 B/s",
            "Successfully started partition reassignment for thr-0",
        ]
        for broker in (b0, b1, b2):
            assert _rates(admin, broker) == ("1000000", "1000000")
        assert _replicas_throttled(admin, "thr") == (f"0:{b0},0:{b1}", f"0:{b2}")
        # kafka-python reads the same configs.
        topic = kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "thr")])
        topic_entries = topic["topic"]["thr"]
        assert topic_entries["leader.replication.throttled.replicas"]["value"] == f"0:{b0},0:{b1}"
        assert topic_entries["follower.replication.throttled.replicas"]["value"] == f"0:{b2}"
        broker = kadmin.describe_configs(
            [KConfigResource(ConfigResourceType.BROKER, str(b2))], config_filter="dynamic"
        )["broker"][str(b2)]
        assert broker["leader.replication.throttled.rate"]["value"] == "1000000"
        assert broker["follower.replication.throttled.rate"]["value"] == "1000000"

        # --verify while in progress leaves the throttles.
        code, out, _ = _tool(capsys, *tool, "--verify", "--reassignment-json-file", str(plan))
        assert (code, out) == (
            0,
            [
                "Status of partition reassignment:",
                "Reassignment of partition thr-0 is still in progress.",
            ],
        )
        assert _rates(admin, b1) == ("1000000", "1000000")

        # Without --additional, a second --execute is refused; with it, the rate changes.
        code, _, err = _tool(capsys, *tool, "--execute", "--reassignment-json-file",
                             str(plan), "--throttle", "2000000")  # fmt: skip
        assert code == 1 and "The --additional flag can also be used to change" in err
        code, out, err = _tool(
            capsys,
            *tool,
            "--execute",
            "--additional",
            "--reassignment-json-file",
            str(plan),
            "--throttle",
            "2000000",
        )
        assert (code, err) == (0, ""), err
        assert "The inter-broker throttle limit was set to 2000000 B/s" in out
        for broker in (b0, b1, b2):
            assert _rates(admin, broker) == ("2000000", "2000000")
        assert _replicas_throttled(admin, "thr") == (f"0:{b0},0:{b1}", f"0:{b2}")

        # Once complete: --preserve-throttles keeps them, a plain --verify clears them.
        with starve.lock:
            starve.held = set()
        wait_until(lambda: kadmin.list_partition_reassignments() == {}, 30, "the move done")
        wait_until(lambda: settled([b0, b2]), 30, "the new replica set")
        verify = (*tool, "--verify", "--reassignment-json-file", str(plan))
        code, out, _ = _tool(capsys, *verify, "--preserve-throttles")
        assert (code, out) == (
            0,
            ["Status of partition reassignment:", "Reassignment of partition thr-0 is completed."],
        )
        assert _rates(admin, b2) == ("2000000", "2000000")
        code, out, _ = _tool(capsys, *verify)
        assert (code, out[1:]) == (0, [
            "Reassignment of partition thr-0 is completed.",
            f"Clearing broker-level throttles on brokers {b0},{b1},{b2}",
            "Clearing topic-level throttles on topic thr",
        ])  # fmt: skip
        for broker in (b0, b1, b2):
            assert _rates(admin, broker) == (None, None)
        assert _replicas_throttled(admin, "thr") == (None, None)

        # --cancel clears them too.
        back = tmp_path / "back.json"
        back.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "thr", "partition": 0, "replicas": [b0, b1]}]}))  # fmt: skip
        with starve.lock:
            starve.held = {b1}
        code, out, err = _tool(capsys, *tool, "--execute", "--reassignment-json-file",
                               str(back), "--throttle", "0")  # fmt: skip
        assert (code, err) == (0, ""), err
        assert _rates(admin, b1) == ("0", "0")
        assert _replicas_throttled(admin, "thr") == (f"0:{b0},0:{b2}", f"0:{b1}")
        code, out, err = _tool(capsys, *tool, "--cancel", "--reassignment-json-file", str(back))
        assert (code, err) == (0, ""), err
        assert out == [
            "Successfully cancelled partition reassignment for: thr-0",
            f"Clearing broker-level throttles on brokers {b0},{b1},{b2}",
            "Clearing topic-level throttles on topic thr",
        ]
        assert _rates(admin, b1) == (None, None)
        assert _replicas_throttled(admin, "thr") == (None, None)
    finally:
        control.remove()
        kadmin.close()
