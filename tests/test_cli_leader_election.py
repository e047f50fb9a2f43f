"""``sluice leader-election``'s argument checks and JSON file, without a broker (the
elections themselves: tests/cluster/test_cluster_tools.py)."""

from __future__ import annotations

import pytest

from sluice.cli import main
from sluice.cli.arguments import ToolError
from sluice.cli.leader_election import exception_name, parse_json_partitions


def test_json_partitions() -> None:
    text = '{"partitions": [{"topic": "a", "partition": 1}, {"topic": "b", "partition": 0}]}'
    assert parse_json_partitions(text, "f.json") == [("a", 1), ("b", 0)]
    with pytest.raises(ToolError, match="duplicate partitions: a-1"):
        parse_json_partitions(
            '{"partitions": [{"topic": "a", "partition": 1}, {"topic": "a", "partition": 1}]}',
            "f.json",
        )
    for bad in ("[]", "{}", '{"partitions": [{"topic": "a"}]}', "not json"):
        with pytest.raises(ToolError, match=r"f\.json is not a partition list"):
            parse_json_partitions(bad, "f.json")


def test_exception_names() -> None:
    assert exception_name("ELECTION_NOT_NEEDED") == (
        "org.apache.kafka.common.errors.ElectionNotNeededException"
    )
    assert exception_name("PREFERRED_LEADER_NOT_AVAILABLE") == (
        "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--all-topic-partitions"], "--election-type is required"),
        (["--election-type", "dirty", "--all-topic-partitions"], "PREFERRED or UNCLEAN"),
        (["--election-type", "preferred"], "One and only one of the following options"),
        (
            ["--election-type", "preferred", "--all-topic-partitions", "--topic", "t"],
            "One and only one of the following options",
        ),
        (["--election-type", "preferred", "--topic", "t"], "--topic requires --partition"),
        (
            ["--election-type", "preferred", "--all-topic-partitions", "--partition", "0"],
            "--partition requires --topic",
        ),
    ],
)
def test_usage_errors_exit_2_without_connecting(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    # Port 1 accepts nothing: a usage error must come before any connection attempt.
    code = main(["leader-election", "--bootstrap-server", "127.0.0.1:1", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("sluice leader-election: error: ") and message in err
