"""``sluice reassign-partitions``' JSON files and argument checks, without a broker (the
reassignments themselves: tests/cluster/test_cluster_tools.py)."""

from __future__ import annotations

import json

import pytest

from sluice.cli import main
from sluice.cli.arguments import ToolError
from sluice.cli.reassign_partitions import (
    format_reassignment_json,
    parse_reassignment_json,
    parse_topics_to_move_json,
)


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
        (["--list", "--throttle", "100"], "Sluice has no replication throttles"),
        (["--list", "--replica-alter-log-dirs-throttle", "1"], "no replication throttles"),
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
